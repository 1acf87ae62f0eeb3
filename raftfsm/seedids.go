package raftfsm

import (
	"encoding/json"
	"fmt"

	"github.com/waggle-mq/waggle/store"
)

// SeedIDsCommand raises the replicated id counter to at least Base. A data
// group's leader applies it before the group's first write, with Base the
// group's own id range (placement.IDBase), so the ids the group mints (dead
// letters, Kafka producer ids) are unique across the cluster's groups and
// name the group that minted them. Raising to a value already passed
// changes nothing, so a repeat is harmless. The answer is the counter after
// the entry.
//
// It needs no log format (no since): it is proposed only in data groups,
// whose members all run binaries that have it, while group 0 may still
// wait for a rolling upgrade to finish (the group's first write cannot
// wait for that).
type SeedIDsCommand struct {
	Base uint64
}

// Encode returns the raft entry for the command.
func (c *SeedIDsCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdSeedIDs))
	e.uvarint(c.Base)
	return e.b
}

func decodeSeedIDs(b []byte) (*SeedIDsCommand, error) {
	d := decoder{b: b}
	c := &SeedIDsCommand{Base: d.uvarint()}
	return c, d.finish()
}

func (p *Processor) seedIDs(_ *store.Tx, meta *store.Meta, c *SeedIDsCommand) uint64 {
	meta.NextID = max(meta.NextID, c.Base)
	return meta.NextID
}

// DecodeAnswer reads back the answer, written as JSON, to entry (a command
// as Encode writes it), typed as the command declares it: a keyed entry's
// answer holds its inner command's answer.
func DecodeAnswer(entry, answer []byte) (any, error) {
	if err := CheckEntry(entry); err != nil {
		return nil, err
	}
	t := CommandType(entry[0])
	a, err := answerDecoders[t](answer)
	if err != nil || t != CmdKeyed {
		return a, err
	}
	keyed, _ := DecodeCommand(entry) // CheckEntry decoded it
	r := a.(KeyedResult)
	var raw struct{ Answer json.RawMessage }
	if err := json.Unmarshal(answer, &raw); err != nil {
		return nil, err
	}
	if r.Answer == nil {
		return r, nil
	}
	r.Answer, err = answerDecoders[CommandType(keyed.(*KeyedCommand).Inner[0])](raw.Answer)
	return r, err
}

// PreferLeaderCommand records, in group 0, the node raft group Group
// should be led by (Node "" forgets the preference: the group goes back to
// the voter its id picks). The leader of that group hands leadership over
// whenever the node can lead (raftgroups). The answer is nothing.
type PreferLeaderCommand struct {
	Group uint32
	Node  string
}

func (c *PreferLeaderCommand) since() LogFormat { return LogFormat2 }

// Encode returns the raft entry for the command.
func (c *PreferLeaderCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdPreferLeader))
	e.uvarint(uint64(c.Group))
	e.string(c.Node)
	return e.b
}

func decodePreferLeader(b []byte) (*PreferLeaderCommand, error) {
	d := decoder{b: b}
	g := d.uvarint()
	c := &PreferLeaderCommand{Group: uint32(g), Node: d.string()}
	if g > 1<<32-1 {
		return nil, fmt.Errorf("raftfsm: raft group %d", g)
	}
	return c, d.finish()
}

func (p *Processor) preferLeader(tx *store.Tx, _ *store.Meta, c *PreferLeaderCommand) any {
	if c.Node == "" {
		must(tx.DeleteLeaderPreference(c.Group))
	} else {
		must(tx.PutLeaderPreference(c.Group, c.Node))
	}
	return nil
}
