package command

import "github.com/waggle-mq/waggle/store"

// SaveClassicGroupCommand records a classic Kafka consumer group's
// generation (its members and their assignments) once the group's leader
// has assigned it, so a new raft leader coordinates the group from there
// instead of making every member rejoin. A group without members removes
// the record. Saves may land out of order: the store keeps the newest
// generation (store.Tx.SaveClassicGroup). The answer is nothing.
type SaveClassicGroupCommand struct {
	Group store.ClassicGroup
}

func (c *SaveClassicGroupCommand) since() LogFormat { return LogFormat6 }

// MaxClassicGroupBytes bounds a recorded group's entry: a group whose
// members' subscriptions and assignments take more is coordinated without
// a record (as before log format 6: its members rejoin after a leader
// change).
const MaxClassicGroupBytes = 1 << 20

// minClassicMemberSize is the fewest bytes one encoded member takes.
const minClassicMemberSize = 9

// Encode returns the raft entry for the command.
func (c *SaveClassicGroupCommand) Encode() []byte {
	g := c.Group
	e := encoder{}
	e.byte(byte(CmdSaveClassicGroup))
	e.string(g.Name)
	e.string(g.ProtocolType)
	e.string(g.Protocol)
	e.varint(int64(g.Generation))
	e.string(g.Leader)
	e.uvarint(uint64(len(g.Members)))
	for _, m := range g.Members {
		e.string(m.ID)
		e.string(m.InstanceID)
		e.string(m.ClientID)
		e.string(m.ClientHost)
		e.varint(int64(m.SessionTimeoutMs))
		e.varint(int64(m.RebalanceTimeoutMs))
		e.uvarint(uint64(len(m.Protocols)))
		for _, p := range m.Protocols {
			e.string(p.Name)
			e.bytes(p.Metadata)
		}
		e.bytes(m.Assignment)
	}
	return e.b
}

func decodeSaveClassicGroup(b []byte) (*SaveClassicGroupCommand, error) {
	d := decoder{b: b}
	g := store.ClassicGroup{Name: d.string(), ProtocolType: d.string(), Protocol: d.string(),
		Generation: int32(d.varint()), Leader: d.string()}
	g.Members = make([]store.ClassicMember, d.count(minClassicMemberSize))
	for i := range g.Members {
		m := store.ClassicMember{ID: d.string(), InstanceID: d.string(), ClientID: d.string(), ClientHost: d.string(),
			SessionTimeoutMs: int32(d.varint()), RebalanceTimeoutMs: int32(d.varint())}
		m.Protocols = make([]store.ClassicProtocol, d.count(2))
		for j := range m.Protocols {
			m.Protocols[j] = store.ClassicProtocol{Name: d.string(), Metadata: d.bytes()}
		}
		m.Assignment = d.bytes()
		g.Members[i] = m
	}
	return &SaveClassicGroupCommand{Group: g}, d.finish()
}
