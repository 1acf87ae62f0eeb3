package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Regression (issue 30): closing a store whose directory was deleted under
// it hung in badger's memtable flush, retried forever; it answers
// ErrDirGone at once.
func TestCloseAfterTheDirectoryVanished(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	write(t, s, func(tx *Tx) error { return tx.PutQueue(Queue{ID: 10, Name: "a", KafkaPartitions: 1}) })
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if !errors.Is(err, ErrDirGone) {
			t.Fatalf("Close: %v, want ErrDirGone", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close still runs 10 s after the directory vanished")
	}
}

// Regression (issue 33, power loss): badger's memtable and value logs are
// not fsynced, so after a machine crash one can be an empty file, which badger
// refused to open ("Create a new file"); the node then called its whole
// data directory damaged. The store opens, with what badger had synced.
func TestEmptyMemtableAfterACrashOpens(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	write(t, s, func(tx *Tx) error { return tx.PutQueue(Queue{ID: 10, Name: "a", KafkaPartitions: 1}) })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"00009.mem", "000001.vlog"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := VerifyApplied(dir, false); err != nil {
		t.Fatalf("verify: %v", err)
	}
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.View(func(tx *Tx) error { _, err := tx.Queue("a"); return err }); err != nil {
		t.Fatalf("queue a after the reopen: %v", err)
	}
}
