package store

import (
	"errors"
	"testing"
)

func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// write runs fn in a write transaction and commits it.
func write(t *testing.T, s *Store, fn func(tx *Tx) error) {
	t.Helper()
	tx := s.BeginWrite()
	defer tx.Discard()
	if err := fn(tx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func position(t *testing.T, s *Store, group string, part Partition) (c Cursor, found bool) {
	t.Helper()
	err := s.View(func(tx *Tx) error {
		v, err := tx.GroupView(group, part.QueueID)
		if err != nil {
			return err
		}
		c, found, err = tx.Position(v, part)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, found
}

// A reset to the end (a seek, a first pop from new) is worked out when a
// partition is read: the first offset appended at or after the reset's
// time. HTTP messages carry their append time; Kafka batches written by
// this version carry it beside the producer's timestamp, which may be
// anything.
func TestResetToEndFindsTheFirstOffsetAppendedAfterIt(t *testing.T) {
	s := openTest(t)
	part := Partition{ID: 7, QueueID: 3, Name: "p", NextOffset: 6}
	write(t, s, func(tx *Tx) error {
		for o, at := range []int64{100, 100, 101} {
			if err := tx.PutMessage(part.ID, Message{Offset: uint64(o), TimestampMs: at, TransactionID: "m", Payload: []byte(`1`)}); err != nil {
				return err
			}
		}
		// Offsets 3–5: one batch appended at 105 whose records claim a
		// producer time long before.
		return tx.PutBatch(part.ID, 3, 3, 5, 105, []byte("batch"))
	})
	for _, c := range []struct {
		atMs int64
		want int64
	}{{99, 0}, {100, 0}, {101, 2}, {102, 3}, {105, 3}, {106, 6}} {
		write(t, s, func(tx *Tx) error {
			return tx.PutSubscription("g", part.QueueID, Subscription{Reset: &Reset{Gen: 10, Mode: ResetToEnd, AtMs: c.atMs}}, 11)
		})
		if cur, found := position(t, s, "g", part); !found || cur.Offset != c.want {
			t.Errorf("reset at %d: position %d (found %v), want %d", c.atMs, cur.Offset, found, c.want)
		}
	}
}

// A batch written by an older binary (kind 2) has no append time: its
// newest record time stands in for it.
func TestOldBatchRecordsReadTheirRecordTimeAsAppendTime(t *testing.T) {
	old := []byte{kindBatch, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 42, 'r', 'a', 'w'}
	e, err := decodeEntry(9, old)
	if err != nil || e.Count != 2 || e.MaxTimestampMs != 42 || e.AppendTimeMs != 42 || string(e.Batch) != "raw" {
		t.Fatalf("decoded %+v, %v", e, err)
	}
	e, err = decodeEntry(9, encodeBatch(2, 42, 77, []byte("raw")))
	if err != nil || e.AppendTimeMs != 77 || e.MaxTimestampMs != 42 || string(e.Batch) != "raw" {
		t.Fatalf("decoded %+v, %v", e, err)
	}
}

// A cursor written before a reset counts as absent: its lease no longer
// finds it, and the cursor that replaces it drops that lease's index key.
func TestResetSupersedesOlderCursorsAndTheirLeases(t *testing.T) {
	s := openTest(t)
	part := Partition{ID: 7, QueueID: 3, Name: "p", NextOffset: 10}
	write(t, s, func(tx *Tx) error {
		if err := tx.PutCursor("g", Cursor{QueueID: 3, Partition: "p", Offset: 4, Lease: &Lease{ID: "L", ExpiresAtMs: 1e12, Offsets: []int64{4}}}, 5); err != nil {
			return err
		}
		return tx.PutLease("L", "g", 3, "p")
	})
	if _, c, err := leaseCursor(s, "L"); err != nil || c.Offset != 4 {
		t.Fatalf("before the reset the lease finds offset %d, %v", c.Offset, err)
	}
	write(t, s, func(tx *Tx) error {
		return tx.PutSubscription("g", 3, Subscription{Reset: &Reset{Gen: 5, Mode: ResetToOffset, Offset: 8}}, 6)
	})
	if _, _, err := leaseCursor(s, "L"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after the reset the lease still finds its cursor: %v", err)
	}
	cur, found := position(t, s, "g", part)
	if !found || cur.Offset != 8 || cur.Lease != nil {
		t.Fatalf("position after the reset: %+v (found %v), want offset 8 without a lease", cur, found)
	}
	write(t, s, func(tx *Tx) error { return tx.PutCursor("g", cur, 6) })
	if fams := families(t, s); fams[familyLease] != 0 {
		t.Fatalf("%d lease keys left after the superseded cursor was replaced", fams[familyLease])
	}
	if cur, _ := position(t, s, "g", part); cur.Offset != 8 || cur.Gen != 6 {
		t.Fatalf("the new cursor reads as %+v", cur)
	}
}

// Deleting a group hides it at once and frees its name: records written
// afterwards count, cleanup removes only the old ones, then the group
// record itself.
func TestDeletedGroupIsGoneAtOnceAndItsNameReusable(t *testing.T) {
	s := openTest(t)
	part := Partition{ID: 7, QueueID: 3, Name: "p", NextOffset: 10}
	write(t, s, func(tx *Tx) error {
		for i, name := range []string{"p", "q", "r"} {
			if err := tx.PutCursor("g", Cursor{QueueID: 3, Partition: name, Offset: int64(i)}, 4); err != nil {
				return err
			}
		}
		if err := tx.PutCursor("other", Cursor{QueueID: 3, Partition: "p", Offset: 1}, 4); err != nil {
			return err
		}
		return tx.PutSubscription("g", 3, Subscription{}, 4)
	})
	var existed bool
	write(t, s, func(tx *Tx) (err error) { existed, err = tx.DeleteGroup("g", 9); return err })
	if !existed {
		t.Fatal("DeleteGroup says the group had no positions")
	}
	if _, found := position(t, s, "g", part); found {
		t.Fatal("a deleted group still has a position")
	}
	if groups := cursorGroups(t, s); len(groups) != 1 || groups[0] != "other" {
		t.Fatalf("groups listed after the delete: %v", groups)
	}
	write(t, s, func(tx *Tx) error { return tx.PutCursor("g", Cursor{QueueID: 3, Partition: "q", Offset: 5}, 10) })
	for {
		var res CleanupResult
		write(t, s, func(tx *Tx) (err error) {
			res, err = tx.CleanUp(&Budget{MaxWrites: 2, MaxScanned: 100})
			return err
		})
		if !res.More {
			break
		}
	}
	var positions []Cursor
	if err := s.View(func(tx *Tx) (err error) { positions, err = tx.GroupPositions("g"); return err }); err != nil {
		t.Fatal(err)
	}
	if len(positions) != 1 || positions[0].Partition != "q" || positions[0].Offset != 5 {
		t.Fatalf("positions after cleanup: %+v, want only q at 5", positions)
	}
	fams := families(t, s)
	if fams[familyCursor] != 2 || fams[familySubscr] != 0 || fams[familyGroup] != 0 || fams[familyTombstone] != 0 {
		t.Fatalf("keys left after cleanup: %v", fams)
	}
}

func leaseCursor(s *Store, id string) (group string, c Cursor, err error) {
	err = s.View(func(tx *Tx) error {
		group, c, err = tx.LeaseCursor(id)
		return err
	})
	return group, c, err
}

func cursorGroups(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	if err := s.View(func(tx *Tx) (err error) { out, err = tx.CursorGroups(); return err }); err != nil {
		t.Fatal(err)
	}
	return out
}

func families(t *testing.T, s *Store) map[byte]int {
	t.Helper()
	var out map[byte]int
	if err := s.View(func(tx *Tx) (err error) { out, err = tx.KeysByFamily(); return err }); err != nil {
		t.Fatal(err)
	}
	return out
}
