package store

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/waggle-mq/waggle/dedup"
)

// logIDs records n ids prefix-0..n-1 of partition pid in the dedup log of
// windowMs, stored at atMs, at offsets from first on, in one transaction.
func logIDs(t *testing.T, s *Store, pid uint64, prefix string, n int, first uint64, windowMs, atMs int64) {
	t.Helper()
	write(t, s, func(tx *Tx) error {
		ids, entries := logEntries(prefix, n, first, windowMs, atMs)
		return tx.PutDedupLog(pid, windowMs, ids, entries)
	})
}

func logEntries(prefix string, n int, first uint64, windowMs, atMs int64) ([]string, []dedup.Entry) {
	ids := make([]string, n)
	entries := make([]dedup.Entry, n)
	for i := range ids {
		ids[i] = fmt.Sprint(prefix, i)
		entries[i] = dedup.Entry{Offset: first + uint64(i), MessageID: [16]byte{byte(first + uint64(i)), 7}, StoredAtMs: atMs, ExpiresAtMs: atMs + windowMs}
	}
	return ids, entries
}

// lookupLog looks id up in a write transaction, as the state machine does.
func lookupLog(t *testing.T, s *Store, pid uint64, id string) (dedup.Entry, bool) {
	t.Helper()
	tx := s.BeginWrite()
	defer tx.Discard()
	e, found, err := tx.Dedup(pid, id)
	if err != nil {
		t.Fatal(err)
	}
	return e, found
}

// wantLogged checks that id is found with its offset and message id.
func wantLogged(t *testing.T, s *Store, pid uint64, id string, offset uint64, atMs int64, windowMs int64) {
	t.Helper()
	e, found := lookupLog(t, s, pid, id)
	want := dedup.Entry{Offset: offset, MessageID: [16]byte{byte(offset), 7}, StoredAtMs: atMs, ExpiresAtMs: atMs + windowMs}
	if !found || e != want {
		t.Fatalf("%s in partition %d: found %v, %+v; want %+v", id, pid, found, e, want)
	}
}

