package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/raftnode"
	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

// startService runs a single-node raft over a fresh store and returns the
// service once the node leads.
func startService(t testing.TB) *Service {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// Port 0: raft binds a port the system picks and advertises it.
	node, err := raftnode.StartNode(raftnode.NodeConfig{ID: "1", RaftAddr: "127.0.0.1:0", Dir: t.TempDir()}, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Shutdown() })
	for deadline := time.Now().Add(10 * time.Second); node.Raft.State() != raft.Leader; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no leader after 10 s")
		}
	}
	return New("1", node, st)
}

// produceOne appends one record to partition 0 of topic.
func produceOne(t *testing.T, s *Service, topic string) {
	t.Helper()
	b, err := recordbatch.Parse(recordbatch.Build(0, []recordbatch.Record{{Value: []byte("x")}}))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.ProduceAsync(topic, 0, 0, []recordbatch.Batch{b})(); err != nil || res.Outcome != command.TopicOK {
		t.Fatalf("produce: %+v, %v", res, err)
	}
}

// Regression test for a lost wake-up: ReadPartition took the append signal
// inside its read transaction, after badger fixed the snapshot, so an
// append committed in between was neither read nor signalled and a Kafka
// long-poll fetch slept until MaxWait. Here an append is applied at exactly
// that moment (afterReadSnapshot); the read must then either return the
// record or hand back a signal that already fired. Both the partition not
// written yet (signalled through its queue) and a written one are covered.
func TestReadPartitionSignalCoversAppendDuringRead(t *testing.T) {
	s := startService(t)
	if outcome, err := s.CreateTopic("t", 1, nil); err != nil || outcome != command.TopicOK {
		t.Fatalf("create topic: %v, %v", outcome, err)
	}
	t.Cleanup(func() { afterReadSnapshot = nil })
	for offset := range int64(2) { // offset 0: no partition yet; 1: partition exists
		afterReadSnapshot = func() {
			afterReadSnapshot = nil
			produceOne(t, s, "t")
		}
		log, err := s.ReadPartition("t", 0, offset, 1<<20, false)
		if err != nil || log.Outcome != command.TopicOK {
			t.Fatalf("read at %d: %v, %v", offset, log.Outcome, err)
		}
		if afterReadSnapshot != nil {
			t.Fatal("the hook did not run")
		}
		select {
		case <-log.Appended:
		default:
			if len(log.Batches) == 0 {
				t.Fatalf("read at %d: the append during the read is neither in the answer nor signalled", offset)
			}
		}
	}
}

// A push, alone or in a transaction, to a compacted queue is refused:
// compaction keeps the newest record per key and a push has none. A queue
// that only deletes takes it.
func TestPushToACompactedQueueIsRefused(t *testing.T) {
	s := startService(t)
	if err := s.RaiseLogFormat(command.LogFormat2); err != nil { // compaction settings are format 2
		t.Fatal(err)
	}
	compact := []command.TopicSetting{{Name: command.ConfigCleanupPolicy, Value: store.PolicyCompact}}
	if outcome, err := s.CreateTopic("latest", 1, compact); err != nil || outcome != command.TopicOK {
		t.Fatalf("create compacted topic: %v, %v", outcome, err)
	}
	if outcome, err := s.CreateTopic("plain", 1, nil); err != nil || outcome != command.TopicOK {
		t.Fatalf("create topic: %v, %v", outcome, err)
	}
	ctx := context.Background()
	item := func(queue string) PushItem { return PushItem{Queue: queue, Partition: "0", Payload: []byte(`1`)} }
	if _, err := s.Push(ctx, []PushItem{item("plain"), item("latest")}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "latest is compacted") {
		t.Fatalf("push to a compacted queue answered %v", err)
	}
	txn := []TxnOp{{Type: "push", Items: []PushItem{item("latest")}}}
	if _, err := s.Transaction(ctx, TransactionRequest{Ops: txn}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("transaction pushing to a compacted queue answered %v", err)
	}
	if res, err := s.Push(ctx, []PushItem{item("plain")}); err != nil || res[0].Status != StatusQueued {
		t.Fatalf("push to a deleting queue: %+v, %v", res, err)
	}
}
