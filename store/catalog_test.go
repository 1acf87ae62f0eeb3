package store

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// requireCatalogMatchesBadger compares every queue read the catalog serves
// with the same read from badger's records, in one snapshot.
func requireCatalogMatchesBadger(t *testing.T, s *Store, ids []uint64) {
	t.Helper()
	err := s.View(func(tx *Tx) error {
		raw := &Tx{txn: tx.txn} // no catalog: badger's records
		want, err := raw.Queues()
		if err != nil {
			return err
		}
		got, err := tx.Queues()
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("catalog lists %d queues, badger %d:\n%v\n%v", len(got), len(want), got, want)
		}
		for _, q := range want {
			c, err := tx.Queue(q.Name)
			if err != nil || !reflect.DeepEqual(c, q) {
				t.Fatalf("catalog has %q as %+v, %v; badger %+v", q.Name, c, err, q)
			}
		}
		for _, id := range ids {
			c, cerr := tx.QueueByID(id)
			w, werr := raw.QueueByID(id)
			if (cerr == nil) != (werr == nil) || !reflect.DeepEqual(c, w) {
				t.Fatalf("queue id %d: catalog %+v, %v; badger %+v, %v", id, c, cerr, w, werr)
			}
			c, cerr = tx.QueueByTopicID(Queue{ID: id}.TopicID())
			if (cerr == nil) != (werr == nil) || !reflect.DeepEqual(c, w) {
				t.Fatalf("topic id of queue %d: catalog %+v, %v; badger %+v, %v", id, c, cerr, w, werr)
			}
		}
		if len(want) > 0 { // badger's own lookup by topic id, once
			if q, err := raw.QueueByTopicID(want[0].TopicID()); err != nil || !reflect.DeepEqual(q, want[0]) {
				t.Fatalf("badger finds topic %q as %+v, %v", want[0].Name, q, err)
			}
		}
		if len(want) > 2 {
			page, _ := tx.QueuesAfter(want[1].Name, 2)
			if !reflect.DeepEqual(page, want[2:min(4, len(want))]) {
				t.Fatalf("a page after %q: %v, want %v", want[1].Name, page, want[2:min(4, len(want))])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Queues created, changed and deleted over many commits, past the size at
// which the catalog folds its overlay, read the same from the catalog as
// from badger after every commit, and after the store is opened again.
func TestCatalogAgreesWithTheRecords(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	live := map[string]Queue{}
	var ids []uint64
	nextID := uint64(1)
	for commit := range 3 * catalogFold / 10 {
		tx := s.BeginWrite()
		for range 10 {
			name := fmt.Sprintf("q%03d", rng.IntN(400))
			q, exists := live[name]
			switch {
			case exists && rng.IntN(3) == 0:
				if err := tx.DeleteQueue(q, nextID); err != nil {
					t.Fatal(err)
				}
				delete(live, name)
				nextID++
			case exists:
				q.DedupWindowSeconds++
				v := int64(commit)
				q.LeaseTimeSeconds = &v
				if err := tx.PutQueue(q); err != nil {
					t.Fatal(err)
				}
				live[name] = q
			default:
				q = Queue{ID: nextID, Name: name, CreatedAtMs: int64(commit)}
				ids = append(ids, nextID)
				nextID++
				if err := tx.PutQueue(q); err != nil {
					t.Fatal(err)
				}
				live[name] = q
			}
			// The transaction reads its own writes.
			got, err := tx.Queue(name)
			if _, ok := live[name]; ok != (err == nil) || (ok && !reflect.DeepEqual(got, live[name])) {
				t.Fatalf("in its transaction %q reads %+v, %v; want %+v", name, got, err, live[name])
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		tx.Discard()
		requireCatalogMatchesBadger(t, s, ids)
	}
	if len(live) == 0 {
		t.Fatal("the scenario left no queue")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	requireCatalogMatchesBadger(t, s, ids)
}

// A read transaction sees the queues of its own snapshot: a commit after
// it opened changes neither its records nor its catalog.
func TestCatalogKeepsAReadersSnapshot(t *testing.T) {
	s := openTest(t)
	putQueue(t, s, Queue{ID: 1, Name: "a", DedupWindowSeconds: 1}, 0)
	err := s.View(func(tx *Tx) error {
		putQueue(t, s, Queue{ID: 1, Name: "a", DedupWindowSeconds: 2}, 0)
		putQueue(t, s, Queue{ID: 2, Name: "b"}, 0)
		q, err := tx.Queue("a")
		if err != nil || q.DedupWindowSeconds != 1 {
			t.Fatalf("the reader sees a as %+v, %v; want its snapshot's window 1", q, err)
		}
		if _, err := tx.Queue("b"); err == nil {
			t.Fatal("the reader sees a queue created after it opened")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	requireCatalogMatchesBadger(t, s, []uint64{1, 2})
}

// A restore replaces the catalog with the restored queues, and a reset
// empties it.
func TestCatalogFollowsRestoreAndReset(t *testing.T) {
	src := openTest(t)
	for i := range 5 {
		putQueue(t, src, Queue{ID: uint64(i + 1), Name: fmt.Sprintf("r%d", i)}, 0)
	}
	dst := openTest(t)
	putQueue(t, dst, Queue{ID: 9, Name: "gone"}, 0)
	if err := dst.Restore(bytes.NewReader(snapshotOf(t, src))); err != nil {
		t.Fatal(err)
	}
	requireCatalogMatchesBadger(t, dst, []uint64{1, 5, 9})
	dst.View(func(tx *Tx) error {
		if qs, _ := tx.Queues(); len(qs) != 5 {
			t.Fatalf("after the restore the catalog lists %v", qs)
		}
		return nil
	})
	if err := dst.Reset(); err != nil {
		t.Fatal(err)
	}
	dst.View(func(tx *Tx) error {
		if qs, _ := tx.QueuesAfter("", math.MaxInt); len(qs) != 0 {
			t.Fatalf("after a reset the catalog lists %v", qs)
		}
		return nil
	})
}

// Regression test (review of the catalog): a name deleted and created
// again keeps one overlay entry, and the overlay's id indexes must not
// keep every id it ever had.
func TestCatalogOverlayStaysSmallUnderChurnOfOneName(t *testing.T) {
	s := openTest(t)
	for i := range 3 * catalogFold {
		q := Queue{ID: uint64(i + 1), Name: "churn"}
		putQueue(t, s, q, 0)
		write(t, s, func(tx *Tx) error { return tx.DeleteQueue(q, uint64(10_000+i)) })
	}
	if c := s.catalog; len(c.recentByID) > 1 || len(c.recentByTopicID) > 1 || len(c.recent) > 1 {
		t.Fatalf("after %d creates and deletes of one name the overlay holds %d names, %d ids, %d topic ids",
			3*catalogFold, len(c.recent), len(c.recentByID), len(c.recentByTopicID))
	}
}

// Regression test (review of the catalog): a restore that fails part way
// used to leave the old queues in the catalog over what badger then held.
func TestCatalogAfterAFailedRestoreIsWhatBadgerHolds(t *testing.T) {
	src := openTest(t)
	putQueue(t, src, Queue{ID: 1, Name: "new"}, 0)
	stream := snapshotOf(t, src)
	dst := openTest(t)
	putQueue(t, dst, Queue{ID: 7, Name: "old"}, 0)
	// The stream cut after its header and a few bytes: the restore fails
	// after dropping the old state.
	if err := dst.Restore(bytes.NewReader(stream[:min(len(stream), 24)])); err == nil {
		t.Fatal("a cut snapshot stream was restored")
	}
	requireCatalogMatchesBadger(t, dst, []uint64{1, 7})
}

// Regression test (review of the catalog): View on a closed store answers
// an error, as badger's own View does, instead of waiting for ever.
func TestViewOnAClosedStoreFails(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	done := make(chan error, 1)
	go func() { done <- s.View(func(*Tx) error { return nil }) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("View on a closed store succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("View on a closed store did not return")
	}
}
