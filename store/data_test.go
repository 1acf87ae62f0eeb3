package store

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/waggle-mq/waggle/dedup"
)

func randomPayload(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// putQueue stores q with a partition per id, each named by its id and
// holding offsets up to next.
func putQueue(t testing.TB, s *Store, q Queue, next uint64, partitionIDs ...uint64) {
	t.Helper()
	write(t, s, func(tx *Tx) error {
		if err := tx.PutQueue(q); err != nil {
			return err
		}
		for _, pid := range partitionIDs {
			if err := tx.CreatePartition(Partition{ID: pid, QueueID: q.ID, Name: fmt.Sprint(pid), NextOffset: next}); err != nil {
				return err
			}
		}
		return nil
	})
}

// appendMessages commits n messages of random payloads to one partition of
// q, starting at offset from, and returns the payloads.
func appendMessages(t *testing.T, s *Store, q Queue, pid, from uint64, n int, atMs int64) [][]byte {
	t.Helper()
	var out [][]byte
	write(t, s, func(tx *Tx) error {
		for i := range n {
			p := randomPayload(100 + i%50)
			out = append(out, p)
			m := Message{Offset: from + uint64(i), TimestampMs: atMs, TransactionID: "t", Payload: p, AppendSeq: 1}
			if err := tx.PutMessage(q, pid, m); err != nil {
				return err
			}
		}
		return nil
	})
	return out
}

func checkMessages(t *testing.T, s *Store, pid, from uint64, want [][]byte) {
	t.Helper()
	err := s.View(func(tx *Tx) error {
		got, err := tx.Entries(pid, from, 1<<30, len(want)+10)
		if err != nil {
			return err
		}
		if len(got) != len(want) {
			t.Fatalf("read %d entries, want %d", len(got), len(want))
		}
		for i, e := range got {
			if e.Offset != from+uint64(i) || e.Message == nil || !bytes.Equal(e.Message.Payload, want[i]) {
				t.Fatalf("entry %d: offset %d, payload equal %v", i, e.Offset, e.Message != nil && bytes.Equal(e.Message.Payload, want[i]))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Message bodies live in segment files and badger holds pointers; the
// segments are cut by the queue's size limit at the same positions on
// every replica, and sealed ones are recorded.
func TestMessagesLiveInSegments(t *testing.T) {
	s := openTest(t)
	q := Queue{ID: 5, SegmentBytes: MinSegmentBytes}
	var all [][]byte
	for i := range 10 {
		all = append(all, appendMessages(t, s, q, 9, uint64(len(all)), 200, int64(1000+i))...)
	}
	checkMessages(t, s, 9, 0, all)
	var sealed int
	s.View(func(tx *Tx) error {
		segs, err := tx.dataManifest()
		if err != nil {
			t.Fatal(err)
		}
		sealed = len(segs) - 1
		for i, sg := range segs[:len(segs)-1] {
			if sg.Size > MinSegmentBytes || segs[i+1].Base != sg.Base+sg.Size {
				t.Fatalf("segment %d: %+v then %+v", i, sg, segs[i+1])
			}
		}
		return nil
	})
	if sealed < 3 {
		t.Fatalf("%d sealed segments for ~300 KB in 64 KiB segments", sealed)
	}
	// Badger holds pointers, not payloads.
	s.View(func(tx *Tx) error {
		return tx.scan(messageKey(9, 0)[:9], nil, func(_, v []byte) (bool, error) {
			if len(v) != pointerBytes {
				t.Fatalf("a message key holds %d bytes, not a pointer", len(v))
			}
			return true, nil
		})
	})
}

// A crash after the segment write but before the index commit leaves bytes
// no pointer names: opening the store cuts them, and appends go on from
// the committed end.
func TestOpenCutsUncommittedTail(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	q := Queue{ID: 2}
	first := appendMessages(t, s, q, 4, 0, 50, 10)
	tx := s.BeginWrite()
	for i := range 20 {
		if err := tx.PutMessage(q, 4, Message{Offset: uint64(50 + i), Payload: randomPayload(300)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.flushStreams(); err != nil { // the files are written, the index is not
		t.Fatal(err)
	}
	var before int64
	filepath.Walk(filepath.Join(dir, "segments"), func(_ string, fi os.FileInfo, _ error) error {
		if fi != nil && !fi.IsDir() {
			before += fi.Size()
		}
		return nil
	})
	s.filters.close() // the process died: nothing of it runs on
	s.db.Close()      // no Discard, no Commit
	s.segs.Close()

	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.DataBehind() != nil {
		t.Fatal(s2.DataBehind())
	}
	end, _ := s2.segs.Stream(2).End()
	if uint64(before) <= end {
		t.Fatalf("nothing was cut: %d bytes on disk before, end %d", before, end)
	}
	checkMessages(t, s2, 4, 0, first)
	more := appendMessages(t, s2, q, 4, 50, 5, 20)
	checkMessages(t, s2, 4, 0, append(first, more...))
}

// A stream shorter than its index (the data never reached the disk before
// a machine crash) is reported, for the node to rebuild from a snapshot.
func TestOpenReportsDataBehind(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	appendMessages(t, s, Queue{ID: 2}, 4, 0, 50, 10)
	s.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "segments", "2", "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("segments: %v", segs)
	}
	if err := os.Truncate(segs[0], 100); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.DataBehind() == nil {
		t.Fatal("a stream cut short was not reported")
	}
	if err := s2.Reset(); err != nil || s2.DataBehind() != nil {
		t.Fatalf("reset: %v, behind %v", err, s2.DataBehind())
	}
}

// A snapshot carries the segments; restoring it into an empty store (a
// wiped follower) gives the same messages, and a store that has other
// streams loses them.
func TestSnapshotCarriesSegments(t *testing.T) {
	src := openTest(t)
	q := Queue{ID: 3, SegmentBytes: MinSegmentBytes}
	msgs := appendMessages(t, src, q, 1, 0, 1000, 5)
	snap := snapshotOf(t, src)

	dst := openTest(t)
	appendMessages(t, dst, Queue{ID: 99}, 77, 0, 10, 5)
	if err := dst.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	checkMessages(t, dst, 1, 0, msgs)
	if ids, _ := dst.segs.IDs(); len(ids) != 1 || ids[0] != 3 {
		t.Fatalf("streams after restore: %v, want [3]", ids)
	}
	if !bytes.Equal(snapshotOf(t, dst), snap) {
		t.Fatal("the restored store snapshots differently")
	}
	// Appends continue on the restored stream.
	more := appendMessages(t, dst, q, 1, 1000, 3, 6)
	checkMessages(t, dst, 1, 0, append(msgs, more...))
}

// Deleting a queue removes its segment files once its clean-up is done.
func TestQueueDeleteRemovesSegmentFiles(t *testing.T) {
	s := openTest(t)
	q := Queue{ID: 3, Name: "q"}
	putQueue(t, s, q, 100, 4)
	appendMessages(t, s, q, 4, 0, 100, 5)
	write(t, s, func(tx *Tx) error { return tx.DeleteQueue(q, 50) })
	cleanUpAll(t, s, 30)
	if ids, _ := s.segs.IDs(); len(ids) != 0 {
		t.Fatalf("streams left after the delete: %v", ids)
	}
	s.View(func(tx *Tx) error {
		fams, _ := tx.KeysByFamily()
		if fams[familyStream] != 0 || fams[familyMessage] != 0 {
			t.Fatalf("keys left: %v", fams)
		}
		return nil
	})
}

// Retention drops whole sealed segments older than the cutoff: each
// partition's start offset moves past the dropped entries in the same step
// as their index entries go, the files go last, and the dedup records
// stay.
func TestRetentionTrimsWholeSegments(t *testing.T) {
	s := openTest(t)
	q := Queue{ID: 3, Name: "q", SegmentBytes: MinSegmentBytes}
	putQueue(t, s, q, 300, 10, 11, 12)
	// Three partitions interleaved in one stream, 100 messages each per
	// second, for three seconds: about 6 segments of 64 KiB.
	want := map[uint64][][]byte{}
	for sec := range 3 {
		for pid := uint64(10); pid < 13; pid++ {
			want[pid] = append(want[pid], appendMessages(t, s, q, pid, uint64(sec*100), 100, int64(1000*(sec+1)))...)
		}
	}
	write(t, s, func(tx *Tx) error { return tx.PutDedup(10, "t-0", dedup.Entry{Offset: 0, ExpiresAtMs: 1e12}) })
	segsBefore, _ := s.segs.Stream(3).Segments()

	var pos uint64
	s.View(func(tx *Tx) error {
		var found bool
		var err error
		if _, found, _ = tx.RetentionPoint(3, RetentionLimit{CutoffMs: 1000}); found {
			t.Fatal("a cutoff at the first append found a point")
		}
		pos, found, err = tx.RetentionPoint(3, RetentionLimit{CutoffMs: 2500}) // the first second's data and a little more
		if err != nil || !found {
			t.Fatalf("retention point: %v, %v", found, err)
		}
		return nil
	})
	write(t, s, func(tx *Tx) error {
		if ok, err := tx.Retain(3, pos+1, RetentionLimit{CutoffMs: 2500}, 90); ok || err != nil {
			t.Fatalf("a point that is no segment end started a trim: %v %v", ok, err)
		}
		ok, err := tx.Retain(3, pos, RetentionLimit{CutoffMs: 2500}, 91)
		if !ok || err != nil {
			t.Fatalf("retain: %v %v", ok, err)
		}
		return nil
	})
	cleanUpAll(t, s, 40)
	segsAfter, _ := s.segs.Stream(3).Segments()
	if len(segsAfter) >= len(segsBefore) || segsAfter[0].Base != pos {
		t.Fatalf("segments %d -> %d, first at %d, want at %d", len(segsBefore), len(segsAfter), segsAfter[0].Base, pos)
	}
	s.View(func(tx *Tx) error {
		for pid := uint64(10); pid < 13; pid++ {
			p, err := tx.PartitionByID(pid)
			if err != nil {
				t.Fatal(err)
			}
			if p.StartOffset < 100 || p.StartOffset >= 300 {
				t.Fatalf("partition %d starts at %d", pid, p.StartOffset)
			}
			got, err := tx.Entries(pid, 0, 1<<30, 1000)
			if err != nil {
				t.Fatalf("read after trim: %v", err)
			}
			if len(got) == 0 || got[0].Offset != p.StartOffset || len(got) != 300-int(p.StartOffset) {
				t.Fatalf("partition %d: %d entries from %d, start %d", pid, len(got), got[0].Offset, p.StartOffset)
			}
			for i, e := range got {
				if !bytes.Equal(e.Message.Payload, want[pid][int(p.StartOffset)+i]) {
					t.Fatalf("partition %d offset %d: wrong payload", pid, e.Offset)
				}
			}
		}
		if _, found, _ := tx.Dedup(10, "t-0"); !found {
			t.Fatal("retention dropped a dedup record")
		}
		return nil
	})
}

// cleanUpAll runs clean-up steps of maxWrites until no tombstone is left.
func cleanUpAll(t testing.TB, s *Store, maxWrites int) {
	t.Helper()
	for i := 0; ; i++ {
		if i > 1000 {
			t.Fatal("clean-up did not finish")
		}
		var res CleanupResult
		write(t, s, func(tx *Tx) error {
			var err error
			res, err = tx.CleanUp(&Budget{MaxWrites: maxWrites, MaxScanned: 1000})
			return err
		})
		if !res.More {
			return
		}
	}
}

// A byte limit drops the oldest sealed segments while the stream holds at
// least KeepBytes without them (Kafka's retention.bytes), however young.
func TestRetentionPointByBytes(t *testing.T) {
	s := openTest(t)
	q := Queue{ID: 3, Name: "q", SegmentBytes: MinSegmentBytes}
	putQueue(t, s, q, 1600, 10)
	for i := range 8 {
		appendMessages(t, s, q, 10, uint64(i*200), 200, 1000)
	}
	segs, err := s.segs.Stream(3).Segments()
	if err != nil || len(segs) < 5 {
		t.Fatalf("%d segments, %v; the test needs 5 or more", len(segs), err)
	}
	last := segs[len(segs)-1]
	end := last.Base + last.Size
	for _, keep := range []uint64{1, 2*MinSegmentBytes + 100, end - segs[0].Size, end} {
		var want uint64 // the end of the newest sealed segment the stream can do without
		for _, sg := range segs[:len(segs)-1] {
			if end-(sg.Base+sg.Size) >= keep {
				want = sg.Base + sg.Size
			}
		}
		s.View(func(tx *Tx) error {
			pos, found, err := tx.RetentionPoint(3, RetentionLimit{CutoffMs: 0, KeepBytes: keep})
			if err != nil || found != (want > 0) || pos != want {
				t.Fatalf("keep %d of %d bytes: point %d found %v (%v), want %d", keep, end, pos, found, err, want)
			}
			return nil
		})
	}
}

// The completed point is where the first message some reading group has
// not finished lies in the stream, over all partitions; a group without a
// position in a partition has finished nothing there, and a group that
// reads another queue does not count.
func TestCompletedPoint(t *testing.T) {
	s := openTest(t)
	q := Queue{ID: 3, Name: "q", SegmentBytes: MinSegmentBytes}
	putQueue(t, s, q, 100, 10, 11)
	for _, pid := range []uint64{11, 10} { // 11 first in the stream
		appendMessages(t, s, q, pid, 0, 100, 1000)
	}
	posOf := func(pid, offset uint64) uint64 {
		var pos uint64
		s.View(func(tx *Tx) error {
			es, err := tx.entries(pid, offset, 1, 1, false)
			if err != nil || len(es) != 1 {
				t.Fatalf("entry %d/%d: %v", pid, offset, err)
			}
			pos = es[0].ptr.pos
			return nil
		})
		return pos
	}
	point := func(groups ...string) (uint64, bool) {
		var pos uint64
		var found bool
		s.View(func(tx *Tx) (err error) {
			pos, found, _, err = tx.CompletedPoint(3, groups, 10)
			if err != nil {
				t.Fatal(err)
			}
			return nil
		})
		return pos, found
	}
	if _, found := point("a", "b"); found {
		t.Fatal("a point with no group reading the queue")
	}
	write(t, s, func(tx *Tx) error {
		for _, c := range []struct {
			group, part string
			offset      int64
		}{{"a", "10", 60}, {"a", "11", 100}, {"b", "10", 80}} {
			if err := tx.PutCursor(c.group, Cursor{QueueID: 3, Partition: c.part, Offset: c.offset}, 1); err != nil {
				return err
			}
		}
		return tx.PutCursor("other", Cursor{QueueID: 4, Partition: "10", Offset: 0}, 1)
	})
	if pos, found := point("a", "other"); !found || pos != posOf(10, 60) {
		t.Fatalf("a alone: %d %v, want %d", pos, found, posOf(10, 60))
	}
	// b has no position in partition 11: nothing there is finished.
	if pos, found := point("a", "b"); !found || pos != posOf(11, 0) {
		t.Fatalf("a and b: %d %v, want %d", pos, found, posOf(11, 0))
	}
	// More partitions than the bound: no answer.
	s.View(func(tx *Tx) error {
		if _, found, _, err := tx.CompletedPoint(3, []string{"a"}, 1); found || err != nil {
			t.Fatalf("a queue past the partition bound answered a point: %v", err)
		}
		return nil
	})
}
