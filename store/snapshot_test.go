package store

import (
	"bytes"
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
