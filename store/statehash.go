package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cespare/xxhash/v2"
	"github.com/dgraph-io/badger/v4"
)

// A state hash covers a replica's whole state as a snapshot sees it: every
// key and value, and every byte of message data. Replicas that hash at the
// same applied index hold the same state exactly when their hashes are
// equal. It finds what the state digest (digest.go) cannot: the digest
// hashes the writes as they are made, so a key lost afterwards (a restore
// that dropped it, a bit flipped at rest) leaves it unchanged.
//
// The digest record is left out: it is the same on replicas of one chain,
// but a store from before digests starts its chain elsewhere. Sidecars
// are left out too: they copy batches of the raft log that the refs in
// the segments name, which are hashed.

// StateHash is what hashing a snapshot found.
type StateHash struct {
	Hash  uint64
	Keys  uint64 // keys hashed
	Bytes uint64 // message data hashed, in bytes
}

// Hash reads the snapshot's whole state and hashes it. It reads the
// message data from the snapshot's links, so it may run while entries
// are applied; ctx stops it.
func (sn *Snapshot) Hash(ctx context.Context) (StateHash, error) {
	var out StateHash
	h := xxhash.New()
	var frame []byte
	it := sn.txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 100})
	defer it.Close()
	skip := digestKey()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		if bytes.Equal(item.Key(), skip) {
			continue
		}
		if out.Keys%4096 == 0 && ctx.Err() != nil {
			return out, ctx.Err()
		}
		frame = binary.AppendUvarint(frame[:0], uint64(len(item.Key())))
		h.Write(frame)
		h.Write(item.Key())
		err := item.Value(func(v []byte) error {
			frame = binary.AppendUvarint(frame[:0], uint64(len(v)))
			h.Write(frame)
			h.Write(v)
			return nil
		})
		if err != nil {
			return out, err
		}
		out.Keys++
	}
	for _, sg := range sn.Segments {
		if sg.Sidecar {
			continue
		}
		frame = binary.BigEndian.AppendUint64(frame[:0], sg.Stream)
		frame = binary.BigEndian.AppendUint64(frame, sg.Base)
		frame = binary.BigEndian.AppendUint64(frame, sg.Size)
		h.Write(frame)
		if err := hashFile(ctx, h, filepath.Join(sn.PinDir, sg.Path), sg.Size); err != nil {
			return out, fmt.Errorf("stream %d segment %d: %w", sg.Stream, sg.Base, err)
		}
		out.Bytes += sg.Size
	}
	out.Hash = h.Sum64()
	return out, nil
}

// hashFile writes the first size bytes of the file at path to w, a
// megabyte at a time, stopping when ctx ends.
func hashFile(ctx context.Context, w io.Writer, path string, size uint64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for size > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(size, 1<<20)
		if _, err := io.CopyN(w, f, int64(n)); err != nil {
			return err // io.EOF: the file is shorter than its record says
		}
		size -= n
	}
	return nil
}
