package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"

	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/segment"
)

// From log format 5 a Kafka record batch is written to disk once: in the
// raft log, inside the produce entry that carried it. Its segment record
// is a ref (kindBatchRef) naming the entry's raft index and where in the
// entry's data the batch lies, the same on every replica; reading it reads
// the entry back from this node's raft log and sets the batch's first
// offset and leader epoch, which the batch CRC does not cover.
//
// The raft log then keeps entries that refs still name: raft's own
// compaction moves past them, but no entry at or after the store's log
// floor (LogFloor) is deleted. A node copies the batches of a segment into
// the segment's sidecar file when the log must go on without them (a
// segment that would hold it back for long, see Relocate), and a snapshot
// carries, for each segment holding refs, a sidecar with all its batches,
// so a follower that installs it needs nothing from a log it never had.
// A ref is read from the segment's sidecar when the sidecar holds it,
// else from the raft log.

// kindBatchRef is a segment record's entry for a Kafka batch kept in the
// raft log:
//
//	[0x07] count(4) maxTimestampMs(8) appendSeq(8) index(8) at(4) length(4) epoch(4) ordinal(4)
//
// index is the raft entry, [at, at+length) the batch in its data, epoch
// the partition leader epoch to set, ordinal the ref's number in its
// segment (the sidecar's table is in that order).
const kindBatchRef = 7

const batchRefBytes = 45

// BatchRef names a Kafka batch in the data of a raft entry.
type BatchRef struct {
	Index      uint64 // the raft entry
	At, Length uint32 // where in its data
	Epoch      int32  // the partition leader epoch readers see
}

// RaftLog reads this node's raft log: the data of an applied entry, as
// raft stored it, in bytes the caller owns (it may change them). It
// answers ErrEntryGone for an entry no longer there.
type RaftLog interface {
	EntryData(index uint64) ([]byte, error)
}

// ErrEntryGone reports a raft entry that the log no longer holds.
var ErrEntryGone = errors.New("store: the raft log no longer holds the entry")

// SetRaftLog gives the store the raft log its refs name. It must be called
// before the store applies or reads a ref.
func (s *Store) SetRaftLog(l RaftLog) { s.refs.log = l }

// refData resolves refs: through the segments' sidecars, else the raft log.
type refData struct {
	segs *segment.Dir
	log  RaftLog

	mu       sync.Mutex
	sidecars map[[2]uint64]sidecarHeader // what each segment's sidecar holds (absent: not looked at)
	pinned   map[*Snapshot]uint64        // the log floors of open snapshots
}

func newRefData(segs *segment.Dir) *refData {
	return &refData{segs: segs, sidecars: map[[2]uint64]sidecarHeader{}, pinned: map[*Snapshot]uint64{}}
}

// coverage returns what the sidecar of segment (stream, base) holds, reading
// its header on first use.
func (r *refData) coverage(stream, base uint64) sidecarHeader {
	r.mu.Lock()
	h, ok := r.sidecars[[2]uint64{stream, base}]
	r.mu.Unlock()
	if ok {
		return h
	}
	h, err := readSidecarHeader(r.segs.Stream(stream).SidecarPath(base))
	if err != nil {
		h = sidecarHeader{} // none, or unreadable: the log is the source
	}
	r.mu.Lock()
	r.sidecars[[2]uint64{stream, base}] = h
	r.mu.Unlock()
	return h
}

// forget drops what is known of the sidecars (after a restore or reset).
func (r *refData) forget() {
	r.mu.Lock()
	clear(r.sidecars)
	r.mu.Unlock()
}

// learn records a sidecar just written.
func (r *refData) learn(stream, base uint64, h sidecarHeader) {
	r.mu.Lock()
	r.sidecars[[2]uint64{stream, base}] = h
	r.mu.Unlock()
}

