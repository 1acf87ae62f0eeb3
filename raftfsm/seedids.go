package raftfsm

import (
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
type SeedIDsCommand struct {
	Base uint64
}

func (c *SeedIDsCommand) since() LogFormat { return LogFormat2 }

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

// DecodeAnswer reads back an answer of command type t written as JSON (a
// request outcome, or an answer sent from the leader to another node).
func DecodeAnswer(t CommandType, b []byte) (any, error) {
	dec, ok := answerDecoders[t]
	if !ok {
		return nil, fmt.Errorf("raftfsm: no command type %d", t)
	}
	return dec(b)
}
