package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/waggle-mq/waggle/dedup"
)

// waitFilterReady waits until the store's filter in use is built.
func waitFilterReady(t *testing.T, s *Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if s.filters.current.Load() != nil && s.filters.next.Load() == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the dedup filter was not built within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// putIDs records ids prefix-0 .. prefix-(n-1) in partition pid, one commit.
func putIDs(t *testing.T, s *Store, pid uint64, prefix string, n int) {
	t.Helper()
	write(t, s, func(tx *Tx) error {
		for i := range n {
			if err := tx.PutDedup(pid, fmt.Sprintf("%s-%d", prefix, i), dedup.Entry{Offset: uint64(i), ExpiresAtMs: 1e12}); err != nil {
				return err
			}
		}
		return nil
	})
}

// missingIDs lists which of ids prefix-0 .. prefix-(n-1) a write
// transaction's lookup does not find.
func missingIDs(t *testing.T, s *Store, pid uint64, prefix string, n int) []string {
	t.Helper()
	tx := s.BeginWrite()
	defer tx.Discard()
	var missing []string
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		e, found, err := tx.Dedup(pid, id)
		if err != nil {
			t.Fatal(err)
		}
		if !found || e.Offset != uint64(i) {
			missing = append(missing, id)
		}
	}
	return missing
}

// The filter never hides a record: not one written before the store was
// opened, not one committed while a build runs, not one set earlier in the
// same transaction. And once built, a lookup of a new id mostly reads
// nothing.
func TestDedupFilterNeverHidesARecord(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	putIDs(t, s, 1, "old", 20_000)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Writes and lookups race the build the open started, and builds
	// started by hand.
	for round := range 20 {
		putIDs(t, s, 2, fmt.Sprint("new", round), 500)
		if round%5 == 0 {
			s.filters.rebuild()
		}
		if m := missingIDs(t, s, 2, fmt.Sprint("new", round), 500); len(m) > 0 {
			t.Fatalf("round %d: %d records not found, first %s", round, len(m), m[0])
		}
	}
	waitFilterReady(t, s)
	if m := missingIDs(t, s, 1, "old", 20_000); len(m) > 0 {
		t.Fatalf("%d records written before the open not found, first %s", len(m), m[0])
	}
	for round := range 20 {
		if m := missingIDs(t, s, 2, fmt.Sprint("new", round), 500); len(m) > 0 {
			t.Fatalf("round %d after the build: %d records not found", round, len(m))
		}
	}

	tx := s.BeginWrite()
	defer tx.Discard()
	if err := tx.PutDedup(3, "same-tx", dedup.Entry{Offset: 7, ExpiresAtMs: 1e12}); err != nil {
		t.Fatal(err)
	}
	if e, found, err := tx.Dedup(3, "same-tx"); err != nil || !found || e.Offset != 7 {
		t.Fatalf("a record set earlier in the transaction: %+v %v %v", e, found, err)
	}
	before := s.filters.reads.Load()
	for i := range 10_000 {
		if _, found, err := tx.Dedup(3, fmt.Sprint("never-", i)); err != nil || found {
			t.Fatalf("never-%d: found %v, %v", i, found, err)
		}
	}
	if reads := s.filters.reads.Load() - before; reads > 500 {
		t.Fatalf("10,000 lookups of new ids read badger %d times; the filter should spare nearly all", reads)
	}
}

// A restore replaces the keys the filter knows: the restored records are
// found (before the new build is done too), and lookups of ids that only
// the replaced state had read badger and find nothing.
func TestDedupFilterAfterRestore(t *testing.T) {
	src, dst := openTest(t), openTest(t)
	putIDs(t, src, 1, "src", 1_000)
	putIDs(t, dst, 1, "dst", 1_000)
	waitFilterReady(t, dst)
	sn, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	sn.Release()
	if err := dst.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if m := missingIDs(t, dst, 1, "src", 1_000); len(m) > 0 {
		t.Fatalf("%d restored records not found, first %s", len(m), m[0])
	}
	if m := missingIDs(t, dst, 1, "dst", 1_000); len(m) != 1_000 {
		t.Fatalf("%d records of the replaced state still found", 1_000-len(m))
	}
	waitFilterReady(t, dst)
	if m := missingIDs(t, dst, 1, "src", 1_000); len(m) > 0 {
		t.Fatalf("after the rebuild, %d restored records not found", len(m))
	}
}

// The filter's false positive rate at its capacity is what its doc says
// (about 3 %), so it spares most reads while it is consulted.
func TestDedupFilterFalsePositives(t *testing.T) {
	fs := newDedupFilters(nil)
	f := newDedupFilter(dedupFilterWords)
	for i := range dedupFilterCapacity {
		f.add(fs.hash(binary.BigEndian.AppendUint64([]byte("in"), uint64(i))))
	}
	const probes = 200_000
	fp := 0
	for i := range probes {
		if f.mayContain(fs.hash(binary.BigEndian.AppendUint64([]byte("out"), uint64(i)))) {
			fp++
		}
	}
	if rate := float64(fp) / probes; rate > 0.05 {
		t.Fatalf("false positive rate at capacity %.3f, want at most 0.05", rate)
	}
	t.Logf("false positive rate at capacity: %.4f", float64(fp)/probes)
}