// batch reads the raw batch a ref names (its first offset and epoch as
// the producer sent them), from the segment's sidecar or the raft log,
// into bytes the caller owns.
func (r *refData) batch(stream, base uint64, ordinal uint32, ref BatchRef) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		var b []byte
		var err error
		if h := r.coverage(stream, base); ordinal < h.Count {
			b, err = readSidecarBatch(r.segs.Stream(stream).SidecarPath(base), h, ordinal)
		} else {
			b, err = r.fromLog(ref)
		}
		if (errors.Is(err, ErrEntryGone) || errors.Is(err, os.ErrNotExist)) && attempt == 0 {
			// Copied into a sidecar and dropped from the log since this
			// reader looked, or the sidecar replaced by a restore: look
			// again.
			r.mu.Lock()
			delete(r.sidecars, [2]uint64{stream, base})
			r.mu.Unlock()
			continue
		}
		return b, err
	}
}

func (r *refData) fromLog(ref BatchRef) ([]byte, error) { return batchFromLog(r.log, ref) }

// batchFromLog reads the batch a ref names from the raft log.
func batchFromLog(log RaftLog, ref BatchRef) ([]byte, error) {
	var e logReader
	e.log = log
	return e.batch(ref)
}

// logReader reads batches from the raft log for a pass over refs in
// order, keeping the entry it read last: the refs of one wide push (up to
// a thousand partitions of a queue, each a ref of its own) all name one
// entry, which would otherwise be read from the log once for each.
type logReader struct {
	log   RaftLog
	index uint64
	data  []byte // entry index's data; nil: none read yet
}

// batch reads the batch ref names, in bytes shared with the next call's
// for the same entry: the caller must not change them.
func (e *logReader) batch(ref BatchRef) ([]byte, error) {
	if e.log == nil {
		return nil, errors.New("store: a batch kept in the raft log, and no raft log to read it from")
	}
	if e.data == nil || e.index != ref.Index {
		data, err := e.log.EntryData(ref.Index)
		if err != nil {
			return nil, fmt.Errorf("raft entry %d: %w", ref.Index, err)
		}
		e.index, e.data = ref.Index, data
	}
	if uint64(ref.At)+uint64(ref.Length) > uint64(len(e.data)) {
		return nil, fmt.Errorf("raft entry %d holds %d bytes, a batch is at [%d, +%d): %w", ref.Index, len(e.data), ref.At, ref.Length, segment.ErrCorrupt)
	}
	return e.data[ref.At : ref.At+ref.Length : ref.At+ref.Length], nil
}

// appendBatchRef appends a ref to b as kindBatchRef.
func appendBatchRef(b []byte, count uint32, maxTimestampMs int64, appendSeq uint64, ref BatchRef, ordinal uint32) []byte {
	b = append(b, kindBatchRef)
	b = binary.BigEndian.AppendUint32(b, count)
	b = binary.BigEndian.AppendUint64(b, uint64(maxTimestampMs))
	b = binary.BigEndian.AppendUint64(b, appendSeq)
	b = binary.BigEndian.AppendUint64(b, ref.Index)
	b = binary.BigEndian.AppendUint32(b, ref.At)
	b = binary.BigEndian.AppendUint32(b, ref.Length)
	b = binary.BigEndian.AppendUint32(b, uint32(ref.Epoch))
	return binary.BigEndian.AppendUint32(b, ordinal)
}

// decodedRef is a kindBatchRef entry.
type decodedRef struct {
	count          uint32
	maxTimestampMs int64
	appendSeq      uint64
	ref            BatchRef
	ordinal        uint32
	messages       []byte // of a kindMessageBatchRef: the per-message part
}

func decodeBatchRef(b []byte) (decodedRef, error) {
	if len(b) != batchRefBytes || b[0] != kindBatchRef {
		return decodedRef{}, errBadRecord
	}
	return decodedRef{
		count:          binary.BigEndian.Uint32(b[1:]),
		maxTimestampMs: int64(beUint64(b[5:])),
		appendSeq:      beUint64(b[13:]),
		ref: BatchRef{
			Index:  beUint64(b[21:]),
			At:     binary.BigEndian.Uint32(b[29:]),
			Length: binary.BigEndian.Uint32(b[33:]),
			Epoch:  int32(binary.BigEndian.Uint32(b[37:])),
		},
		ordinal: binary.BigEndian.Uint32(b[41:]),
	}, nil
}

