package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/waggle-mq/waggle/segment"
)

// Message data lives in segment files, one stream per queue (package
// segment); badger keeps, under each message key, a pointer to the record
// plus what readers need without reading it (count, newest timestamp,
// append sequence). A stream's head record says how far it is committed
// and where its active segment began; each sealed segment has a record of
// its own. All three are written in the same badger transaction as the
// entries that point into the stream, and on open every stream is cut back
// to its committed end (see recoverStreams).
//
//	familyStream  [0x16] queueID(8)          -> stream head (versioned)
//	familySegment [0x17] queueID(8) base(8)  -> sealed segment (versioned)
//
// A record's body in the stream is partitionID(8) offset(8) followed by the
// entry encoded as it once was stored in badger itself (kindMessageV2 or
// kindBatchV2), so a record names its place and decodes with the same code.
const (
	familyStream  byte = 0x16
	familySegment byte = 0x17
)

// kindPointer is a message key's value when the entry lives in a segment:
//
//	[0x05] stream(8) pos(8) length(4) count(4) maxTimestampMs(8) appendSeq(8)
const kindPointer = 5

const pointerBytes = 41

// Segment limits. A queue's active segment is sealed before an append would
// take it past SegmentBytes, or once it began SegmentMs ago (replicated
// time), whichever comes first; retention drops whole sealed segments, so
// the age bounds how long expired data can outlive its retention.
const (
	DefaultSegmentBytes = 64 << 20
	DefaultSegmentMs    = 60 * 60 * 1000
	MinSegmentBytes     = 64 << 10
)

func streamKey(queueID uint64) []byte { return appendUint64([]byte{familyStream}, queueID) }

func segmentKey(queueID, base uint64) []byte {
	return appendUint64(appendUint64([]byte{familySegment}, queueID), base)
}

func segmentPrefix(queueID uint64) []byte { return appendUint64([]byte{familySegment}, queueID) }

// streamHead is a stream's committed state.
type streamHead struct {
	End           uint64 // position after the last committed record
	ActiveBase    uint64 // where the active segment begins
	ActiveSinceMs int64  // replicated time of the active segment's first append
	LastAppendMs  int64  // replicated time of the last append

	// Batches kept in the raft log (kindBatchRef, log format 5) add their
	// bytes to the stream without being in its files: RefBytes counts them
	// over the stream's life, BaseRefBytes as of ActiveBase; ActiveRefs is
	// how many refs the active segment holds (the next one's ordinal) and
	// ActiveMinRef the raft index of its first.
	RefBytes     uint64
	BaseRefBytes uint64
	ActiveRefs   uint32
	ActiveMinRef uint64

	committedEnd uint64 // End as last committed (for Discard)
	dirty        bool   // changed without an append (a seal): write it
}

// recordV2 versions the stream head and segment records of a stream that
// has held refs; one that never has keeps version 1's bytes.
const recordV2 byte = 2

func (h streamHead) encode() []byte {
	b := make([]byte, 0, 61)
	if h.RefBytes == 0 {
		b = append(b, recordV1)
	} else {
		b = append(b, recordV2)
	}
	b = binary.BigEndian.AppendUint64(b, h.End)
	b = binary.BigEndian.AppendUint64(b, h.ActiveBase)
	b = binary.BigEndian.AppendUint64(b, uint64(h.ActiveSinceMs))
	b = binary.BigEndian.AppendUint64(b, uint64(h.LastAppendMs))
	if h.RefBytes == 0 {
		return b
	}
	b = binary.BigEndian.AppendUint64(b, h.RefBytes)
	b = binary.BigEndian.AppendUint64(b, h.BaseRefBytes)
	b = binary.BigEndian.AppendUint32(b, h.ActiveRefs)
	return binary.BigEndian.AppendUint64(b, h.ActiveMinRef)
}

