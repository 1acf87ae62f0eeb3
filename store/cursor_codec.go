package store

import (
	"encoding/binary"
	"errors"
	"slices"
)

// Cursor records are written on every pop and ack, so they are binary
// (JSON cost a quarter of the CPU of a transaction). Format, version 3:
//
//	[0x03] gen                                              uvarint
//	offset leaderEpoch metadata updatedMs                   varints / bytes
//	nLeases (id expiresAtMs n offsets... hashes(8 each) nAcks (offset status)...)...
//	nDone done...  nAttempts (offset count)...  nFailures (offset count)...
//	expired                                                 varint, only when not 0
//
// Version 2 is the same without gen (read as gen 0); version 1 was JSON.
// Both are still read. nLeases was a 0 or 1 flag before share groups held
// several leases on one partition (log format 11); as a uvarint it reads
// the same, so a cursor with at most one lease is the same bytes as before. Maps are written in offset order, so equal cursors
// are equal bytes.
const (
	cursorV2 byte = 2
	cursorV3 byte = 3
)

var ackStatusCodes = []string{"", "completed", "failed", "retry", "dlq"}

func encodeCursor(c Cursor) []byte {
	b := []byte{cursorV3}
	b = binary.AppendUvarint(b, c.Gen)
	b = binary.AppendVarint(b, c.Offset)
	b = binary.AppendVarint(b, int64(c.LeaderEpoch))
	b = appendBytes(b, []byte(c.Metadata))
	b = binary.AppendVarint(b, c.UpdatedMs)
	b = binary.AppendUvarint(b, uint64(len(c.Leases)))
	for _, l := range c.Leases {
		b = appendLease(b, l)
	}
	b = binary.AppendUvarint(b, uint64(len(c.Done)))
	for _, o := range c.Done {
		b = binary.AppendVarint(b, o)
	}
	for _, m := range []map[int64]int32{c.Attempts, c.Failures} {
		keys := sortedKeys(m)
		b = binary.AppendUvarint(b, uint64(len(keys)))
		for _, o := range keys {
			b = binary.AppendVarint(b, o)
			b = binary.AppendVarint(b, int64(m[o]))
		}
	}
	if c.Expired != 0 {
		b = binary.AppendVarint(b, c.Expired)
	}
	return b
}

func appendLease(b []byte, l *Lease) []byte {
	b = appendBytes(b, []byte(l.ID))
	b = binary.AppendVarint(b, l.ExpiresAtMs)
	b = binary.AppendUvarint(b, uint64(len(l.Offsets)))
	for _, o := range l.Offsets {
		b = binary.AppendVarint(b, o)
	}
	for i := range l.Offsets {
		var h uint64
		if i < len(l.TxHashes) {
			h = l.TxHashes[i]
		}
		b = binary.BigEndian.AppendUint64(b, h)
	}
	keys := sortedKeys(l.Acks)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, o := range keys {
		b = binary.AppendVarint(b, o)
		b = append(b, byte(max(slices.Index(ackStatusCodes, l.Acks[o]), 0)))
	}
	return b
}

func sortedKeys[V any](m map[int64]V) []int64 {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func appendBytes(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// cursorReader reads what encodeCursor wrote; the first error sticks.
type cursorReader struct {
	b   []byte
	err error
}

var errBadCursor = errors.New("store: malformed cursor record")

func (r *cursorReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err, r.b = errBadCursor, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *cursorReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err, r.b = errBadCursor, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *cursorReader) count(minSize int) int {
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > uint64(len(r.b)-n)/uint64(minSize) {
		r.err, r.b = errBadCursor, nil
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

func (r *cursorReader) bytes() []byte {
	n := r.count(1)
	if r.err != nil || n > len(r.b) {
		r.err, r.b = errBadCursor, nil
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *cursorReader) byte() byte {
	if len(r.b) == 0 {
		r.err = errBadCursor
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *cursorReader) lease() *Lease {
	l := &Lease{ID: string(r.bytes()), ExpiresAtMs: r.varint()}
	n := r.count(9)
	for range n {
		l.Offsets = append(l.Offsets, r.varint())
	}
	for range n {
		if len(r.b) < 8 {
			r.err, r.b = errBadCursor, nil
			return nil
		}
		l.TxHashes = append(l.TxHashes, binary.BigEndian.Uint64(r.b))
		r.b = r.b[8:]
	}
	if acks := r.count(2); acks > 0 {
		l.Acks = make(map[int64]string, acks)
		for range acks {
			o, s := r.varint(), int(r.byte())
			if s >= len(ackStatusCodes) {
				r.err, r.b = errBadCursor, nil
				return nil
			}
			l.Acks[o] = ackStatusCodes[s]
		}
	}
	return l
}

// jsonCursor is a version 1 cursor, whose one lease was "lease".
type jsonCursor struct {
	Cursor
	Lease *Lease `json:"lease,omitempty"`
}

func decodeCursor(b []byte) (Cursor, error) {
	if len(b) > 0 && b[0] == recordV1 {
		j, err := decodeJSONRecord[jsonCursor](b)
		if j.Lease != nil {
			j.Cursor.Leases = []*Lease{j.Lease}
		}
		return j.Cursor, err
	}
	if len(b) == 0 || (b[0] != cursorV2 && b[0] != cursorV3) {
		return Cursor{}, errBadCursor
	}
	r := &cursorReader{b: b[1:]}
	var gen uint64
	if b[0] == cursorV3 {
		gen = r.uvarint()
	}
	c := Cursor{Gen: gen, Offset: r.varint(), LeaderEpoch: int32(r.varint()), Metadata: string(r.bytes()), UpdatedMs: r.varint()}
	for range r.count(2) {
		l := r.lease()
		if r.err != nil {
			return Cursor{}, r.err
		}
		c.Leases = append(c.Leases, l)
	}
	for range r.count(1) {
		c.Done = append(c.Done, r.varint())
	}
	for _, m := range []*map[int64]int32{&c.Attempts, &c.Failures} {
		if n := r.count(2); n > 0 {
			*m = make(map[int64]int32, n)
			for range n {
				o := r.varint()
				(*m)[o] = int32(r.varint())
			}
		}
	}
	if len(r.b) != 0 {
		c.Expired = r.varint()
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = errBadCursor
	}
	return c, r.err
}
