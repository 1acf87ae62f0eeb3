package store

import (
	"errors"
	"testing"

	"github.com/waggle-mq/waggle/dedup"
)

// A View is a point-in-time view: writes committed after it opened, to
// records and to message data alike, are not seen inside it, however many
// times it reads; a View opened after them sees them all.
func TestViewDoesNotSeeLaterCommits(t *testing.T) {
	s := openTest(t)
	q := Queue{ID: 1, Name: "q"}
	gone := Queue{ID: 2, Name: "gone"}
	putQueue(t, s, q, 1, 5)
	appendMessages(t, s, q, 5, 0, 1, 10)
	write(t, s, func(tx *Tx) error {
		for _, err := range []error{
			tx.PutQueue(gone),
			tx.PutKV(KVRow{NS: "n", Key: "k", Value: []byte(`1`), Version: 1}, nil),
			tx.PutDeadLetter(DeadLetter{ID: 3, QueueID: 1}),
			tx.PutDedup(5, "t", dedupEntry(0)),
		} {
			if err != nil {
				return err
			}
		}
		return nil
	})

	// What the old view must keep seeing, checked before and after the
	// write it does not see.
	old := func(tx *Tx) {
		t.Helper()
		if _, err := tx.Queue("new"); !errors.Is(err, ErrNotFound) {
			t.Errorf("a queue created later: %v", err)
		}
		if _, err := tx.QueueByID(9); !errors.Is(err, ErrNotFound) {
			t.Errorf("a queue created later, by id: %v", err)
		}
		if g, err := tx.Queue("gone"); err != nil || g.ID != 2 {
			t.Errorf("a queue deleted later: %+v, %v", g, err)
		}
		if qs, err := tx.Queues(); err != nil || len(qs) != 2 {
			t.Errorf("Queues: %+v, %v", qs, err)
		}
		if p, err := tx.Partition(1, "5"); err != nil || p.NextOffset != 1 {
			t.Errorf("partition: %+v, %v", p, err)
		}
		if e, found, err := tx.EntryAt(5, 1); err != nil || found {
			t.Errorf("a message appended later: %+v found %v, %v", e, found, err)
		}
		if es, err := tx.Entries(5, 0, 1<<20, 100); err != nil || len(es) != 1 {
			t.Errorf("Entries: %d, %v", len(es), err)
		}
		if r, found, err := tx.KV("n", "k"); err != nil || !found || r.Version != 1 {
			t.Errorf("a KV row updated later: %+v found %v, %v", r, found, err)
		}
		if dls, err := tx.DeadLetters(0, 10); err != nil || len(dls) != 1 {
			t.Errorf("a dead letter deleted later: %+v, %v", dls, err)
		}
		if _, found, err := tx.Dedup(5, "t2"); err != nil || found {
			t.Errorf("a dedup record stored later: found %v, %v", found, err)
		}
		if tms, err := tx.Timers("q", 10); err != nil || len(tms) != 0 {
			t.Errorf("a timer scheduled later: %+v, %v", tms, err)
		}
	}
	view(t, s, func(tx *Tx) error {
		old(tx)
		write(t, s, func(w *Tx) error {
			for _, err := range []error{
				w.PutQueue(Queue{ID: 9, Name: "new"}),
				w.DeleteQueue(gone, 20),
				w.PutMessage(q, 5, Message{Offset: 1, TimestampMs: 11, Payload: []byte(`{}`)}),
				w.PutPartition(Partition{ID: 5, QueueID: 1, Name: "5", NextOffset: 2}),
				w.PutKV(KVRow{NS: "n", Key: "k", Value: []byte(`2`), Version: 2}, &KVRow{NS: "n", Key: "k"}),
				w.DeleteDeadLetter(3),
				w.PutDedup(5, "t2", dedupEntry(1)),
				w.PutTimer(Timer{Queue: "q", Key: "k", DueAtMs: 5}, nil),
			} {
				if err != nil {
					return err
				}
			}
			return nil
		})
		old(tx)
		return nil
	})

	view(t, s, func(tx *Tx) error {
		if n, err := tx.Queue("new"); err != nil || n.ID != 9 {
			t.Errorf("new view, created queue: %+v, %v", n, err)
		}
		if _, err := tx.Queue("gone"); !errors.Is(err, ErrNotFound) {
			t.Errorf("new view, deleted queue: %v", err)
		}
		if p, err := tx.Partition(1, "5"); err != nil || p.NextOffset != 2 {
			t.Errorf("new view, partition: %+v, %v", p, err)
		}
		if e, found, err := tx.EntryAt(5, 1); err != nil || !found || string(e.Message.Payload) != `{}` {
			t.Errorf("new view, appended message: %+v found %v, %v", e, found, err)
		}
		if r, _, err := tx.KV("n", "k"); err != nil || r.Version != 2 {
			t.Errorf("new view, KV row: %+v, %v", r, err)
		}
		if dls, err := tx.DeadLetters(0, 10); err != nil || len(dls) != 0 {
			t.Errorf("new view, dead letters: %+v, %v", dls, err)
		}
		if _, found, err := tx.Dedup(5, "t2"); err != nil || !found {
			t.Errorf("new view, dedup record: found %v, %v", found, err)
		}
		if tms, err := tx.Timers("q", 10); err != nil || len(tms) != 1 {
			t.Errorf("new view, timers: %+v, %v", tms, err)
		}
		return nil
	})
}

// A write transaction's changes are not seen by a View until it commits,
// and never when it is discarded.
func TestViewDoesNotSeeUncommittedWrites(t *testing.T) {
	s := openTest(t)
	q := Queue{ID: 1, Name: "q"}
	putQueue(t, s, q, 0, 5)
	w := s.BeginWrite()
	defer w.Discard()
	for _, err := range []error{
		w.PutQueue(Queue{ID: 2, Name: "pending"}),
		w.PutMessage(q, 5, Message{Offset: 0, Payload: []byte(`{}`)}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	unseen := func(when string) {
		t.Helper()
		view(t, s, func(tx *Tx) error {
			if _, err := tx.Queue("pending"); !errors.Is(err, ErrNotFound) {
				t.Errorf("%s: queue: %v", when, err)
			}
			if e, found, err := tx.EntryAt(5, 0); err != nil || found {
				t.Errorf("%s: message: %+v found %v, %v", when, e, found, err)
			}
			return nil
		})
	}
	unseen("before commit")
	w.Discard()
	unseen("after discard")
}

func dedupEntry(off uint64) (e dedup.Entry) {
	e.Offset, e.StoredAtMs, e.ExpiresAtMs = off, 1, 1000
	return e
}