func decodeStreamHead(b []byte) (streamHead, error) {
	if !(len(b) == 33 && b[0] == recordV1) && !(len(b) == 61 && b[0] == recordV2) {
		return streamHead{}, errBadRecord
	}
	h := streamHead{
		End:           binary.BigEndian.Uint64(b[1:]),
		ActiveBase:    binary.BigEndian.Uint64(b[9:]),
		ActiveSinceMs: int64(binary.BigEndian.Uint64(b[17:])),
		LastAppendMs:  int64(binary.BigEndian.Uint64(b[25:])),
	}
	if b[0] == recordV2 {
		h.RefBytes = beUint64(b[33:])
		h.BaseRefBytes = beUint64(b[41:])
		h.ActiveRefs = binary.BigEndian.Uint32(b[49:])
		h.ActiveMinRef = beUint64(b[53:])
	}
	h.committedEnd = h.End
	return h, nil
}

// activeBytes is how much the active segment holds, refs' batches included.
func (h *streamHead) activeBytes() uint64 {
	return h.End - h.ActiveBase + h.RefBytes - h.BaseRefBytes
}

// SegmentRecord describes a sealed segment: positions [Base, End) of its
// stream, the last appended at LastAppendMs (replicated time; appends are
// in time order, so it is the segment's newest). A segment holding refs
// (kindBatchRef) also counts them: Refs of them, the first at raft index
// MinRef, RefBytes of batches in all, the stream's RefBytes reaching
// RefEnd at the segment's end.
type SegmentRecord struct {
	QueueID      uint64
	Base, End    uint64
	LastAppendMs int64

	Refs             uint32
	MinRef           uint64
	RefBytes, RefEnd uint64
}

func (s SegmentRecord) encode() []byte {
	b := make([]byte, 0, 45)
	if s.RefEnd == 0 {
		b = append(b, recordV1)
	} else {
		b = append(b, recordV2)
	}
	b = binary.BigEndian.AppendUint64(b, s.End)
	b = binary.BigEndian.AppendUint64(b, uint64(s.LastAppendMs))
	if s.RefEnd == 0 {
		return b
	}
	b = binary.BigEndian.AppendUint32(b, s.Refs)
	b = binary.BigEndian.AppendUint64(b, s.MinRef)
	b = binary.BigEndian.AppendUint64(b, s.RefBytes)
	return binary.BigEndian.AppendUint64(b, s.RefEnd)
}

func decodeSegmentRecord(k, v []byte) (SegmentRecord, error) {
	if len(k) != 17 || k[0] != familySegment || !(len(v) == 17 && v[0] == recordV1) && !(len(v) == 45 && v[0] == recordV2) {
		return SegmentRecord{}, errBadRecord
	}
	sr := SegmentRecord{
		QueueID:      beUint64(k[1:]),
		Base:         beUint64(k[9:]),
		End:          beUint64(v[1:]),
		LastAppendMs: int64(beUint64(v[9:])),
	}
	if v[0] == recordV2 {
		sr.Refs = binary.BigEndian.Uint32(v[17:])
		sr.MinRef = beUint64(v[21:])
		sr.RefBytes = beUint64(v[29:])
		sr.RefEnd = beUint64(v[37:])
	}
	return sr, nil
}

// pointer is a decoded kindPointer value.
type pointer struct {
	stream, pos    uint64
	length, count  uint32
	maxTimestampMs int64
	appendSeq      uint64
}

func (p pointer) encode() []byte {
	b := make([]byte, 0, pointerBytes)
	b = append(b, kindPointer)
	b = binary.BigEndian.AppendUint64(b, p.stream)
	b = binary.BigEndian.AppendUint64(b, p.pos)
	b = binary.BigEndian.AppendUint32(b, p.length)
	b = binary.BigEndian.AppendUint32(b, p.count)
	b = binary.BigEndian.AppendUint64(b, uint64(p.maxTimestampMs))
	return binary.BigEndian.AppendUint64(b, p.appendSeq)
}

