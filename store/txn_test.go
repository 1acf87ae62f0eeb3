package store

import "testing"

// Aborted ranges below the log start are pruned a few at a time; the ones
// a reader may still need stay.
func TestPruneAbortedTxns(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tx := s.BeginWrite()
	defer tx.Discard()
	err = func() error {
		for i := range uint64(5) {
			if err := tx.PutAbortedTxn(7, AbortedTxn{ProducerID: 1, FirstOffset: i * 10, LastOffset: i*10 + 5}); err != nil {
				return err
			}
		}
		n, err := tx.PruneAbortedTxns(7, 30, 2) // ranges ending at 5, 15, 25 are stale
		if err != nil || n != 2 {
			t.Fatalf("first prune removed %d (%v), want 2", n, err)
		}
		if n, err = tx.PruneAbortedTxns(7, 30, 2); err != nil || n != 1 {
			t.Fatalf("second prune removed %d (%v), want 1", n, err)
		}
		left, err := tx.AbortedTxns(7, 0, 1000, 100)
		if err != nil || len(left) != 2 || left[0].LastOffset != 35 {
			t.Fatalf("left %+v (%v), want the ranges ending at 35 and 45", left, err)
		}
		return nil
	}()
	if err != nil {
		t.Fatal(err)
	}
}
