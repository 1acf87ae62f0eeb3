package fsm

import (
	"testing"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// deadLetterOne dead-letters the only message of queue "q" (retry limit 0)
// and returns the dead letter.
func deadLetterOne(t *testing.T, f *FSM, window int64) store.DeadLetter {
	t.Helper()
	limit := int32(0)
	cfg := command.ConfigureQueueCommand{NowMs: 1, Queue: "q", Options: command.QueueOptions{RetryLimit: &limit, DedupWindowSeconds: &window}}
	f.ApplyBatch(logs(1, cfg.Encode(), push(2, item("q", "p", "x", 1))))
	pop := f.ApplyBatch(logs(3, popCmd(10, "g", "L", 1, 60_000)))[0].(command.PopResult)
	res := f.ApplyBatch(logs(4, ackCmd(11, "g", command.Ack{PartitionID: pop.PartitionID, LeaseID: "L", TransactionID: "x", Status: command.AckFailed, Error: "boom"})))[0].([]command.AckResult)[0]
	if !res.DeadLettered {
		t.Fatalf("the failed message was not dead-lettered: %+v", res)
	}
	var dls []store.DeadLetter
	err := f.store.View(func(tx *store.Tx) error {
		var err error
		dls, err = tx.DeadLetters(0, 10)
		return err
	})
	if err != nil || len(dls) != 1 {
		t.Fatalf("dead letters %+v, %v", dls, err)
	}
	return dls[0]
}

// A replay pushes the copy once and marks the dead letter; replaying again
// answers the first copy as a duplicate, even on a queue without dedup.
func TestReplayDeadLetterOnceAndMarksIt(t *testing.T) {
	f := newFSM(t)
	dl := deadLetterOne(t, f, 0)
	replay := func(index uint64, now int64, tag byte) command.ReplayResult {
		c := command.ReplayDeadLetterCommand{NowMs: now, ID: dl.ID, MessageID: [16]byte{tag}}
		return f.ApplyBatch(logs(index, c.Encode()))[0].(command.ReplayResult)
	}
	first := replay(5, 20, 7)
	if !first.Found || first.Push.Status != command.PushQueued || first.Push.Offset != 1 || first.Push.MessageID != [16]byte{7} {
		t.Fatalf("first replay: %+v", first)
	}
	again := replay(6, 30, 8)
	if !again.Found || again.Push.Status != command.PushDuplicate || again.Push.Offset != 1 || again.Push.MessageID != [16]byte{7} {
		t.Fatalf("second replay: %+v, want the first copy as a duplicate", again)
	}
	err := f.store.View(func(tx *store.Tx) error {
		got, err := tx.DeadLetterByID(dl.ID)
		if err != nil {
			return err
		}
		if r := got.Replayed; r == nil || r.AtMs != 20 || r.Offset != 1 || r.MessageID != [16]byte{7} {
			t.Errorf("dead letter's replay mark: %+v", r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// One copy was stored: the group pops it, and nothing after it.
	requirePop(t, f.ApplyBatch(logs(7, popCmd(40, "g", "L2", 10, 60_000)))[0], []int64{1}, nil)
}

func TestDeleteDeadLetters(t *testing.T) {
	f := newFSM(t)
	dl := deadLetterOne(t, f, 3600)
	del := command.DeleteDeadLettersCommand{IDs: []uint64{dl.ID, dl.ID + 1000}}
	if n := f.ApplyBatch(logs(5, del.Encode()))[0].(int); n != 1 {
		t.Fatalf("deleted %d dead letters, want 1 (the other id does not exist)", n)
	}
	if n := f.ApplyBatch(logs(6, del.Encode()))[0].(int); n != 0 {
		t.Fatalf("deleting again removed %d", n)
	}
	c := command.ReplayDeadLetterCommand{NowMs: 20, ID: dl.ID}
	if r := f.ApplyBatch(logs(7, c.Encode()))[0].(command.ReplayResult); r.Found {
		t.Fatalf("a deleted dead letter was replayed: %+v", r)
	}
	big := command.DeleteDeadLettersCommand{IDs: make([]uint64, command.MaxDeleteDeadLetters+1)}
	if _, err := command.DecodeCommand(big.Encode()); err == nil {
		t.Fatalf("a delete of %d ids decoded", command.MaxDeleteDeadLetters+1)
	}
}