func decodePointer(b []byte) (pointer, error) {
	if len(b) != pointerBytes || b[0] != kindPointer {
		return pointer{}, errBadRecord
	}
	return pointer{
		stream:         beUint64(b[1:]),
		pos:            beUint64(b[9:]),
		length:         binary.BigEndian.Uint32(b[17:]),
		count:          binary.BigEndian.Uint32(b[21:]),
		maxTimestampMs: int64(beUint64(b[25:])),
		appendSeq:      beUint64(b[33:]),
	}, nil
}

// SegmentLimits returns the queue's effective segment size and age. A
// retention period (or completed retention) shorter than the age shortens
// it, so expired data is dropped within about one retention period.
func SegmentLimits(q Queue) (bytes uint64, ageMs int64) {
	bytes, ageMs = DefaultSegmentBytes, DefaultSegmentMs
	if q.SegmentBytes > 0 {
		bytes = uint64(max(q.SegmentBytes, MinSegmentBytes))
	}
	if q.SegmentMs > 0 {
		ageMs = q.SegmentMs
	}
	for _, r := range []int64{q.RetentionMs, q.CompletedRetentionMs} {
		if r > 0 && r < ageMs {
			ageMs = r
		}
	}
	return bytes, ageMs
}

// head returns the stream's head as this transaction sees it, loading it on
// first use.
func (t *Tx) head(queueID uint64) (*streamHead, error) {
	if h := t.heads[queueID]; h != nil {
		return h, nil
	}
	h := &streamHead{}
	b, err := t.get(streamKey(queueID))
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return nil, err
	default:
		if *h, err = decodeStreamHead(b); err != nil {
			return nil, err
		}
	}
	if t.heads == nil {
		t.heads = map[uint64]*streamHead{}
	}
	t.heads[queueID] = h
	return h, nil
}

// recordBody starts a segment record's body for an entry of about size
// bytes: its place, to which the caller appends the encoded entry, so the
// entry is not copied again.
func recordBody(partitionID, offset uint64, size int) []byte {
	b := make([]byte, 0, 16+size)
	b = binary.BigEndian.AppendUint64(b, partitionID)
	return binary.BigEndian.AppendUint64(b, offset)
}

// appendData writes an entry's record (body from recordBody) to its queue's
// stream and its pointer under the message key. appendMs is the
// replicated time of the append.
func (t *Tx) appendData(q Queue, partitionID, offset uint64, body []byte, count uint32, maxTs int64, appendSeq uint64, appendMs int64) error {
	limit, ageMs := SegmentLimits(q)
	pos, _, err := t.appendRecord(q.ID, limit, ageMs, body, 0, appendMs)
	if err != nil {
		return err
	}
	p := pointer{stream: q.ID, pos: pos, length: uint32(len(body)), count: count, maxTimestampMs: maxTs, appendSeq: appendSeq}
	return t.set(messageKey(partitionID, offset), p.encode())
}

// appendRecord appends body to a stream, first sealing the active segment
// when the record (with the refBytes of a batch it refers to in the raft
// log) would take it past limit bytes or it began ageMs or more before
// appendMs (replicated time, so every replica seals at the same place). It
// returns the record's position and the segment it sealed, if any.
func (t *Tx) appendRecord(streamID, limit uint64, ageMs int64, body []byte, refBytes uint64, appendMs int64) (pos uint64, sealed *SegmentRecord, err error) {
	h, sealed, err := t.beforeAppend(streamID, limit, ageMs, uint64(segment.FrameBytes+len(body))+refBytes, appendMs)
	if err != nil {
		return 0, nil, err
	}
	pos, err = t.writeRecord(streamID, h, body, appendMs)
	return pos, sealed, err
}

