package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/waggle-mq/waggle/dedup"
)

// Dedup logs (log format 4). The transactionIds an HTTP push stores are
// appended to a segment stream, not written as badger keys: one record per
// push entry and partition, in a stream shared by every queue with the
// same dedup window. Each id then costs its bytes once in a file that is
// written sequentially, instead of a key in the LSM (written to its log,
// then again by every compaction) and in every snapshot.
//
// One stream per window length makes expiry monotone along a stream: a
// record's ids expire at its append time plus the window, and appends come
// in replicated-time order. So pruning is dropping a stream's oldest
// sealed segments whose newest record has expired, a few badger deletes
// whatever the segment holds. A dedup stream's id is dedupStreamFlag with
// the window in milliseconds (queue ids count up from 1 and never come
// near it); its head and segment records are those of any stream (data.go),
// so snapshots, restores and recovery carry dedup logs as they carry
// message data.
//
// Lookups go through a node-local index of the logs (dedupindex.go).
//
// A record's body:
//
//	[0x01] partitionID(8) storedAtMs(8) firstOffset(8) count(4)
//	       count x ( messageID(16) uvarint(offset-firstOffset) uvarint(len) transactionId )
const dedupStreamFlag uint64 = 1 << 63

const dedupLogV1 byte = 1

// dedupLogHeader is the size of a record's fixed part.
const dedupLogHeader = 1 + 8 + 8 + 8 + 4

// Dedup segment limits. Segments are sealed by size or at a sixteenth of
// the window, so an expired id outlives its window by at most that and a
// window's ids span about sixteen segments however slow the stream.
const (
	dedupSegmentBytes = 32 << 20
	minDedupSegmentMs = 1000
)

// maxDedupLogRecord bounds one record's body: a push entry whose ids take
// more is written as several records.
const maxDedupLogRecord = 1 << 20

func dedupStreamID(windowMs int64) uint64 { return dedupStreamFlag | uint64(windowMs) }

func isDedupStream(id uint64) bool { return id&dedupStreamFlag != 0 }

func dedupStreamWindow(id uint64) int64 { return int64(id &^ dedupStreamFlag) }

func dedupSegmentMs(windowMs int64) int64 { return max(windowMs/16, minDedupSegmentMs) }

// dedupFingerprint is the index's 32-bit hash of a transactionId in a
// partition. It needs to be the same on every open of the store, not on
// every node: the index is rebuilt from the logs.
func dedupFingerprint(partitionID uint64, txID []byte) uint32 {
	h := xxhash.Sum64(txID) ^ partitionID*0x9e3779b97f4a7c15
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return uint32(h >> 32)
}

// dedupName is a transactionId in a partition.
type dedupName struct {
	partitionID uint64
	txID        string
}

// PutDedupLog records the transactionIds of the messages one push entry
// stored in a partition, whose queue's dedup window is windowMs (entries[i]
// is ids[i]'s record, all stored at one time): a record in the window's
// dedup log, no badger key but the log's head (log format 4).
func (t *Tx) PutDedupLog(partitionID uint64, windowMs int64, ids []string, entries []dedup.Entry) error {
	if t.store == nil {
		return errors.New("store: recording dedup ids on a read-only transaction")
	}
	stream := dedupStreamID(windowMs)
	for len(ids) > 0 {
		n, size := 0, dedupLogHeader
		for n < len(ids) && (n == 0 || size+24+len(ids[n]) <= maxDedupLogRecord) {
			size += 24 + len(ids[n])
			n++
		}
		body := encodeDedupLog(partitionID, ids[:n], entries[:n], size)
		pos, sealed, err := t.appendRecord(stream, dedupSegmentBytes, dedupSegmentMs(windowMs), body, 0, entries[0].StoredAtMs)
		if err != nil {
			return err
		}
		if sealed != nil {
			t.dedupEvents = append(t.dedupEvents, dedupEvent{kind: dedupSeal, stream: stream, base: sealed.Base, end: sealed.End})
		}
		fps := make([]uint32, n)
		if t.dedupNew == nil {
			t.dedupNew = map[dedupName]dedup.Entry{}
		}
		for i, id := range ids[:n] {
			fps[i] = dedupFingerprint(partitionID, []byte(id))
			t.dedupNew[dedupName{partitionID, id}] = entries[i]
		}
		t.dedupEvents = append(t.dedupEvents, dedupEvent{kind: dedupAdd, stream: stream, base: t.heads[stream].ActiveBase, pos: pos, fps: fps})
		ids, entries = ids[n:], entries[n:]
	}
	return nil
}

func encodeDedupLog(partitionID uint64, ids []string, entries []dedup.Entry, size int) []byte {
	first := entries[0].Offset
	b := make([]byte, 0, size)
	b = append(b, dedupLogV1)
	b = binary.BigEndian.AppendUint64(b, partitionID)
	b = binary.BigEndian.AppendUint64(b, uint64(entries[0].StoredAtMs))
	b = binary.BigEndian.AppendUint64(b, first)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for i, id := range ids {
		b = append(b, entries[i].MessageID[:]...)
		b = binary.AppendUvarint(b, entries[i].Offset-first)
		b = binary.AppendUvarint(b, uint64(len(id)))
		b = append(b, id...)
	}
	return b
}

