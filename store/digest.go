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
// entries is cut into transactions differs between replicas. The meta
// record's fields are folded in per entry instead (ChainDigest); what a
// stream head holds shows in later writes (the records' positions, the
// sealed segments' records).
//
// The digest hashes the writes, not the state they leave: a version that
// stops making a write (even a delete of a key that is not there) or
// makes it differently disagrees with an older replica from then on. Such
// a change needs the care of a log format change (docs/LOG-FORMAT.md).

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

// ChainDigest folds the entry at index into the digest of the state
// before it: its writes (their WriteSum growth) and the meta record's
// state after it (the clock, the id counter and the log format), which
// no key write carries.
func ChainDigest(digest, index, writes uint64, after Meta) uint64 {
	var b [48]byte
	binary.BigEndian.PutUint64(b[0:], digest)
	binary.BigEndian.PutUint64(b[8:], index)
	binary.BigEndian.PutUint64(b[16:], writes)
	binary.BigEndian.PutUint64(b[24:], uint64(after.ClockMs))
	binary.BigEndian.PutUint64(b[32:], after.NextID)
	binary.BigEndian.PutUint64(b[40:], uint64(after.LogFormat))
	return xxhash.Sum64(b[:])
}

// The digest record names the applied index it is the digest at: a
// binary without digests keeps the key (it restores and snapshots every
// meta key) but never updates it, and a digest of another index must not
// be taken for this one's.
const digestRecordLen = 25 // recordV1, applied index, since, digest

func (m Meta) encodeDigest() []byte {
	b := append(make([]byte, 0, digestRecordLen), recordV1)
	b = binary.BigEndian.AppendUint64(b, m.AppliedIndex)
	b = binary.BigEndian.AppendUint64(b, m.DigestSince)
	return binary.BigEndian.AppendUint64(b, m.Digest)
}

// readDigest fills m's digest fields from the store. A store written
// without digests has none, and one whose record is of another applied
// index (or of a layout this binary does not know) has none that holds:
// its digest starts again at its applied index.
func (t *Tx) readDigest(m *Meta) error {
	b, err := t.get(digestKey())
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return err
	case len(b) == digestRecordLen && b[0] == recordV1 && binary.BigEndian.Uint64(b[1:]) == m.AppliedIndex:
		m.DigestSince = binary.BigEndian.Uint64(b[9:])
		m.Digest = binary.BigEndian.Uint64(b[17:])
		return nil
	}
	m.DigestSince, m.Digest = m.AppliedIndex, 0
	return nil
}