// beforeAppend returns the stream's head ready for an append of size bytes
// (its frame, and the batch a ref names): the active segment sealed first
// when the append would take it past limit or it began ageMs or more
// before appendMs.
func (t *Tx) beforeAppend(streamID, limit uint64, ageMs int64, size uint64, appendMs int64) (h *streamHead, sealed *SegmentRecord, err error) {
	if t.segs == nil {
		return nil, nil, errors.New("store: appending data on a read-only transaction")
	}
	if h, err = t.head(streamID); err != nil {
		return nil, nil, err
	}
	if h.End > h.ActiveBase && (h.activeBytes()+size > limit || appendMs-h.ActiveSinceMs >= ageMs) {
		if sealed, err = t.seal(streamID, h); err != nil {
			return nil, nil, err
		}
	}
	if h.End == h.ActiveBase {
		h.ActiveSinceMs = appendMs
	}
	return h, sealed, nil
}

// writeRecord appends body to the stream whose head is h.
func (t *Tx) writeRecord(streamID uint64, h *streamHead, body []byte, appendMs int64) (uint64, error) {
	pos, err := t.segs.Stream(streamID).Append(body)
	if err != nil {
		return 0, err
	}
	if pos != h.End {
		return 0, fmt.Errorf("store: stream %d appends at %d, its head says %d", streamID, pos, h.End)
	}
	h.End += uint64(segment.FrameBytes + len(body))
	h.LastAppendMs = appendMs
	t.noteAppend(streamID, body)
	return pos, nil
}

// seal closes a stream's non-empty active segment: it files the segment's
// record and starts the next segment at the stream's end.
func (t *Tx) seal(streamID uint64, h *streamHead) (*SegmentRecord, error) {
	if err := t.segs.Stream(streamID).Roll(); err != nil {
		return nil, err
	}
	sealed := &SegmentRecord{QueueID: streamID, Base: h.ActiveBase, End: h.End, LastAppendMs: h.LastAppendMs}
	if h.RefBytes > 0 {
		sealed.Refs, sealed.MinRef = h.ActiveRefs, h.ActiveMinRef
		sealed.RefBytes, sealed.RefEnd = h.RefBytes-h.BaseRefBytes, h.RefBytes
	}
	if err := t.set(segmentKey(streamID, sealed.Base), sealed.encode()); err != nil {
		return nil, err
	}
	h.ActiveBase, h.BaseRefBytes, h.ActiveRefs, h.ActiveMinRef = h.End, h.RefBytes, 0, 0
	h.dirty = true
	return sealed, nil
}

// readPointed reads the entry a pointer names.
func (t *Tx) readPointed(partitionID, offset uint64, p pointer) (Entry, error) {
	if t.segs == nil {
		return Entry{}, errors.New("store: no segment directory")
	}
	body, err := t.segs.Stream(p.stream).Read(p.pos, p.length)
	if err != nil {
		return Entry{}, fmt.Errorf("partition %d offset %d: %w", partitionID, offset, err)
	}
	if len(body) < 16 || beUint64(body) != partitionID || beUint64(body[8:]) != offset {
		return Entry{}, fmt.Errorf("partition %d offset %d: %w: the record names another place", partitionID, offset, segment.ErrCorrupt)
	}
	if d, ok, err := refOf(body); err != nil || ok {
		if err != nil {
			return Entry{}, fmt.Errorf("partition %d offset %d: %w", partitionID, offset, err)
		}
		e, err := t.readRef(p.stream, p.pos, offset, d)
		if err != nil {
			return Entry{}, fmt.Errorf("partition %d offset %d: %w", partitionID, offset, err)
		}
		return e, nil
	}
	return decodeEntry(offset, body[16:])
}

// flushStreams writes the buffered appends of the streams this transaction
// touched to their files and their heads to the transaction, just before
// it commits.
func (t *Tx) flushStreams() error {
	ids := make([]uint64, 0, len(t.heads))
	for id := range t.heads {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		h := t.heads[id]
		if h.End == h.committedEnd && !h.dirty {
			continue // nothing appended
		}
		if err := t.segs.Stream(id).Flush(); err != nil {
			return err
		}
		if err := t.set(streamKey(id), h.encode()); err != nil {
			return err
		}
	}
	return nil
}

