package store

import (
	"bytes"
	"math"
	"slices"
	"testing"
)

// entriesFixture is a queue with two partitions written through PutMessage
// and PutBatch: partition 5 holds messages at 0–4, a batch of five at 5–9,
// a gap, and messages at 20 and 21; partition 6 holds messages at 0–2.
type entriesFixture struct {
	q        Queue
	messages map[[2]uint64]Message // by partition and offset
	batch    []byte                // partition 5's batch at 5
}

const (
	fixtureBatchBase  = 5
	fixtureBatchCount = 5
	fixtureBatchMaxTs = 2000
	fixtureBatchSeq   = 7
)

func writeEntriesFixture(t *testing.T, s *Store) entriesFixture {
	t.Helper()
	f := entriesFixture{q: Queue{ID: 1, Name: "q"}, messages: map[[2]uint64]Message{}, batch: randomPayload(300)}
	putQueue(t, s, f.q, 22, 5)
	write(t, s, func(tx *Tx) error {
		if err := tx.CreatePartition(Partition{ID: 6, QueueID: 1, Name: "6", NextOffset: 3}); err != nil {
			return err
		}
		put := func(pid, off uint64, ts int64) error {
			m := Message{Offset: off, TimestampMs: ts, TransactionID: "tx-" + string(rune('a'+off)), Payload: randomPayload(50 + int(off)), AppendSeq: off + 1}
			m.ID[0], m.ID[15] = byte(pid), byte(off)
			f.messages[[2]uint64{pid, off}] = m
			return tx.PutMessage(f.q, pid, m)
		}
		for off := range uint64(5) {
			if err := put(5, off, 1000+int64(off)); err != nil {
				return err
			}
		}
		if err := tx.PutBatch(f.q, 5, fixtureBatchBase, fixtureBatchCount, fixtureBatchMaxTs, fixtureBatchSeq, 1900, f.batch); err != nil {
			return err
		}
		for _, off := range []uint64{20, 21} {
			if err := put(5, off, 3000); err != nil {
				return err
			}
		}
		for off := range uint64(3) {
			if err := put(6, off, 500); err != nil {
				return err
			}
		}
		return nil
	})
	return f
}

// check compares an entry read back with what was written at its offset.
func (f entriesFixture) check(t *testing.T, pid uint64, e Entry) {
	t.Helper()
	if pid == 5 && e.Offset == fixtureBatchBase {
		if e.Message != nil || !bytes.Equal(e.Batch, f.batch) || e.Count != fixtureBatchCount ||
			e.MaxTimestampMs != fixtureBatchMaxTs || e.AppendSeq != fixtureBatchSeq {
			t.Errorf("batch entry: offset %d count %d maxTs %d seq %d, message %v, batch equal %v",
				e.Offset, e.Count, e.MaxTimestampMs, e.AppendSeq, e.Message != nil, bytes.Equal(e.Batch, f.batch))
		}
		return
	}
	want, ok := f.messages[[2]uint64{pid, e.Offset}]
	if !ok {
		t.Errorf("partition %d: entry at %d, where nothing was written", pid, e.Offset)
		return
	}
	m := e.Message
	if m == nil || e.Batch != nil || e.Count != 1 || e.MaxTimestampMs != want.TimestampMs || e.AppendSeq != want.AppendSeq {
		t.Errorf("partition %d offset %d: entry %+v, want message %+v", pid, e.Offset, e, want)
		return
	}
	if m.Offset != want.Offset || m.ID != want.ID || m.TimestampMs != want.TimestampMs || m.TransactionID != want.TransactionID ||
		!bytes.Equal(m.Payload, want.Payload) || m.AppendSeq != want.AppendSeq {
		t.Errorf("partition %d offset %d: message %+v, want %+v", pid, e.Offset, *m, want)
	}
}

