package store

import (
	"bytes"
	"context"
	"os"
	"testing"
)

func stateHashOf(t *testing.T, s *Store) StateHash {
	t.Helper()
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Release()
	h, err := sn.Hash(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Two stores holding the same state hash the same, whatever their digest
// records say; a key gone or a byte of message data changed at rest
// changes the hash.
func TestStateHashSeesEveryKeyAndByte(t *testing.T) {
	src := openTest(t)
	q := Queue{ID: 3, SegmentBytes: MinSegmentBytes}
	appendMessages(t, src, q, 1, 0, 1000, 5)
	putRandomKV(t, src, 1)
	write(t, src, func(tx *Tx) error { return tx.PutMeta(Meta{AppliedIndex: 42, NextID: 9, Digest: 7}) })
	want := stateHashOf(t, src)
	if want.Keys < 1000 || want.Bytes < 100_000 {
		t.Fatalf("hashed %d keys and %d bytes of message data, want the 1,000 KV rows and the messages", want.Keys, want.Bytes)
	}

	dst := openTest(t)
	if err := dst.Restore(bytes.NewReader(snapshotOf(t, src))); err != nil {
		t.Fatal(err)
	}
	// Another chain (a store from before digests): the digest record
	// differs, the state does not.
	write(t, dst, func(tx *Tx) error { return tx.PutMeta(Meta{AppliedIndex: 42, NextID: 9, DigestSince: 40, Digest: 8}) })
	if got := stateHashOf(t, dst); got != want {
		t.Fatalf("the restored store hashes %+v, the source %+v", got, want)
	}

	write(t, dst, func(tx *Tx) error { return tx.DeleteKV(KVRow{NS: "ns", Key: "k000500"}) })
	if got := stateHashOf(t, dst); got.Hash == want.Hash || got.Keys != want.Keys-1 {
		t.Fatalf("with a KV row deleted: %+v, before %+v", got, want)
	}

	// A byte flipped in a segment file, which no write made.
	dst2 := openTest(t)
	if err := dst2.Restore(bytes.NewReader(snapshotOf(t, src))); err != nil {
		t.Fatal(err)
	}
	sn, err := dst2.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	path := dst2.segs.Stream(sn.Segments[0].Stream).Path(sn.Segments[0].Base)
	sn.Release()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := stateHashOf(t, dst2); got.Hash == want.Hash || got.Bytes != want.Bytes {
		t.Fatalf("with a byte of message data flipped: %+v, before %+v", got, want)
	}
}

// A hash stops when its context ends.
func TestStateHashStops(t *testing.T) {
	s := openTest(t)
	putRandomKV(t, s, 1)
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sn.Hash(ctx); err != context.Canceled {
		t.Fatalf("hash with its context ended: %v", err)
	}
}

// Batches that segments keep in the raft log (refs) are hashed with the
// segments: a replica whose log holds another byte in one of them hashes
// differently.
func TestStateHashReadsBatchesKeptInTheRaftLog(t *testing.T) {
	s := openTest(t)
	f := writeRefFixture(t, s, 40)
	want := stateHashOf(t, s)
	if want.Bytes < 40*4000 {
		t.Fatalf("hashed %d bytes of message data; the 40 batches alone are %d", want.Bytes, 40*4000)
	}
	f.log.mu.Lock()
	f.log.entries[120][500] ^= 1
	f.log.mu.Unlock()
	if got := stateHashOf(t, s); got.Hash == want.Hash || got.Bytes != want.Bytes {
		t.Fatalf("with a byte of a batch in the raft log flipped: %+v, before %+v", got, want)
	}
}
