package command

import (
	"fmt"
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
		return nil, fmt.Errorf("command: raft group %d", g)
	}
	return c, d.finish()
}

// SetReplicasCommand records, in group 0, the nodes that should replicate
// data group Group, its preferred leader first. The group's leader then
// adds the new ones (as non-voters until they catch up, then as voters)
// and removes the others (raftgroups); each node starts or drops its
// member of the group to match. An empty list forgets the record: the
// static placement applies again. The answer is nothing.
type SetReplicasCommand struct {
	Group    uint32
	Replicas []string
}

// MaxReplicas bounds SetReplicasCommand.Replicas (raftgroups'
// MaxReplicationFactor is the same).
const MaxReplicas = 5

func (c *SetReplicasCommand) since() LogFormat { return LogFormat12 }

// Encode returns the raft entry for the command.
func (c *SetReplicasCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdSetReplicas))
	e.uvarint(uint64(c.Group))
	e.uvarint(uint64(len(c.Replicas)))
	for _, r := range c.Replicas {
		e.string(r)
	}
	return e.b
}

func decodeSetReplicas(b []byte) (*SetReplicasCommand, error) {
	d := decoder{b: b}
	g, n := d.uvarint(), d.uvarint()
	if g > 1<<32-1 || n > MaxReplicas {
		return nil, fmt.Errorf("command: raft group %d with %d replicas", g, n)
	}
	c := &SetReplicasCommand{Group: uint32(g)}
	for range n {
		c.Replicas = append(c.Replicas, d.string())
	}
	return c, d.finish()
}