// EntryAt returns the entry holding an offset: the message stored there,
// or the batch whose range covers it; an offset no entry holds (a gap,
// past the end, another partition's, a partition that does not exist) is
// found false, without an error.
func TestEntryAt(t *testing.T) {
	s := openTest(t)
	f := writeEntriesFixture(t, s)
	cases := []struct {
		pid, offset uint64
		found       bool
		at          uint64 // the entry's first offset
	}{
		{5, 0, true, 0},
		{5, 4, true, 4},
		{5, 5, true, 5},
		{5, 7, true, 5},
		{5, 9, true, 5},
		{5, 10, false, 0},
		{5, 19, false, 0},
		{5, 20, true, 20},
		{5, 21, true, 21},
		{5, 22, false, 0},
		{5, math.MaxUint64, false, 0},
		{6, 2, true, 2},
		{6, 3, false, 0},
		{6, 4, false, 0},
		{4, 0, false, 0},
		{7, 0, false, 0},
		{0, 0, false, 0},
	}
	view(t, s, func(tx *Tx) error {
		for _, c := range cases {
			e, found, err := tx.EntryAt(c.pid, c.offset)
			if err != nil {
				t.Errorf("EntryAt(%d, %d): %v", c.pid, c.offset, err)
				continue
			}
			if found != c.found || (found && e.Offset != c.at) {
				t.Errorf("EntryAt(%d, %d) = offset %d found %v; want offset %d found %v", c.pid, c.offset, e.Offset, found, c.at, c.found)
				continue
			}
			if found {
				f.check(t, c.pid, e)
			}
		}
		return nil
	})
}

// A write transaction reads its own appends before it commits (the state
// machine reads messages it stored earlier in the same batch of entries),
// and a discarded one leaves nothing to read.
func TestEntryAtReadsOwnWrites(t *testing.T) {
	s := openTest(t)
	q := Queue{ID: 1, Name: "q"}
	putQueue(t, s, q, 0, 5)
	m := Message{Offset: 0, TimestampMs: 10, TransactionID: "t", Payload: []byte(`{"a":1}`), AppendSeq: 3}
	tx := s.BeginWrite()
	if err := tx.PutMessage(q, 5, m); err != nil {
		t.Fatal(err)
	}
	e, found, err := tx.EntryAt(5, 0)
	if err != nil || !found || e.Message == nil || !bytes.Equal(e.Message.Payload, m.Payload) {
		t.Fatalf("EntryAt in the writing transaction: %+v found %v, %v", e, found, err)
	}
	tx.Discard()
	view(t, s, func(tx *Tx) error {
		if e, found, err := tx.EntryAt(5, 0); err != nil || found {
			t.Errorf("EntryAt after discard: %+v found %v, %v", e, found, err)
		}
		return nil
	})
}

// Entries starts at the entry holding from, reads on in offset order
// within the partition only, and stops after maxCount entries or before
// going over maxBytes; the first entry is returned whatever its size.
func TestEntries(t *testing.T) {
	s := openTest(t)
	f := writeEntriesFixture(t, s)
	cases := []struct {
		pid, from          uint64
		maxBytes, maxCount int
		want               []uint64 // first offsets
	}{
		{5, 0, math.MaxInt, 100, []uint64{0, 1, 2, 3, 4, 5, 20, 21}},
		{5, 3, math.MaxInt, 100, []uint64{3, 4, 5, 20, 21}},
		{5, 7, math.MaxInt, 100, []uint64{5, 20, 21}},
		{5, 10, math.MaxInt, 100, []uint64{20, 21}},
		{5, 21, math.MaxInt, 100, []uint64{21}},
		{5, 22, math.MaxInt, 100, nil},
		{5, math.MaxUint64, math.MaxInt, 100, nil},
		{6, 0, math.MaxInt, 100, []uint64{0, 1, 2}},
		{6, 3, math.MaxInt, 100, nil},
		{4, 0, math.MaxInt, 100, nil},
		{7, 0, math.MaxInt, 100, nil},
		{5, 0, math.MaxInt, 3, []uint64{0, 1, 2}},
		{5, 4, math.MaxInt, 2, []uint64{4, 5}},
		{5, 0, 1, 100, []uint64{0}},
		{5, 5, 1, 100, []uint64{5}},
	}
	view(t, s, func(tx *Tx) error {
		for _, c := range cases {
			got, err := tx.Entries(c.pid, c.from, c.maxBytes, c.maxCount)
			if err != nil {
				t.Errorf("Entries(%d, %d, %d, %d): %v", c.pid, c.from, c.maxBytes, c.maxCount, err)
				continue
			}
			var offsets []uint64
			for _, e := range got {
				offsets = append(offsets, e.Offset)
				f.check(t, c.pid, e)
			}
			if !slices.Equal(offsets, c.want) {
				t.Errorf("Entries(%d, %d, %d, %d) = offsets %v, want %v", c.pid, c.from, c.maxBytes, c.maxCount, offsets, c.want)
			}
		}
		return nil
	})
}

