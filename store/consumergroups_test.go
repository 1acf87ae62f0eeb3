package store

import (
	"errors"
	"slices"
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
func write(t testing.TB, s *Store, fn func(tx *Tx) error) {
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
		v, err := tx.ConsumerGroupView(group, part.QueueID)
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

// A reset (a seek, a first pop from new) is worked out when a partition
// is read, as it would have been at the reset: entries carry the append
// sequence they were appended at, and a reset with generation g came after
// exactly those at or below g. Kafka batches carry it beside the
// producer's timestamp, which may be anything; records from before resets
// existed read 0.
func TestResetIsWorkedOutAsAtTheMomentOfTheReset(t *testing.T) {
	s := openTest(t)
	part := Partition{ID: 7, QueueID: 3, Name: "p", NextOffset: 7}
	write(t, s, func(tx *Tx) error {
		// Offset 0: a message from an older binary (sequence 0).
		old := []byte{kindMessage}
		old = append(old, make([]byte, 24)...)
		old = append(old, 0)
		if err := tx.set(messageKey(part.ID, 0), append(old, '1')); err != nil {
			return err
		}
		for o, seq := range []uint64{10, 10, 11} { // offsets 1-3
			if err := tx.PutMessage(Queue{ID: 3}, part.ID, Message{Offset: uint64(o + 1), TimestampMs: 100 * int64(o+1), TransactionID: "m", Payload: []byte(`1`), AppendSeq: seq}); err != nil {
				return err
			}
		}
		// Offsets 4-6: one batch appended at 15 whose records claim a
		// producer time before all the others.
		return tx.PutBatch(Queue{ID: 3}, part.ID, 4, 3, 5, 15, 400, []byte("batch"))
	})
	for _, c := range []struct {
		reset Reset
		want  int64
	}{
		{Reset{Gen: 9, Mode: ResetToEnd}, 1},
		{Reset{Gen: 10, Mode: ResetToEnd}, 3},
		{Reset{Gen: 12, Mode: ResetToEnd}, 4},
		{Reset{Gen: 15, Mode: ResetToEnd}, 7},
		{Reset{Gen: 10, Mode: ResetToOffset, Offset: 2}, 2},
		{Reset{Gen: 10, Mode: ResetToOffset, Offset: 100}, 3}, // past the end then: the end then
		{Reset{Gen: 15, Mode: ResetToOffset, Offset: -5}, 0},
		{Reset{Gen: 12, Mode: ResetToTime, AtMs: 200}, 2},
		{Reset{Gen: 12, Mode: ResetToTime, AtMs: 5000}, 4}, // in the future then: the end then
		{Reset{Gen: 15, Mode: ResetToTime, AtMs: 350}, 7},  // no record so late (the batch's claims 5): the end
	} {
		write(t, s, func(tx *Tx) error {
			return tx.PutSubscription("g", part.QueueID, Subscription{Reset: &c.reset}, 20)
		})
		if cur, found := position(t, s, "g", part); !found || cur.Offset != c.want || !cur.Resolved() {
			t.Errorf("reset %+v: position %d (found %v), want %d", c.reset, cur.Offset, found, c.want)
		}
	}
}

// Batch records of the first format (kind 2) read append sequence 0; the
// current one keeps it beside the producer's timestamp.
func TestBatchRecordFormats(t *testing.T) {
	old := []byte{kindBatch, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 42, 'r', 'a', 'w'}
	e, err := decodeEntry(9, old)
	if err != nil || e.Count != 2 || e.MaxTimestampMs != 42 || e.AppendSeq != 0 || string(e.Batch) != "raw" {
		t.Fatalf("decoded %+v, %v", e, err)
	}
	e, err = decodeEntry(9, appendBatch(nil, 2, 42, 77, []byte("raw")))
	if err != nil || e.AppendSeq != 77 || e.MaxTimestampMs != 42 || string(e.Batch) != "raw" {
		t.Fatalf("decoded %+v, %v", e, err)
	}
	m := Message{Offset: 3, ID: [16]byte{1, 2}, TimestampMs: 99, TransactionID: "tx", Payload: []byte(`{"a":1}`), AppendSeq: 5}
	if got, err := decodeMessage(3, m.appendTo(nil)); err != nil || got.AppendSeq != 5 || got.TransactionID != "tx" || got.TimestampMs != 99 || got.ID != m.ID || string(got.Payload) != `{"a":1}` {
		t.Fatalf("message round trip: %+v, %v", got, err)
	}
}

// A cursor written before a reset counts as absent: its lease no longer
// finds it, and the cursor that replaces it drops that lease's index key.
func TestResetSupersedesOlderCursorsAndTheirLeases(t *testing.T) {
	s := openTest(t)
	part := Partition{ID: 7, QueueID: 3, Name: "p", NextOffset: 10}
	write(t, s, func(tx *Tx) error {
		for o := range uint64(10) {
			if err := tx.PutMessage(Queue{ID: 3}, part.ID, Message{Offset: o, TransactionID: "m", Payload: []byte(`1`), AppendSeq: 1}); err != nil {
				return err
			}
		}
		if err := tx.PutCursor("g", Cursor{QueueID: 3, Partition: "p", Offset: 4, Leases: []*Lease{{ID: "L", ExpiresAtMs: 1e12, Offsets: []int64{4}}, {ID: "M", ExpiresAtMs: 1e12, Offsets: []int64{5}}}}, 5); err != nil {
			return err
		}
		if err := tx.PutLease("M", "g", 3, "p"); err != nil {
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
	if !found || cur.Offset != 8 || cur.Leases != nil || len(cur.superseded) != 2 {
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
	// A group with only a subscription (it sought, or popped nothing yet)
	// is listed too.
	write(t, s, func(tx *Tx) error { return tx.PutSubscription("sought", 3, Subscription{}, 10) })
	if groups := cursorGroups(t, s); !slices.Equal(groups, []string{"other", "sought"}) {
		t.Fatalf("groups listed: %v", groups)
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
	if fams[familyCursor] != 2 || fams[familySubscr] != 1 || fams[familyGroup] != 0 || fams[familyTombstone] != 0 { // other's cursor and g's new one; sought's subscription
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

// A Kafka offset delete in a queue the group reset stores "no position":
// deleting the cursor alone would let the reset place the group again
// (found in review of issue 14).
func TestNoPositionCursorOutweighsAReset(t *testing.T) {
	s := openTest(t)
	part := Partition{ID: 7, QueueID: 3, Name: "0", NextOffset: 0}
	write(t, s, func(tx *Tx) error {
		if err := tx.CreatePartition(part); err != nil {
			return err
		}
		return tx.PutSubscription("g", 3, Subscription{Reset: &Reset{Gen: 5, Mode: ResetToOffset}}, 6)
	})
	if _, found := position(t, s, "g", part); !found {
		t.Fatal("the reset gives no position")
	}
	var positions []Cursor
	if err := s.View(func(tx *Tx) (err error) { positions, err = tx.GroupPositions("g"); return err }); err != nil || len(positions) != 1 {
		t.Fatalf("positions listed before the delete: %+v, %v", positions, err)
	}
	write(t, s, func(tx *Tx) error {
		return tx.PutCursor("g", Cursor{QueueID: 3, Partition: "0", Offset: NoPosition}, 7)
	})
	if c, found := position(t, s, "g", part); found {
		t.Fatalf("after the delete the group still stands at %d", c.Offset)
	}
	if err := s.View(func(tx *Tx) (err error) { positions, err = tx.GroupPositions("g"); return err }); err != nil || len(positions) != 0 {
		t.Fatalf("positions listed: %+v, %v", positions, err)
	}
}

// ConsumerGroups names each group with a cursor or a subscription once,
// in order, and says when there are more than the limit.
func TestConsumerGroups(t *testing.T) {
	s := openTest(t)
	write(t, s, func(tx *Tx) error {
		for _, c := range []struct {
			group string
			queue uint64
			part  string
		}{{"a", 3, "0"}, {"a", 3, "1"}, {"a", 4, "\xff\xff"}, {"c", 3, "0"}} {
			if err := tx.PutCursor(c.group, Cursor{QueueID: c.queue, Partition: c.part, Offset: 1}, 1); err != nil {
				return err
			}
		}
		return tx.PutSubscription("b", 3, Subscription{}, 1)
	})
	s.View(func(tx *Tx) error {
		got, complete, err := tx.ConsumerGroups(10)
		if err != nil || !complete || !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Fatalf("groups: %v complete %v, %v", got, complete, err)
		}
		if got, complete, err := tx.ConsumerGroups(2); err != nil || complete || got != nil {
			t.Fatalf("groups past the limit: %v complete %v, %v", got, complete, err)
		}
		return nil
	})
}
