package store

import (
	"encoding/binary"
	"errors"

	"github.com/cespare/xxhash/v2"
)

// The state digest tells whether replicas hold the same state without
// comparing it: every write the state machine makes while applying an
// entry (a key set or deleted, a record appended to a stream) is hashed,
// and the state machine folds each entry's sum of hashes into a running
// digest (see package fsm). Replicas that applied the same entries to the
// same state have the same digest at each index; a replica that skipped
// an entry, or answered one differently, never has it again.
//
// The sum is order-free within an entry, so writes made in map order
// count the same on every replica. Writes made when a transaction commits
// (the meta record and the stream heads) are left out: where a batch of
// entries is cut into transactions differs between replicas, and both
// only restate what the entries' own writes did.

// digestKey holds Meta.Digest and Meta.DigestSince; it sorts among the
// meta keys, which a restore writes last.
func digestKey() []byte { return []byte{familyMeta, 'd'} }

const (
	writeSet    byte = 's'
	writeDelete byte = 'd'
	writeAppend byte = 'a'
)

// noteWrite adds one write to the transaction's sum.
func (t *Tx) noteWrite(kind byte, k, v []byte) {
	if k[0] == familyMeta || k[0] == familyStream {
		return
	}
	d := &t.digest
	d.Reset()
	d.Write([]byte{kind})
	d.Write(binary.BigEndian.AppendUint32(nil, uint32(len(k))))
	d.Write(k)
	d.Write(v)
	t.writeSum += d.Sum64()
}

// noteAppend adds a record appended to a stream to the transaction's sum.
func (t *Tx) noteAppend(streamID uint64, body []byte) {
	d := &t.digest
	d.Reset()
	d.Write([]byte{writeAppend})
	d.Write(binary.BigEndian.AppendUint64(nil, streamID))
	d.Write(body)
	t.writeSum += d.Sum64()
}

// WriteSum is the sum of the hashes of the writes made so far in the
// transaction, for the state digest: its growth over one entry is that
// entry's share.
func (t *Tx) WriteSum() uint64 { return t.writeSum }

// ChainDigest folds the writes of the entry at index (their WriteSum
// growth) into the digest of the state before it.
func ChainDigest(digest, index, writes uint64) uint64 {
	var b [24]byte
	binary.BigEndian.PutUint64(b[0:], digest)
	binary.BigEndian.PutUint64(b[8:], index)
	binary.BigEndian.PutUint64(b[16:], writes)
	return xxhash.Sum64(b[:])
}

func (m Meta) encodeDigest() []byte {
	b := binary.BigEndian.AppendUint64(nil, m.DigestSince)
	return binary.BigEndian.AppendUint64(b, m.Digest)
}

// readDigest fills m's digest fields from the store. A store written
// before digests has none: its digest starts at its applied index.
func (t *Tx) readDigest(m *Meta) error {
	b, err := t.get(digestKey())
	switch {
	case errors.Is(err, ErrNotFound):
		m.DigestSince, m.Digest = m.AppliedIndex, 0
		return nil
	case err != nil:
		return err
	case len(b) != 16:
		return errBadRecord
	}
	m.DigestSince = binary.BigEndian.Uint64(b)
	m.Digest = binary.BigEndian.Uint64(b[8:])
	return nil
}