// maxBytes bounds what Entries collects (by Entry.Size, which is rough:
// the limit is checked against the index's record lengths): whatever the
// bound, the entries are the first ones of the full read, at least one,
// never more than maxBytes together unless there is only one, and more
// bytes never give fewer entries.
func TestEntriesMaxBytes(t *testing.T) {
	s := openTest(t)
	writeEntriesFixture(t, s)
	view(t, s, func(tx *Tx) error {
		all, err := tx.Entries(5, 0, math.MaxInt, math.MaxInt)
		if err != nil {
			return err
		}
		total := 0
		for _, e := range all {
			total += e.Size()
		}
		prev := 0
		for maxBytes := 0; maxBytes <= 2*total; maxBytes += 7 {
			got, err := tx.Entries(5, 0, maxBytes, math.MaxInt)
			if err != nil {
				return err
			}
			size := 0
			for i, e := range got {
				size += e.Size()
				if i >= len(all) || e.Offset != all[i].Offset {
					t.Fatalf("maxBytes %d: entry %d at offset %d, not the full read's", maxBytes, i, e.Offset)
				}
			}
			if len(got) == 0 || (len(got) > 1 && size > maxBytes) || len(got) < prev {
				t.Fatalf("maxBytes %d: %d entries of %d bytes (%d with less)", maxBytes, len(got), size, prev)
			}
			prev = len(got)
		}
		if prev != len(all) {
			t.Errorf("twice the total size: %d entries of %d", prev, len(all))
		}
		return nil
	})
}

// FirstEntryAtOrAfter finds the first entry, from the partition's start,
// whose newest record is at or after a time, with its body.
func TestFirstEntryAtOrAfter(t *testing.T) {
	s := openTest(t)
	f := writeEntriesFixture(t, s)
	p := Partition{ID: 5, QueueID: 1, Name: "5", NextOffset: 22}
	cases := []struct {
		start uint64
		tsMs  int64
		found bool
		at    uint64
	}{
		{0, math.MinInt64, true, 0},
		{0, 1000, true, 0},
		{0, 1003, true, 3},
		{0, 1005, true, 5},
		{0, fixtureBatchMaxTs, true, 5},
		{0, fixtureBatchMaxTs + 1, true, 20},
		{0, 3000, true, 20},
		{0, 3001, false, 0},
		{3, 1000, true, 3},
		{21, 1000, true, 21},
		{22, 0, false, 0},
	}
	view(t, s, func(tx *Tx) error {
		for _, c := range cases {
			p.StartOffset = c.start
			e, found, err := tx.FirstEntryAtOrAfter(p, c.tsMs)
			if err != nil || found != c.found || (found && e.Offset != c.at) {
				t.Errorf("FirstEntryAtOrAfter(start %d, %d) = offset %d found %v, %v; want %d found %v", c.start, c.tsMs, e.Offset, found, err, c.at, c.found)
				continue
			}
			if found {
				f.check(t, 5, e)
			}
		}
		return nil
	})
}

// The first offset appended after a generation, found by binary search
// over a partition with a gap (10–19 hold nothing, as compaction leaves):
// the entry after the gap decides which side the answer is on. Before, a
// position in the gap counted as "after", so a reset to the end with old
// entries beyond the gap (gen 21: offset 20 is old, 21 new) went back to
// offset 10 and redelivered 20.
func TestFirstAppendedAfterAcrossAGap(t *testing.T) {
	s := openTest(t)
	writeEntriesFixture(t, s) // AppendSeq: offsets 0–4 are 1–5, the batch 5–9 is 7, 20 is 21, 21 is 22
	for _, tc := range []struct {
		gen  uint64
		want int64
	}{
		{0, 0}, {3, 3}, {7, 10}, {20, 10}, {21, 21}, {100, 22},
	} {
		err := s.View(func(tx *Tx) error {
			part, err := tx.PartitionByID(5)
			if err != nil {
				return err
			}
			got, err := tx.firstAppendedAfter(part, tc.gen)
			if err != nil {
				return err
			}
			if got != tc.want {
				t.Errorf("first appended after generation %d: offset %d, want %d", tc.gen, got, tc.want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