// kindMessageBatchRef is a segment record's entry for the messages one
// push entry appended to a partition (log format 5), their payloads left
// in the raft entry:
//
//	[0x08] count(4) timestampMs(8) appendSeq(8) index(8) at(4) length(4) ordinal(4)
//	then per message: id(16) uvarint(len) transactionId uvarint(from) uvarint(len)
//
// [at, at+length) of the entry's data spans every payload; message i's is
// the from and len of it. The span is the ref (a sidecar keeps it whole).
const kindMessageBatchRef = 8

const messageBatchRefHead = 41

// refOf returns the ref a segment record's body holds, if it holds one.
func refOf(body []byte) (decodedRef, bool, error) {
	if len(body) < 17 || (body[16] != kindBatchRef && body[16] != kindMessageBatchRef) {
		return decodedRef{}, false, nil
	}
	b := body[16:]
	if b[0] == kindMessageBatchRef {
		if len(b) < messageBatchRefHead {
			return decodedRef{}, false, errBadRecord
		}
		return decodedRef{
			count:          binary.BigEndian.Uint32(b[1:]),
			maxTimestampMs: int64(beUint64(b[5:])),
			appendSeq:      beUint64(b[13:]),
			ref:            BatchRef{Index: beUint64(b[21:]), At: binary.BigEndian.Uint32(b[29:]), Length: binary.BigEndian.Uint32(b[33:])},
			ordinal:        binary.BigEndian.Uint32(b[37:]),
			messages:       b[messageBatchRefHead:],
		}, true, nil
	}
	d, err := decodeBatchRef(b)
	return d, err == nil, err
}

// PutMessageRefs is PutMessages for messages whose payloads lie in the data
// of raft entry index, msgs[i]'s at ats[i] (log format 5): one record
// with the messages' ids and transactionIds and where each payload is.
func (t *Tx) PutMessageRefs(q Queue, partitionID uint64, msgs []Message, index uint64, ats []uint32) error {
	lo, hi := uint64(math.MaxUint64), uint64(0)
	for i, m := range msgs {
		lo, hi = min(lo, uint64(ats[i])), max(hi, uint64(ats[i])+uint64(len(m.Payload)))
	}
	ref := BatchRef{Index: index, At: uint32(lo), Length: uint32(hi - lo)}
	first := msgs[0]
	size := messageBatchRefHead
	for _, m := range msgs {
		size += 16 + 3*binary.MaxVarintLen32 + len(m.TransactionID)
	}
	limit, ageMs := SegmentLimits(q)
	h, _, err := t.beforeAppend(q.ID, limit, ageMs, uint64(segment.FrameBytes+16+size)+uint64(ref.Length), first.TimestampMs)
	if err != nil {
		return err
	}
	b := recordBody(partitionID, first.Offset, size)
	b = append(b, kindMessageBatchRef)
	b = binary.BigEndian.AppendUint32(b, uint32(len(msgs)))
	b = binary.BigEndian.AppendUint64(b, uint64(first.TimestampMs))
	b = binary.BigEndian.AppendUint64(b, first.AppendSeq)
	b = binary.BigEndian.AppendUint64(b, ref.Index)
	b = binary.BigEndian.AppendUint32(b, ref.At)
	b = binary.BigEndian.AppendUint32(b, ref.Length)
	b = binary.BigEndian.AppendUint32(b, h.ActiveRefs)
	for i, m := range msgs {
		b = append(b, m.ID[:]...)
		b = binary.AppendUvarint(b, uint64(len(m.TransactionID)))
		b = append(b, m.TransactionID...)
		b = binary.AppendUvarint(b, uint64(ats[i])-lo)
		b = binary.AppendUvarint(b, uint64(len(m.Payload)))
	}
	pos, err := t.writeRecord(q.ID, h, b, first.TimestampMs)
	if err != nil {
		return err
	}
	t.countRef(h, ref)
	p := pointer{stream: q.ID, pos: pos, length: uint32(len(b)), count: uint32(len(msgs)), maxTimestampMs: first.TimestampMs, appendSeq: first.AppendSeq}
	return t.set(messageKey(partitionID, first.Offset), p.encode())
}

// countRef adds a ref just appended to the stream's head.
func (t *Tx) countRef(h *streamHead, ref BatchRef) {
	if h.ActiveRefs == 0 {
		h.ActiveMinRef = ref.Index
	}
	h.ActiveRefs++
	h.RefBytes += uint64(ref.Length)
}

