package store

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
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
	rng := rand.New(rand.NewPCG(1, 2))
	raw := make([]byte, 768)
	for batch := range 32 { // 32 x 1,000 rows of ~1 KiB: 32 MiB of keys
		tx := src.BeginWrite()
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
