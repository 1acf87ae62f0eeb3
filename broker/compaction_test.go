package broker

import (
	"testing"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// max.compaction.lag.ms makes a pass due, and seals an active segment that
// old, however little of the log is dirty.
func TestMaxCompactionLagForcesAPass(t *testing.T) {
	q := store.Queue{Name: "t", CleanupPolicy: store.PolicyCompact, KafkaCreated: true}
	c := store.CompactionCandidate{
		State: store.CompactState{LastCut: 900, LastDoneMs: 30_000},
		End:   1000, ActiveBase: 900, ActiveSinceMs: 20_000, LastAppendMs: 20_000,
	}
	const now = 100_000
	if _, ok := compactionProposal(q, c, now, 0); ok {
		t.Fatal("10% dirty, under min.cleanable.dirty.ratio and no max lag: a pass was proposed")
	}
	q.SetConfig(command.ConfigMaxCompactionLagMs, 120_000)
	if _, ok := compactionProposal(q, c, now, 0); ok {
		t.Fatal("max.compaction.lag.ms not yet passed since the last pass: a pass was proposed")
	}
	q.SetConfig(command.ConfigMaxCompactionLagMs, 60_000)
	p, ok := compactionProposal(q, c, now, 0)
	if !ok || !p.Seal {
		t.Fatalf("70 s since the last pass, max lag 60 s: %+v, %v; want a pass sealing the 80 s old active segment", p, ok)
	}
	c.State.LastCut = 1000 // nothing dirty: nothing to do
	if _, ok := compactionProposal(q, c, now, 0); ok {
		t.Fatal("a pass proposed with nothing dirty")
	}
}
