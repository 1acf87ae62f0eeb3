package raftfsm

import (
	"testing"

	"github.com/waggle-mq/waggle/recordbatch"
)

func produceCmd(nowMs int64, topic string, batches ...ProduceBatch) []byte {
	c := ProduceCommand{NowMs: nowMs, Topic: topic, AutoCreatePartitions: 1, Batches: batches}
	return c.Encode()
}

func idemBatch(producer int64, epoch int16, seq, n int32) ProduceBatch {
	var recs []recordbatch.Record
	for i := range n {
		recs = append(recs, recordbatch.Record{Offset: int64(i), Value: []byte("v")})
	}
	return ProduceBatch{NumRecords: n, ProducerID: producer, ProducerEpoch: epoch, FirstSequence: seq, Raw: recordbatch.Build(0, recs)}
}

// The idempotent producer's state is applied by the state machine, so a
// resend is recognised on any replica, also one restored from a snapshot.
func TestProduceRecognisesResentIdempotentBatches(t *testing.T) {
	f := newFSM(t)
	answers := f.ApplyBatch(logs(1,
		produceCmd(1, "t", idemBatch(7, 0, 0, 3)),
		produceCmd(2, "t", idemBatch(7, 0, 3, 2)),
		produceCmd(3, "t", idemBatch(7, 0, 0, 3)), // resend of the first
		produceCmd(4, "t", idemBatch(7, 0, 9, 1)), // gap
		produceCmd(5, "t", idemBatch(7, 1, 0, 1)), // new epoch from 0
		produceCmd(6, "t", idemBatch(7, 0, 5, 1)), // stale epoch
		produceCmd(7, "t", idemBatch(-1, -1, -1, 2)),
	))
	want := []struct {
		outcome TopicOutcome
		base    int64
	}{{TopicOK, 0}, {TopicOK, 3}, {TopicOK, 0}, {SequenceOutOfOrder, -1}, {TopicOK, 5}, {ProducerFenced, -1}, {TopicOK, 6}}
	for i, w := range want {
		got := answers[i].(ProduceResult)
		if got.Outcome != w.outcome || got.BaseOffset != w.base {
			t.Fatalf("produce %d: outcome %d base %d, want %d base %d", i, got.Outcome, got.BaseOffset, w.outcome, w.base)
		}
	}

	// Restored elsewhere from a snapshot, the state still knows the batches.
	snap, _ := f.Snapshot()
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	g := newFSM(t)
	if err := g.Restore(sink.reader()); err != nil {
		t.Fatal(err)
	}
	if got := g.ApplyBatch(logs(8, produceCmd(8, "t", idemBatch(7, 1, 0, 1))))[0].(ProduceResult); got.BaseOffset != 5 {
		t.Fatalf("resend after restore: base %d, want the original 5", got.BaseOffset)
	}
}