// unwindStreams cuts the streams this transaction appended to back to their
// committed ends, when it is discarded without a commit.
func (t *Tx) unwindStreams() {
	for id, h := range t.heads {
		if h.End != h.committedEnd {
			t.segs.Stream(id).Truncate(h.committedEnd)
		}
	}
	t.heads = nil
}

// eachStreamHead calls fn with every stream's committed head, in id order.
func (t *Tx) eachStreamHead(fn func(id uint64, h streamHead) error) error {
	return t.scan([]byte{familyStream}, nil, func(k, v []byte) (bool, error) {
		h, err := decodeStreamHead(v)
		if err != nil || len(k) != 9 {
			return false, fmt.Errorf("stream head %x: %w", k, errBadRecord)
		}
		return true, fn(beUint64(k[1:]), h)
	})
}

// recoverStreams cuts every stream back to its committed end and removes
// the streams no head names (a queue whose clean-up finished, or appends
// never committed). It runs when the store opens.
func (s *Store) recoverStreams() error {
	heads := map[uint64]streamHead{}
	err := s.View(func(tx *Tx) error {
		return tx.eachStreamHead(func(id uint64, h streamHead) error {
			heads[id] = h
			return nil
		})
	})
	if err != nil {
		return err
	}
	ids, err := s.segs.IDs()
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, ok := heads[id]; !ok {
			if err := s.segs.Remove(id); err != nil {
				return err
			}
		}
	}
	s.behind = nil
	for id, h := range heads {
		stream := s.segs.Stream(id)
		if end, err := stream.End(); err != nil {
			return err
		} else if end < h.End {
			s.behind = fmt.Errorf("queue %d's message data ends at %d, its index at %d (a crash before the data reached the disk)", id, end, h.End)
			continue
		}
		if err := stream.Truncate(h.End); err != nil {
			return fmt.Errorf("recover queue %d's messages: %w", id, err)
		}
		segs, err := stream.Segments()
		if err != nil {
			return err
		}
		if len(segs) > 0 && segs[len(segs)-1].Base < h.ActiveBase {
			if err := stream.Roll(); err != nil {
				return err
			}
		}
	}
	return nil
}

// DataBehind reports a segment stream found shorter than its committed
// index when the store opened: the store must be rebuilt from a snapshot
// and the raft log before it serves.
func (s *Store) DataBehind() error { return s.behind }

// Reset empties the store: every key and segment file.
func (s *Store) Reset() error {
	s.forgetPruneFloor()
	s.filters.forget() // its keys are about to be replaced
	defer s.filters.rebuild()
	defer s.refs.forget()
	s.setCatalog(newCatalog(nil)) // before the keys go: no reader pairs old records with an empty store
	defer s.aclGen.n.Add(1)
	if err := s.db.DropAll(); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	if err := s.segs.Retain(nil); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	s.dedup.wait()
	s.dedup.reset()
	s.dedup.files.clear()
	s.behind = nil
	return nil
}

// StreamBytes returns how many bytes of a queue's stream are kept on disk:
// from the start of its oldest sealed segment still present (or of its
// active segment, when none is) to its committed end, with the batches
// its refs keep in the raft log. It reads the head
// and one segment record, however large the queue.
func (t *Tx) StreamBytes(queueID uint64) (uint64, error) {
	h, err := t.head(queueID)
	if err != nil {
		return 0, err
	}
	first, firstRefs := h.ActiveBase, h.BaseRefBytes
	err = t.scan(segmentPrefix(queueID), nil, func(k, v []byte) (bool, error) {
		sr, err := decodeSegmentRecord(k, v)
		if err != nil {
			return false, err
		}
		if sr.Base < first {
			first, firstRefs = sr.Base, sr.RefEnd-sr.RefBytes
		}
		return false, nil
	})
	if err != nil || h.End < first {
		return 0, err
	}
	return h.End - first + h.RefBytes - firstRefs, nil
}
