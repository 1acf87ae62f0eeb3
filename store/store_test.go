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
