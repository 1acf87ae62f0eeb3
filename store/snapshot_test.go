package store

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

func snapshotOf(t *testing.T, s *Store) []byte {
	t.Helper()
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Release()
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSnapshotAppliedIndexReadsTheHead(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := SnapshotAppliedIndex(bytes.NewReader(snapshotOf(t, s))); err != nil || got != 0 {
		t.Fatalf("empty store: applied %d, %v; want 0", got, err)
	}
	tx := s.BeginWrite()
	tx.PutQueue(Queue{ID: 1, Name: "q"})
	tx.PutMeta(Meta{AppliedIndex: 42, NextID: 2})
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	snap := snapshotOf(t, s)
	if got, err := SnapshotAppliedIndex(bytes.NewReader(snap)); err != nil || got != 42 {
		t.Fatalf("applied %d, %v; want 42", got, err)
	}
	// Only the head is needed: a stream cut after the meta record still answers.
	if got, err := SnapshotAppliedIndex(bytes.NewReader(snap[:len(snapshotMagic)+2+1+34])); err != nil || got != 42 {
		t.Fatalf("truncated stream: applied %d, %v; want 42", got, err)
	}
	if _, err := SnapshotAppliedIndex(bytes.NewReader([]byte("garbage!"))); err == nil {
		t.Fatal("garbage read as a snapshot")
	}
}

func TestRestoreRefusesTruncatedStream(t *testing.T) {
	src, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	tx := src.BeginWrite()
	tx.PutMeta(Meta{AppliedIndex: 7})
	tx.PutQueue(Queue{ID: 1, Name: "q"})
	tx.Commit()
	snap := snapshotOf(t, src)

	dst, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if err := dst.Restore(bytes.NewReader(snap[:len(snap)-1])); err == nil {
		t.Fatal("a stream without its end marker restored")
	}
	if err := dst.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotOf(t, dst), snap) {
		t.Fatal("restored store differs from the source")
	}
}

// A restore builds badger tables of 2 MB, not the 64 MB that badger's
// default size doubling gives its last level: each table is built whole in
// memory, and the stream writer builds 16 at once (a million-partition
// follower's restore held over a gigabyte of table buffers).
func TestRestoreBuildsSmallTables(t *testing.T) {
	src, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	putRandomKV(t, src, 32) // 32 MiB of keys
	snap := snapshotOf(t, src)

	dir := t.TempDir()
	dst, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if err := dst.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, name := range tables {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
		if fi.Size() > 3<<20 {
			t.Errorf("%s is %d bytes: tables should be about 2 MB", filepath.Base(name), fi.Size())
		}
	}
	if total < 16<<20 {
		t.Fatalf("the restored tables hold %d bytes, want the 32 MiB of keys (less what compresses)", total)
	}
}

// putRandomKV writes mib thousands of KV rows of about 1 KiB each, random
// and incompressible.
func putRandomKV(t *testing.T, s *Store, mib int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	raw := make([]byte, 768)
	for batch := range mib {
		tx := s.BeginWrite()
		for i := range 1000 {
			for j := range raw {
				raw[j] = byte(rng.Uint32())
			}
			value, _ := json.Marshal(base64.StdEncoding.EncodeToString(raw))
			if err := tx.PutKV(KVRow{NS: "ns", Key: fmt.Sprintf("k%06d", batch*1000+i), Value: value}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// A restore cut short leaves the store claiming no applied index, so a
// node that stops before a restore finishes restores again when it starts
// (its applied index is behind every snapshot) rather than serving part of
// a snapshot as the whole. Badger's stream writer puts each table it builds
// into the store as it goes, and the meta record sorts first: it must be
// written last.
func TestRestoreCutShortClaimsNoAppliedIndex(t *testing.T) {
	src := openTest(t)
	tx := src.BeginWrite()
	tx.PutMeta(Meta{AppliedIndex: 42, NextID: 2})
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	putRandomKV(t, src, 40) // more than restoreBufferBytes: tables are built before the cut
	snap := snapshotOf(t, src)

	dir := t.TempDir()
	dst, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	tx = dst.BeginWrite()
	tx.PutMeta(Meta{AppliedIndex: 7, NextID: 2})
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := dst.Restore(bytes.NewReader([]byte("garbage!"))); err == nil || errors.Is(err, ErrRestoreIncomplete) {
		t.Fatalf("a stream refused before anything changed: %v, want a plain error", err)
	}
	if err := dst.Restore(bytes.NewReader(snap[:len(snap)*9/10])); !errors.Is(err, ErrRestoreIncomplete) {
		t.Fatalf("a stream cut short: %v, want ErrRestoreIncomplete", err)
	}
	dst.Close() // the node stops before a restore succeeds
	if dst, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer func() { dst.Close() }()
	applied := func() uint64 {
		t.Helper()
		var m Meta
		if err := dst.View(func(tx *Tx) (err error) { m, err = tx.Meta(); return err }); err != nil {
			t.Fatal(err)
		}
		return m.AppliedIndex
	}
	var kept int
	dst.View(func(tx *Tx) error {
		rows, err := tx.KVPrefix("ns", "", "", 100_000)
		kept = len(rows)
		return err
	})
	if kept == 0 {
		t.Fatal("the cut restore put no keys in: the test does not reach the case it is about")
	}
	if got := applied(); got != 0 {
		t.Fatalf("after a restore cut short (%d of 40,000 rows in), the store claims applied index %d, want 0", kept, got)
	}
	if err := dst.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if got := applied(); got != 42 {
		t.Fatalf("after the whole restore: applied index %d, want 42", got)
	}
	if !bytes.Equal(snapshotOf(t, dst), snap) {
		t.Fatal("restored store differs from the source")
	}
}
