package store

import (
	"bytes"
	"context"
	"io"

	"github.com/cespare/xxhash/v2"
)

// A state hash covers a replica's whole state as a snapshot sees it: every
// key and value, and every byte of message data. Replicas that hash at the
// same applied index hold the same state exactly when their hashes are
// equal. It finds what the state digest (digest.go) cannot: the digest
// hashes the writes as they are made, so a key lost afterwards (a restore
// that dropped it, a bit flipped at rest) leaves it unchanged.
//
// The digest record is left out: it is the same on replicas of one chain,
// but a store from before digests starts its chain elsewhere. The message
// data is hashed as a snapshot stream carries it (SegmentSection): the
// segments, and the batches that their refs keep in the raft log.

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
	cw := &countingWriter{w: h} // the framing a snapshot stream writes
	skip := digestKey()
	err := sn.eachKey(func(k, v []byte) error {
		if bytes.Equal(k, skip) {
			return nil
		}
		if out.Keys%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		cw.field(k)
		cw.field(v)
		out.Keys++
		return cw.err
	})
	if err != nil {
		return out, err
	}
	// The message data as a snapshot stream carries it: each segment, and
	// after one holding refs the batches they name, read from the raft
	// log or a sidecar.
	section, _, err := SegmentSection(sn.PinDir, sn.Segments, sn.refs.log)
	if err != nil {
		return out, err
	}
	defer section.Close()
	n, err := io.Copy(h, ctxReader{ctx, section})
	out.Bytes = uint64(n)
	if err != nil {
		return out, err
	}
	out.Hash = h.Sum64()
	return out, nil
}

// ctxReader reads r until ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
