package store

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/waggle-mq/waggle/dedup"
)

// fileDedup commits n dedup records in partition pid, ids prefix-0..n-1,
// due at dueMs+i.
func fileDedup(t testing.TB, s *Store, pid uint64, prefix string, n int, dueMs int64) {
	t.Helper()
	for done := 0; done < n; done += 10_000 {
		tx := s.BeginWrite()
		for i := done; i < min(done+10_000, n); i++ {
			if err := tx.PutDedup(pid, fmt.Sprint(prefix, i), dedup.Entry{Offset: uint64(i), ExpiresAtMs: dueMs + int64(i)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		tx.Discard()
	}
}

// prune runs PruneDedup in a transaction of its own and commits it.
func prune(t testing.TB, s *Store, nowMs int64, limit int) int {
	t.Helper()
	tx := s.BeginWrite()
	defer tx.Discard()
	n, err := tx.PruneDedup(nowMs, limit)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return n
}

// A prune starts where the last one stopped, and still finds every due
// record: one filed before that point later on, or in the same
// transaction, one a discarded transaction pruned, and, after a restore,
// the restored ones.
func TestPruneDedupFindsEveryDueRecord(t *testing.T) {
	s := openTest(t)
	fileDedup(t, s, 5, "a", 10, 100) // due at 100..109
	if n := prune(t, s, 104, 3); n != 3 {
		t.Fatalf("pruned %d at 104, limit 3; want 3", n)
	}
	snap := snapshotOf(t, s) // a3..a9 due
	if n := prune(t, s, 104, 10); n != 2 {
		t.Fatalf("pruned %d at 104; want 2", n)
	}
	// Filed before where the prunes stopped (a replicated clock never does
	// that, but the store must not rely on it).
	fileDedup(t, s, 6, "b", 2, 50)
	if n := prune(t, s, 104, 10); n != 2 {
		t.Fatalf("pruned %d at 104 after filing 2 due at 50; want 2", n)
	}
	// The same in one transaction, pruning on both sides of the write.
	write(t, s, func(tx *Tx) error {
		if n, err := tx.PruneDedup(105, 10); n != 1 || err != nil {
			t.Fatalf("pruned %d, %v at 105; want 1", n, err)
		}
		if err := tx.PutDedup(6, "c", dedup.Entry{ExpiresAtMs: 60}); err != nil {
			return err
		}
		if n, err := tx.PruneDedup(105, 10); n != 1 || err != nil {
			t.Fatalf("pruned %d, %v at 105 after filing one due at 60; want 1", n, err)
		}
		return nil
	})
	// A discarded prune moves nothing.
	tx := s.BeginWrite()
	if n, err := tx.PruneDedup(200, 10); n != 4 || err != nil {
		t.Fatalf("pruned %d, %v at 200; want 4", n, err)
	}
	tx.Discard()
	if n := prune(t, s, 200, 10); n != 4 {
		t.Fatalf("pruned %d at 200 after a discarded prune; want 4", n)
	}
	if err := s.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if n := prune(t, s, 200, 100); n != 7 {
		t.Fatalf("pruned %d at 200 after a restore; want 7", n)
	}
}

// The index entries a deleted queue's clean-up deletes lie after now;
// prunes neither see them nor walk them, and records due after them are
// pruned when due.
func TestPruneDedupAfterQueueDelete(t *testing.T) {
	s := openTest(t)
	q := Queue{ID: 3, Name: "q"}
	putQueue(t, s, q, 0, 4)
	fileDedup(t, s, 4, "gone", 100_000, 1_000_000)
	write(t, s, func(tx *Tx) error { return tx.DeleteQueue(q, 50) })
	cleanUpAll(t, s, 10_000)
	fileDedup(t, s, 7, "live", 3, 2_000_000)

	best := time.Hour
	for range 5 {
		start := time.Now()
		if n := prune(t, s, 500, 10_000); n != 0 {
			t.Fatalf("pruned %d at 500; want 0", n)
		}
		best = min(best, time.Since(start))
	}
	// Walking the 100,000 deleted entries took 30 ms and more.
	if best > 5*time.Millisecond {
		t.Errorf("a prune with nothing due took %v past a deleted queue's 100,000 index entries", best)
	}
	if n := prune(t, s, 2_000_001, 10_000); n != 2 {
		t.Fatalf("pruned %d at 2,000,001; want 2", n)
	}
}

// BenchmarkPruneDedup times a prune with nothing due (the leader proposes
// one a second) after 0 to 400,000 records were pruned, or deleted with
// their queue while due after now: it should not grow with them.
func BenchmarkPruneDedup(b *testing.B) {
	for _, n := range []int{0, 100_000, 400_000} {
		for _, how := range []string{"pruned", "deleted"} {
			b.Run(fmt.Sprintf("%s=%d", how, n), func(b *testing.B) {
				s, err := Open(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				q := Queue{ID: 3, Name: "q"}
				putQueue(b, s, q, 0, 4)
				fileDedup(b, s, 4, "x", n, 1_000_000)
				now := int64(2_000_000)
				if how == "pruned" {
					for prune(b, s, now, 10_000) > 0 {
					}
				} else {
					write(b, s, func(tx *Tx) error { return tx.DeleteQueue(q, 50) })
					cleanUpAll(b, s, 10_000)
					now = 500
				}
				fileDedup(b, s, 7, "live", 1, 3_000_000)
				b.ResetTimer()
				for b.Loop() {
					prune(b, s, now, 10_000)
				}
			})
		}
	}
}