// dedupLogRecord is a decoded record's fixed part; ids walks the rest.
type dedupLogRecord struct {
	partitionID uint64
	storedAtMs  int64
	firstOffset uint64
	count       uint32
	rest        []byte
}

func decodeDedupLog(body []byte) (dedupLogRecord, error) {
	if len(body) < dedupLogHeader || body[0] != dedupLogV1 {
		return dedupLogRecord{}, fmt.Errorf("dedup log: %w", errBadRecord)
	}
	return dedupLogRecord{
		partitionID: beUint64(body[1:]),
		storedAtMs:  int64(beUint64(body[9:])),
		firstOffset: beUint64(body[17:]),
		count:       binary.BigEndian.Uint32(body[25:]),
		rest:        body[dedupLogHeader:],
	}, nil
}

// ids calls fn with each id of the record, its message id and its offset,
// until fn returns false. txID is only valid during the call.
func (r dedupLogRecord) ids(fn func(txID []byte, messageID []byte, offset uint64) bool) error {
	b := r.rest
	for range r.count {
		if len(b) < 16 {
			return fmt.Errorf("dedup log: %w", errBadRecord)
		}
		msgID := b[:16]
		b = b[16:]
		delta, w := binary.Uvarint(b)
		if w <= 0 {
			return fmt.Errorf("dedup log: %w", errBadRecord)
		}
		b = b[w:]
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return fmt.Errorf("dedup log: %w", errBadRecord)
		}
		id := b[w : w+int(n)]
		b = b[w+int(n):]
		if !fn(id, msgID, r.firstOffset+delta) {
			return nil
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("dedup log: %w: %d bytes past the last id", errBadRecord, len(b))
	}
	return nil
}

// find returns txID's entry in the record, when the record is of the
// partition and holds it.
func (r dedupLogRecord) find(partitionID uint64, txID string, windowMs int64) (e dedup.Entry, found bool, err error) {
	if r.partitionID != partitionID {
		return dedup.Entry{}, false, nil
	}
	want := []byte(txID)
	err = r.ids(func(id, msgID []byte, offset uint64) bool {
		if !bytes.Equal(id, want) {
			return true
		}
		e = dedup.Entry{Offset: offset, StoredAtMs: r.storedAtMs, ExpiresAtMs: r.storedAtMs + windowMs}
		copy(e.MessageID[:], msgID)
		found = true
		return false
	})
	return e, found, err
}

// pruneDedupLogs drops up to limit segments of the dedup logs whose every
// id has expired by nowMs, oldest first, and reports how many it dropped.
// An active segment whose newest id has expired is sealed and dropped too,
// so a log that stopped growing empties. Each segment costs one badger
// delete however many ids it holds; its file goes once the commit stands.
func (t *Tx) pruneDedupLogs(nowMs int64, limit int) (int, error) {
	var streams []uint64
	err := t.scan([]byte{familyStream}, streamKey(dedupStreamFlag), func(k, _ []byte) (bool, error) {
		if len(k) != 9 {
			return false, fmt.Errorf("stream head %x: %w", k, errBadRecord)
		}
		streams = append(streams, beUint64(k[1:]))
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	// A log this transaction started has no head in badger until the
	// commit: without it, the prune would depend on where a replica cut
	// its batch of entries into transactions.
	for id := range t.heads {
		if isDedupStream(id) && !slices.Contains(streams, id) {
			streams = append(streams, id)
		}
	}
	slices.Sort(streams)
	dropped := 0
	for _, id := range streams {
		if dropped >= limit {
			break
		}
		windowMs := dedupStreamWindow(id)
		var to uint64
		sealedLeft := false
		err := t.scan(segmentPrefix(id), nil, func(k, v []byte) (bool, error) {
			sr, err := decodeSegmentRecord(k, v)
			if err != nil {
				return false, err
			}
			if sr.LastAppendMs+windowMs > nowMs || dropped >= limit {
				sealedLeft = true
				return false, nil
			}
			dropped++
			to = sr.End
			return true, t.del(bytes.Clone(k)) // k is the iterator's, reused
		})
		if err != nil {
			return dropped, err
		}
		h, err := t.head(id)
		if err != nil {
			return dropped, err
		}
		if !sealedLeft && dropped < limit && h.End > h.ActiveBase && h.LastAppendMs+windowMs <= nowMs {
			// Every id in the active segment has expired: seal it, and
			// drop it with the rest.
			if err := t.segs.Stream(id).Roll(); err != nil {
				return dropped, err
			}
			h.ActiveBase, h.dirty = h.End, true
			dropped++
			to = h.End
		}
		if to > 0 {
			t.dedupEvents = append(t.dedupEvents, dedupEvent{kind: dedupDrop, stream: id, pos: to})
			t.afterCommit = append(t.afterCommit, func() error { return t.segs.Stream(id).DropBefore(to) })
		}
	}
	return dropped, nil
}
