package command

import (
	"github.com/waggle-mq/waggle/store"
)

// CompactCommand runs one bounded step of log compaction on a compacted
// queue (cleanup.policy=compact or compact,delete; see store/compact.go).
// With no pass in progress it starts one at the leader's proposed cut: the
// end (Cut) of the sealed segment at CutBase, or with Seal the active
// segment, sealed first; the state machine checks the proposal against
// replicated state (min.compaction.lag.ms, segment.ms) and ignores one that
// no longer holds. The leader proposes further entries while the answer
// says More.
type CompactCommand struct {
	NowMs   int64
	QueueID uint64
	Cut     uint64
	CutBase uint64
	Seal    bool
}

// CompactResult answers a compaction entry.
type CompactResult = store.CompactOutcome

func (c *CompactCommand) since() LogFormat { return LogFormat2 }

// Encode returns the raft entry for the command.
func (c *CompactCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdCompact))
	e.varint(c.NowMs)
	e.uvarint(c.QueueID)
	e.uvarint(c.Cut)
	e.uvarint(c.CutBase)
	e.bool(c.Seal)
	return e.b
}

func decodeCompact(b []byte) (*CompactCommand, error) {
	d := decoder{b: b}
	c := &CompactCommand{NowMs: d.varint(), QueueID: d.uvarint(), Cut: d.uvarint(), CutBase: d.uvarint()}
	c.Seal = d.byte() != 0
	return c, d.finish()
}
