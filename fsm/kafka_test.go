package fsm

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

func produceCmd(nowMs int64, topic string, batches ...command.ProduceBatch) []byte {
	c := command.ProduceCommand{NowMs: nowMs, Topic: topic, AutoCreatePartitions: 1, Batches: batches}
	return c.Encode()
}

func idemBatch(producer int64, epoch int16, seq, n int32) command.ProduceBatch {
	var recs []recordbatch.Record
	for i := range n {
		recs = append(recs, recordbatch.Record{Offset: int64(i), Value: []byte("v")})
	}
	return command.ProduceBatch{NumRecords: n, ProducerID: producer, ProducerEpoch: epoch, FirstSequence: seq, Raw: recordbatch.Build(0, recs)}
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
		outcome command.TopicOutcome
		base    int64
	}{{command.TopicOK, 0}, {command.TopicOK, 3}, {command.TopicOK, 0}, {command.SequenceOutOfOrder, -1}, {command.TopicOK, 5}, {command.ProducerFenced, -1}, {command.TopicOK, 6}}
	for i, w := range want {
		got := answers[i].(command.ProduceResult)
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
	if got := g.ApplyBatch(logs(8, produceCmd(8, "t", idemBatch(7, 1, 0, 1))))[0].(command.ProduceResult); got.BaseOffset != 5 {
		t.Fatalf("resend after restore: base %d, want the original 5", got.BaseOffset)
	}
}

// A stored batch carries the raft term of the entry that appended it as
// its partition leader epoch (KIP-101), whatever the producer sent, so a
// consumer's KIP-320 checks see the epoch Metadata reports.
func TestProduceStampsTheTermAsLeaderEpoch(t *testing.T) {
	f := newFSM(t)
	// At log format 1 batches carry 0, as release v0.1.0 stores them.
	f.ApplyBatch(logs(1, produceCmd(1, "v1", idemBatch(-1, -1, -1, 1)), (&command.SetLogFormatCommand{Format: command.LogFormat2}).Encode()))
	if epochs := batchEpochs(t, f, "v1"); !slices.Equal(epochs, []int32{0}) {
		t.Fatalf("a batch appended at log format 1 carries leader epochs %v, want [0]", epochs)
	}
	for i, term := range []uint64{3, 9} {
		l := logs(uint64(i+3), produceCmd(int64(i+3), "t", idemBatch(-1, -1, -1, 1)))[0]
		l.Term = term
		if got := f.ApplyBatch([]*raft.Log{l})[0].(command.ProduceResult); got.Outcome != command.TopicOK || got.BaseOffset != int64(i) {
			t.Fatalf("produce in term %d: %+v", term, got)
		}
	}
	if epochs := batchEpochs(t, f, "t"); !slices.Equal(epochs, []int32{3, 9}) {
		t.Errorf("batches carry leader epochs %v, want the terms [3 9]", epochs)
	}
}

// batchEpochs lists the partition leader epoch of every batch stored in
// partition 0 of topic.
func batchEpochs(t *testing.T, f *FSM, topic string) (epochs []int32) {
	t.Helper()
	inPartition0(t, f, topic, func(tx *store.Tx, _ store.Queue, p store.Partition) error {
		entries, err := tx.Entries(p.ID, 0, 1<<20, 10)
		for _, e := range entries {
			epochs = append(epochs, int32(binary.BigEndian.Uint32(e.Batch[12:])))
		}
		return err
	})
	return epochs
}