// decodeMessageRefs builds the messages of a kindMessageBatchRef record
// whose first is at offset, their payloads copied out of span.
func decodeMessageRefs(offset uint64, d decodedRef, span []byte) (Entry, error) {
	rest := d.messages
	if d.count == 0 || uint64(d.count) > uint64(len(rest))/19+1 {
		return Entry{}, errBadRecord
	}
	uvarint := func() (uint64, bool) {
		n, w := binary.Uvarint(rest)
		if w <= 0 {
			return 0, false
		}
		rest = rest[w:]
		return n, true
	}
	msgs := make([]Message, d.count)
	for i := range msgs {
		if len(rest) < 16 {
			return Entry{}, errBadRecord
		}
		m := &msgs[i]
		m.Offset, m.TimestampMs, m.AppendSeq = offset+uint64(i), d.maxTimestampMs, d.appendSeq
		copy(m.ID[:], rest)
		rest = rest[16:]
		n, ok := uvarint()
		if !ok || n > uint64(len(rest)) {
			return Entry{}, errBadRecord
		}
		m.TransactionID, rest = string(rest[:n]), rest[n:]
		from, ok1 := uvarint()
		n, ok2 := uvarint()
		if !ok1 || !ok2 || from+n > uint64(len(span)) {
			return Entry{}, errBadRecord
		}
		m.Payload = append([]byte(nil), span[from:from+n]...)
	}
	if len(rest) != 0 {
		return Entry{}, errBadRecord
	}
	return Entry{Offset: offset, Count: d.count, MaxTimestampMs: d.maxTimestampMs, AppendSeq: d.appendSeq, Messages: msgs}, nil
}

// PutBatchRef stores a Kafka batch kept in the raft log (log format 5)
// covering count offsets from base in a partition of q, appended at
// appendMs: a ref in the queue's stream and a pointer to it, as PutBatch
// stores the batch itself.
func (t *Tx) PutBatchRef(q Queue, partitionID, base uint64, count uint32, maxTimestampMs int64, appendSeq uint64, appendMs int64, ref BatchRef) error {
	if ref.Length < recordbatch.HeaderSize {
		return fmt.Errorf("store: a %d-byte batch ref", ref.Length)
	}
	limit, ageMs := SegmentLimits(q)
	frame := uint64(segment.FrameBytes + 16 + batchRefBytes)
	h, _, err := t.beforeAppend(q.ID, limit, ageMs, frame+uint64(ref.Length), appendMs)
	if err != nil {
		return err
	}
	body := appendBatchRef(recordBody(partitionID, base, batchRefBytes), count, maxTimestampMs, appendSeq, ref, h.ActiveRefs)
	pos, err := t.writeRecord(q.ID, h, body, appendMs)
	if err != nil {
		return err
	}
	t.countRef(h, ref)
	p := pointer{stream: q.ID, pos: pos, length: uint32(len(body)), count: count, maxTimestampMs: maxTimestampMs, appendSeq: appendSeq}
	return t.set(messageKey(partitionID, base), p.encode())
}

// readRef reads the batch a ref at stream position pos names, with its
// first offset set to offset and its leader epoch to the ref's.
func (t *Tx) readRef(stream, pos, offset uint64, d decodedRef) (Entry, error) {
	if t.refs == nil {
		return Entry{}, errors.New("store: a batch ref read without the store")
	}
	base, err := t.segs.Stream(stream).BaseOf(pos)
	if err != nil {
		return Entry{}, err
	}
	raw, err := t.refs.batch(stream, base, d.ordinal, d.ref)
	if err != nil {
		return Entry{}, err
	}
	if d.messages != nil {
		return decodeMessageRefs(offset, d, raw)
	}
	if len(raw) < recordbatch.HeaderSize {
		return Entry{}, fmt.Errorf("batch ref of %d bytes: %w", len(raw), segment.ErrCorrupt)
	}
	recordbatch.SetBaseAndEpoch(raw, int64(offset), d.ref.Epoch)
	return Entry{
		Offset:         offset,
		Count:          d.count,
		MaxTimestampMs: d.maxTimestampMs,
		AppendSeq:      d.appendSeq,
		Batch:          raw,
	}, nil
}