// An id in the dedup log is found inside the transaction that wrote it,
// after the commit, after the store is reopened (the index rebuilt from
// the files) and in a store restored from a snapshot; an id of another
// partition, or never written, is not; a discarded transaction leaves none.
func TestDedupLogFindsIdsAcrossCommitReopenAndRestore(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	const w = 60_000
	tx := s.BeginWrite()
	ids, entries := logEntries("a", 300, 10, w, 5000)
	if err := tx.PutDedupLog(1, w, ids, entries); err != nil {
		t.Fatal(err)
	}
	if e, found, err := tx.Dedup(1, "a7"); err != nil || !found || e.Offset != 17 {
		t.Fatalf("a7 inside its own transaction: %v %v %+v", err, found, e)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx.Discard()
	tx = s.BeginWrite()
	ids, entries = logEntries("gone", 5, 0, w, 5000)
	if err := tx.PutDedupLog(1, w, ids, entries); err != nil {
		t.Fatal(err)
	}
	tx.Discard()

	check := func(s *Store) {
		t.Helper()
		for _, i := range []int{0, 7, 299} {
			wantLogged(t, s, 1, fmt.Sprint("a", i), uint64(10+i), 5000, w)
		}
		for _, miss := range []struct {
			pid uint64
			id  string
		}{{2, "a7"}, {1, "a300"}, {1, "gone0"}} {
			if _, found := lookupLog(t, s, miss.pid, miss.id); found {
				t.Fatalf("%s in partition %d found", miss.id, miss.pid)
			}
		}
		if ids, _ := s.DedupIndexStats(); ids != 300 {
			t.Fatalf("the index holds %d ids, want 300", ids)
		}
	}
	check(s)
	snap := snapshotOf(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s)

	r := openTest(t)
	logIDs(t, r, 1, "other", 3, 0, w, 1) // replaced by the restore
	if err := r.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	check(r)
	if _, found := lookupLog(t, r, 1, "other0"); found {
		t.Fatal("an id of the store's state before the restore is still found")
	}
}

// Segments seal by age; a prune drops those whose newest id has expired,
// files and all, and an idle active segment once it has expired too. An
// id stored again after its window answers with its newest record, also
// across logs of two windows.
func TestDedupLogPruneDropsExpiredSegments(t *testing.T) {
	s := openTest(t)
	const w = 16_000 // segments seal after 1 s
	for i := range 10 {
		logIDs(t, s, 1, fmt.Sprintf("t%d-", i), 50, uint64(i*50), w, int64(i)*1000)
	}
	stream := s.segs.Stream(dedupStreamID(w))
	segs, err := stream.Segments()
	if err != nil || len(segs) != 10 {
		t.Fatalf("%d segments (%v), want one a second", len(segs), err)
	}
	// At 20,500 the segments of 0 s..4 s have expired (newest + 16 s).
	if n := prune(t, s, 20_500, 100); n != 5 {
		t.Fatalf("pruned %d segments at 20.5 s, want 5", n)
	}
	if _, found := lookupLog(t, s, 1, "t4-0"); found {
		t.Fatal("an id of a pruned segment is still found")
	}
	wantLogged(t, s, 1, "t5-3", 253, 5000, w)
	if segs, _ := stream.Segments(); len(segs) != 5 {
		t.Fatalf("%d segment files after the prune, want 5", len(segs))
	}
	if ids, _ := s.DedupIndexStats(); ids != 250 {
		t.Fatalf("the index holds %d ids, want 250", ids)
	}
	// The limit bounds one prune; the idle active segment goes last.
	if n := prune(t, s, 100_000, 2); n != 2 {
		t.Fatalf("pruned %d with limit 2", n)
	}
	if n := prune(t, s, 100_000, 100); n != 3 {
		t.Fatalf("pruned %d, want the last 3 (the active one too)", n)
	}
	if ids, _ := s.DedupIndexStats(); ids != 0 {
		t.Fatalf("the index holds %d ids after everything expired", ids)
	}
	if _, found := lookupLog(t, s, 1, "t9-0"); found {
		t.Fatal("an id of the dropped active segment is still found")
	}

	// Stored again: the newest record answers, whatever log holds it.
	logIDs(t, s, 1, "again", 1, 1, w, 200_000)
	logIDs(t, s, 1, "again", 1, 2, w, 220_000)
	logIDs(t, s, 1, "again", 1, 3, 2*w, 240_000)
	logIDs(t, s, 1, "again", 1, 4, w, 230_000) // a later record of the shorter window
	wantLogged(t, s, 1, "again0", 3, 240_000, 2*w)
	if n := prune(t, s, 250_000, 100); n < 1 {
		t.Fatalf("pruned %d at 250 s", n)
	}
	wantLogged(t, s, 1, "again0", 3, 240_000, 2*w)
}

// Fingerprints that collide name every record that holds them, newest
// first, whether the segment is active or sealed.
func TestDedupSegIndexKeepsCollidingFingerprints(t *testing.T) {
	x := newDedupIndex("", nil)
	x.add(5, 0, 10, []uint32{7, 8})
	x.add(5, 0, 30, []uint32{7})
	x.add(5, 0, 50, []uint32{9, 7})
	seg := x.segment(5, 0)
	for _, state := range []string{"active", "sealed"} {
		var got []uint64
		if _, err := seg.candidates(7, func(pos uint64) (bool, error) {
			got = append(got, pos)
			return true, nil
		}); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != "[50 30 10]" {
			t.Fatalf("%s: candidates of 7 are %v, want [50 30 10]", state, got)
		}
		seg.seal()
	}
}

// A damaged dedup log stops the store from opening rather than letting
// it answer "new" for ids it holds.
func TestDedupLogDamageRefusesOpen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	logIDs(t, s, 1, "d", 20, 0, 60_000, 1000)
	path := s.segs.Stream(dedupStreamID(60_000)).Path(0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(dir); err == nil {
		s.Close()
		t.Fatal("a store with a damaged dedup log opened")
	}
}

// A dedup log that came back shorter than its head (a machine crash) is
// reported as DataBehind, for a restore, not refused at open.
func TestDedupLogShorterThanItsHeadIsDataBehind(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	logIDs(t, s, 1, "c", 20, 0, 60_000, 1000)
	path := s.segs.Stream(dedupStreamID(60_000)).Path(0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 10); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.DataBehind() == nil {
		t.Fatal("a short dedup log is not reported")
	}
	if err := s.Reset(); err != nil || s.DataBehind() != nil {
		t.Fatalf("reset: %v, %v", err, s.DataBehind())
	}
	if _, found := lookupLog(t, s, 1, "c0"); found {
		t.Fatal("an id is found after the reset")
	}
}

// A sealed dedup segment's index array is written to a file, and an open
// reads the file instead of the segment: only the active segment, and a
// sealed one whose file is damaged, are scanned (and the damaged file is
// written again). A file of no segment goes at open, a dropped segment's
// file with the prune. Lookups answer the same either way.
func TestDedupIndexFilesSpareTheScan(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	const w = 16_000 // segments seal after 1 s
	for i := range 5 {
		logIDs(t, s, 1, fmt.Sprintf("t%d-", i), 40, uint64(i*40), w, int64(i)*1000)
	}
	idxDir := filepath.Join(dir, dedupIndexDirName)
	s.dedup.wait()
	if files := listDedupIndexFiles(idxDir); len(files) != 4 {
		t.Fatalf("%d index files for 4 sealed segments", len(files))
	}
	check := func(s *Store) {
		t.Helper()
		for i := range 5 {
			wantLogged(t, s, 1, fmt.Sprintf("t%d-7", i), uint64(i*40+7), int64(i)*1000, w)
		}
		if _, found := lookupLog(t, s, 1, "t5-0"); found {
			t.Fatal("an id never logged is found")
		}
		if ids, _ := s.DedupIndexStats(); ids != 200 {
			t.Fatalf("the index holds %d ids, want 200", ids)
		}
	}
	check(s)
	reopen := func(wantScans int64) {
		t.Helper()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if s, err = Open(dir); err != nil {
			t.Fatal(err)
		}
		if n := s.dedup.scans.Load(); n != wantScans {
			t.Fatalf("the open scanned %d segments, want %d", n, wantScans)
		}
		check(s)
	}
	reopen(1)

	files := listDedupIndexFiles(idxDir)
	stream := dedupStreamID(w)
	var second string
	for name, path := range files {
		if name[0] == stream && (second == "" || path < second) && name[1] > 0 {
			second = path
		}
	}
	good, err := os.ReadFile(second)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(good)
	bad[len(bad)-9] ^= 1 // a key
	stale := filepath.Join(idxDir, dedupIndexFileName(stream, 1<<40))
	for path, b := range map[string][]byte{second: bad, stale: good} {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reopen(2)
	s.dedup.wait()
	if again, err := os.ReadFile(second); err != nil || !bytes.Equal(again, good) {
		t.Fatalf("the damaged file was not written again: %v", err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the file of no segment is still there: %v", err)
	}

	if n := prune(t, s, 18_500, 100); n != 3 {
		t.Fatalf("pruned %d segments at 18.5 s, want 3", n)
	}
	s.dedup.wait()
	if files := listDedupIndexFiles(idxDir); len(files) != 1 {
		t.Fatalf("%d index files after the prune left one sealed segment", len(files))
	}
	defer s.Close()
}

// Only a segment indexed from its first record gets a file: an index that
// began part-way through a segment would otherwise be trusted by every
// later open. A file whose keys are out of order or point past its
// segment is refused, CRC or not: a lookup's binary search could pass an
// id by.
func TestDedupIndexFilesHoldWholeSortedSegments(t *testing.T) {
	dir := t.TempDir()
	x := newDedupIndex(dir, nil)
	x.apply([]dedupEvent{
		{kind: dedupAdd, stream: 5, base: 0, pos: 10, fps: []uint32{1, 2}}, // begins after the segment's start
		{kind: dedupSeal, stream: 5, base: 0, end: 100},
		{kind: dedupAdd, stream: 5, base: 100, pos: 100, fps: []uint32{3}},
		{kind: dedupAdd, stream: 5, base: 100, pos: 150, fps: []uint32{4}},
		{kind: dedupSeal, stream: 5, base: 100, end: 200},
	})
	x.wait()
	files := listDedupIndexFiles(dir)
	if len(files) != 1 || files[[2]uint64{5, 100}] == "" {
		t.Fatalf("index files %v, want the whole segment at 100 only", files)
	}
	keys, ok := readDedupIndexFile(files[[2]uint64{5, 100}], 5, 100, 200)
	if !ok || fmt.Sprint(keys) != fmt.Sprint([]uint64{3 << 32, 4<<32 | 50}) {
		t.Fatalf("read back %v, %v", keys, ok)
	}
	for name, bad := range map[string][]uint64{
		"unsorted":         {4<<32 | 50, 3 << 32},
		"past its segment": {3 << 32, 4<<32 | 100},
	} {
		path := filepath.Join(dir, "bad.idx")
		if err := writeDedupIndexFile(path, 5, 100, 200, bad); err != nil {
			t.Fatal(err)
		}
		if _, ok := readDedupIndexFile(path, 5, 100, 200); ok {
			t.Fatalf("a file with keys %s was read", name)
		}
	}
}

// A prune sees a dedup log started earlier in its own transaction: what it
// drops must not depend on where a replica cut its entries into
// transactions. (It scanned only the stream heads in badger, which a new
// log has only once its transaction commits.)
func TestDedupLogPruneSeesALogStartedInItsTransaction(t *testing.T) {
	const w = 16_000
	apart, together := openTest(t), openTest(t)
	logIDs(t, apart, 1, "a", 5, 0, w, 1000)
	nApart := prune(t, apart, 1000+w+1, 100)

	tx := together.BeginWrite()
	defer tx.Discard()
	ids, entries := logEntries("a", 5, 0, w, 1000)
	if err := tx.PutDedupLog(1, w, ids, entries); err != nil {
		t.Fatal(err)
	}
	nTogether, err := tx.PruneDedup(1000+w+1, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if nApart != 1 || nTogether != nApart {
		t.Fatalf("the prune dropped %d segments after the log's commit and %d in the log's own transaction, want 1 both", nApart, nTogether)
	}
	for _, s := range []*Store{apart, together} {
		if _, found := lookupLog(t, s, 1, "a0"); found {
			t.Fatal("an expired id is still found after the prune")
		}
	}
}