// segmentRefs is what one segment holding refs needs: Refs of them, the
// first at raft index MinRef.
type segmentRefs struct {
	Stream, Base uint64
	Refs         uint32
	MinRef       uint64
	End          uint64 // the segment's committed end
	Bytes        uint64 // of the batches its refs name
}

// eachRefSegment calls fn with every segment, sealed or active, that holds
// refs, oldest first in each stream.
func (t *Tx) eachRefSegment(fn func(segmentRefs) error) error {
	return t.eachStreamHead(func(id uint64, h streamHead) error {
		if h.RefBytes == 0 {
			return nil
		}
		err := t.scan(segmentPrefix(id), nil, func(k, v []byte) (bool, error) {
			sr, err := decodeSegmentRecord(k, v)
			if err != nil {
				return false, err
			}
			if sr.Refs > 0 {
				err = fn(segmentRefs{Stream: id, Base: sr.Base, Refs: sr.Refs, MinRef: sr.MinRef, End: sr.End, Bytes: sr.RefBytes})
			}
			return err == nil, err
		})
		if err != nil || h.ActiveRefs == 0 {
			return err
		}
		return fn(segmentRefs{Stream: id, Base: h.ActiveBase, Refs: h.ActiveRefs, MinRef: h.ActiveMinRef, End: h.End, Bytes: h.RefBytes - h.BaseRefBytes})
	})
}

// logNeed is the lowest raft index a segment with refs still reads from
// the log, given what its sidecar holds (math.MaxUint64: none). Past the
// sidecar's last ref the next can be no lower than its index plus one.
func logNeed(sg segmentRefs, side sidecarHeader) uint64 {
	switch {
	case side.Count >= sg.Refs:
		return math.MaxUint64
	case side.Count == 0:
		return sg.MinRef
	}
	return side.LastIndex + 1
}

// LogHold is what the store needs of the raft log: the lowest entry a ref
// reads from it (Floor; math.MaxUint64 for none), counting open snapshots,
// the segment that sets it (Pin), and how many bytes of batches all refs
// name (Live).
type LogHold struct {
	Floor uint64
	Pin   *segmentRefs
	Live  uint64
}

// LogHold computes the store's hold on the raft log. It reads the heads and
// segment records of the streams holding refs.
func (s *Store) LogHold() (LogHold, error) {
	hold := LogHold{Floor: math.MaxUint64}
	err := s.View(func(tx *Tx) error {
		return tx.eachRefSegment(func(sg segmentRefs) error {
			hold.Live += sg.Bytes
			if need := logNeed(sg, s.refs.coverage(sg.Stream, sg.Base)); need < hold.Floor {
				hold.Floor, hold.Pin = need, &sg
			}
			return nil
		})
	})
	s.refs.mu.Lock()
	for _, f := range s.refs.pinned {
		hold.Floor = min(hold.Floor, f)
	}
	s.refs.mu.Unlock()
	return hold, err
}

// Relocate copies the batches of the segment that pins the raft log
// (hold.Pin) into the segment's sidecar, so that the log can be compacted
// past it. It runs beside the state machine; the sidecar is complete and
// fsynced before any reader or the log's floor relies on it.
func (s *Store) Relocate(pin segmentRefs) error {
	stream := s.segs.Stream(pin.Stream)
	path := stream.SidecarPath(pin.Base)
	old := s.refs.coverage(pin.Stream, pin.Base)
	refs, err := scanRefs(stream.Path(pin.Base), pin.Base, pin.End)
	if err != nil {
		return err
	}
	have, err := openSidecarScan(path, old)
	if err != nil {
		return err
	}
	defer have.Close()
	fromLog := logReader{log: s.refs.log}
	h, err := writeSidecar(path, pin.Stream, pin.Base, refs, func(k int, r BatchRef) ([]byte, error) {
		if uint32(k) < old.Count {
			return have.next(r)
		}
		return fromLog.batch(r)
	})
	if err != nil {
		return err
	}
	if _, err := os.Stat(stream.Path(pin.Base)); errors.Is(err, os.ErrNotExist) {
		return os.Remove(path) // retention dropped the segment meanwhile
	}
	s.refs.learn(pin.Stream, pin.Base, h)
	return nil
}
