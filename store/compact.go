package store

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/dgraph-io/badger/v4"

	"github.com/waggle-mq/waggle/recordbatch"
)

// Log compaction (Kafka's cleanup.policy=compact): in a compacted queue
// only the newest record of each key survives, once it lies in the
// cleanable part of the stream. Compaction runs in passes, each over a
// cut: a stream position at the end of a sealed segment, chosen by the
// leader (the newest sealed segment whose last append is older than
// min.compaction.lag.ms, or the active segment, sealed by the pass's first
// entry once it is segment.ms old) and checked by the entry. A pass has
// two phases, each going over the queue's partitions in name order, in
// entries that each do bounded work (CompactLimits):
//
//  1. index: each partition's records, oldest first, from where the last
//     pass stopped up to the first entry at or after the cut, go into a
//     replicated index of (partition, SHA-256 of the key) -> the newest
//     offset of that key. The index holds one key per live key, not per
//     record, and is never held in memory.
//  2. clean: every entry of the partition below the indexed point is
//     filtered: a record whose key's index names a newer offset goes, and
//     a tombstone (null value) goes once delete.retention.ms has passed
//     since a pass first found it the newest of its key (its index entry
//     goes with it). Entries that lie before the cut are copied to the
//     stream's end (filtered or not), so nothing points before the cut;
//     entries after it are rewritten there only when a record went. Batches
//     keep their first offset and last offset delta; control batches and
//     HTTP messages are copied as they are. A batch left empty is dropped,
//     unless it holds the partition's last offset (kept empty, as Kafka
//     keeps the last batch).
//
// When the last partition is cleaned the pass files a trim at the cut
// (TombstoneTrim): clean-up entries then drop the segments before it,
// reclaiming the space of what compaction removed. Every decision reads
// replicated state and the entry only, so every replica compacts alike.
//
//	familyCompactState   [0x30] queueID(8)                        -> CompactState (JSON, versioned)
//	familyCompactIndexed [0x31] queueID(8) partitionID(8)         -> offset(8): records below are indexed
//	familyKeyIndex       [0x32] queueID(8) partitionID(8) sha256(key)[:16] -> offset(8) tombstoneSeenMs(8)
const (
	familyCompactState   byte = 0x30
	familyCompactIndexed byte = 0x31
	familyKeyIndex       byte = 0x32
)

// Cleanup policies (Queue.CleanupPolicy).
const (
	PolicyDelete        = 1
	PolicyCompact       = 2
	PolicyCompactDelete = 3
)

// Compaction defaults, as Kafka's.
const (
	DefaultDeleteRetentionMs    = 86_400_000
	DefaultMinCleanableDirtyPPM = 500_000
)

// Compacts reports whether the queue's cleanup policy compacts.
func (q Queue) Compacts() bool {
	return q.CleanupPolicy == PolicyCompact || q.CleanupPolicy == PolicyCompactDelete
}

// Deletes reports whether the queue's cleanup policy drops old segments
// by time and size (delete, the default, or compact,delete).
func (q Queue) Deletes() bool { return q.CleanupPolicy != PolicyCompact }

// DeleteRetention is the queue's delete.retention.ms in force.
func (q Queue) DeleteRetention() int64 {
	switch {
	case q.DeleteRetentionMs > 0:
		return q.DeleteRetentionMs
	case q.DeleteRetentionMs < 0:
		return 0
	}
	return DefaultDeleteRetentionMs
}

// MinCleanableDirtyRatio is the queue's min.cleanable.dirty.ratio in force,
// in millionths.
func (q Queue) MinCleanableDirtyRatio() int64 {
	switch {
	case q.MinCleanableDirtyPPM > 0:
		return q.MinCleanableDirtyPPM
	case q.MinCleanableDirtyPPM < 0:
		return 0
	}
	return DefaultMinCleanableDirtyPPM
}

// CompactState is a compacted queue's pass in progress and the last one
// finished.
type CompactState struct {
	Active bool `json:"active,omitempty"`
	// Phase: 0 index, 1 clean.
	Phase int    `json:"phase,omitempty"`
	Cut   uint64 `json:"cut,omitempty"`
	// PartNext seeks the next partition key to work on; Next is the offset
	// to resume the clean phase at within it.
	PartNext  []byte `json:"partNext,omitempty"`
	Next      uint64 `json:"next,omitempty"`
	StartedMs int64  `json:"startedMs,omitempty"`
	Moved     uint64 `json:"moved,omitempty"`
	Dropped   uint64 `json:"dropped,omitempty"`
	// TombstoneDueMs: the earliest time a tombstone kept by this pass may go.
	TombstoneDueMs int64 `json:"tombstoneDueMs,omitempty"`

	LastCut            uint64 `json:"lastCut,omitempty"`
	LastMoved          uint64 `json:"lastMoved,omitempty"`
	LastDoneMs         int64  `json:"lastDoneMs,omitempty"`
	LastTombstoneDueMs int64  `json:"lastTombstoneDueMs,omitempty"`
	Passes             uint64 `json:"passes,omitempty"`
	// DroppedTotal counts the records compaction removed, over all passes.
	DroppedTotal uint64 `json:"droppedTotal,omitempty"`
}

func compactStateKey(queueID uint64) []byte { return appendUint64([]byte{familyCompactState}, queueID) }

func compactIndexedKey(queueID, partitionID uint64) []byte {
	return appendUint64(appendUint64([]byte{familyCompactIndexed}, queueID), partitionID)
}

func keyIndexKey(queueID, partitionID uint64, key []byte) []byte {
	sum := sha256.Sum256(key)
	return append(appendUint64(appendUint64([]byte{familyKeyIndex}, queueID), partitionID), sum[:16]...)
}

// CompactState returns the queue's compaction state (zero when it never
// compacted).
func (t *Tx) CompactState(queueID uint64) (CompactState, error) {
	b, err := t.get(compactStateKey(queueID))
	if errors.Is(err, ErrNotFound) {
		return CompactState{}, nil
	}
	if err != nil {
		return CompactState{}, err
	}
	return decodeJSONRecord[CompactState](b)
}

// CompactLimits bound one compaction entry: records looked at, index
// entries read, keys written and bytes of entries read.
type CompactLimits struct {
	MaxRecords, MaxEntries, MaxWrites, MaxBytes int
}

// CompactProposal is the leader's cut for a new pass: the end of the
// sealed segment at CutBase, or with Seal the active segment, sealed first.
type CompactProposal struct {
	Cut, CutBase uint64
	Seal         bool
}

// CompactOutcome says what one compaction entry did.
type CompactOutcome struct {
	Started  bool `json:"started,omitempty"`
	Stale    bool `json:"stale,omitempty"` // a proposal that no longer holds: nothing done
	Finished bool `json:"finished,omitempty"`
	More     bool `json:"more,omitempty"` // the pass goes on
	Indexed  int  `json:"indexed,omitempty"`
	Dropped  int  `json:"dropped,omitempty"`
	Moved    int  `json:"moved,omitempty"`
	// SeqUsed: the pass finished and filed its trim under the seq given.
	SeqUsed bool `json:"seqUsed,omitempty"`
}

// compactBudget counts one entry's work against its limits.
type compactBudget struct {
	CompactLimits
	records, entries, writes, bytes int
}

func (b *compactBudget) spent() bool {
	return b.records >= b.MaxRecords || b.entries >= b.MaxEntries || b.writes >= b.MaxWrites || b.bytes >= b.MaxBytes
}

// maxCompactDecompressed bounds what compaction decompresses of one batch;
// a batch past it is kept whole (on every replica alike).
const maxCompactDecompressed = 32 << 20

// Compact runs one compaction entry on queue q at replicated time nowMs:
// with no pass in progress it starts one from prop (or answers Stale),
// then works within lim. seq is a fresh id for the trim a finishing pass
// files (SeqUsed says it was taken).
func (t *Tx) Compact(q Queue, nowMs int64, prop CompactProposal, lim CompactLimits, seq uint64) (CompactOutcome, error) {
	var out CompactOutcome
	st, err := t.CompactState(q.ID)
	if err != nil {
		return out, err
	}
	if !q.Compacts() {
		if st.Active { // the policy changed mid-pass: give the pass up
			st.Active = false
			return out, t.set(compactStateKey(q.ID), encodeJSONRecord(st))
		}
		return CompactOutcome{Stale: true}, nil
	}
	if !st.Active {
		cut, ok, err := t.compactCut(q, nowMs, prop)
		if err != nil || !ok {
			return CompactOutcome{Stale: true}, err
		}
		st = CompactState{Active: true, Cut: cut, StartedMs: nowMs, LastCut: st.LastCut, LastMoved: st.LastMoved,
			LastDoneMs: st.LastDoneMs, LastTombstoneDueMs: st.LastTombstoneDueMs, Passes: st.Passes, DroppedTotal: st.DroppedTotal}
		out.Started = true
		if !q.CompactedLayout {
			q.CompactedLayout = true
			if err := t.PutQueue(q); err != nil {
				return out, err
			}
		}
	}
	b := &compactBudget{CompactLimits: lim}
	for !b.spent() {
		var part Partition
		found := false
		if err := t.scan(partitionPrefix(q.ID), st.PartNext, func(k, v []byte) (bool, error) {
			if len(v) != 8 {
				return false, errBadRecord
			}
			var err error
			part, err = t.partitionByID(beUint64(v))
			found = err == nil
			st.PartNext = append(append([]byte(nil), k...), 0)
			return false, err
		}); err != nil {
			return out, err
		}
		b.entries++
		if !found {
			if st.Phase == 0 {
				st.Phase, st.PartNext, st.Next = 1, nil, 0
				continue
			}
			if err := t.putTombstone(Tombstone{Seq: seq, Kind: TombstoneTrim, QueueID: q.ID, Pos: st.Cut}); err != nil {
				return out, err
			}
			out.SeqUsed, out.Finished = true, true
			st = CompactState{LastCut: st.Cut, LastMoved: st.Moved, LastDoneMs: nowMs, LastTombstoneDueMs: st.TombstoneDueMs,
				Passes: st.Passes + 1, DroppedTotal: st.DroppedTotal + st.Dropped}
			break
		}
		var done bool
		if st.Phase == 0 {
			done, err = t.indexPartition(q, part, &st, b, &out)
		} else {
			done, err = t.cleanPartition(q, part, &st, nowMs, b, &out)
		}
		if err != nil {
			return out, err
		}
		if !done {
			// Come back to this partition: PartNext seeks its own key.
			st.PartNext = st.PartNext[:len(st.PartNext)-1]
			break
		}
		st.Next = 0
	}
	out.More = st.Active
	return out, t.set(compactStateKey(q.ID), encodeJSONRecord(st))
}

// ConfigMaxCompactionLagMs is Kafka's max.compaction.lag.ms, kept in
// Queue.Configs.
const ConfigMaxCompactionLagMs = "max.compaction.lag.ms"

// CompactionSealAgeMs is the age at which a compaction pass may seal a
// compacted queue's active segment: segment.ms, or max.compaction.lag.ms
// when that is set and shorter (a config of log format 8, so a queue
// applied by an older binary never has it).
func CompactionSealAgeMs(q Queue) int64 {
	_, ageMs := SegmentLimits(q)
	if maxLag, ok := q.Config(ConfigMaxCompactionLagMs); ok {
		ageMs = min(ageMs, maxLag)
	}
	return ageMs
}

// compactCut checks the leader's proposal for a new pass and returns its
// cut; with Seal it seals the active segment first.
func (t *Tx) compactCut(q Queue, nowMs int64, prop CompactProposal) (uint64, bool, error) {
	h, err := t.head(q.ID)
	if err != nil {
		return 0, false, err
	}
	lag := max(q.MinCompactionLagMs, 0)
	openPos, err := t.openTxnPos(q.ID)
	if err != nil {
		return 0, false, err
	}
	if prop.Seal {
		ageMs := CompactionSealAgeMs(q)
		if h.End == h.ActiveBase || nowMs-h.ActiveSinceMs < ageMs || nowMs-h.LastAppendMs < lag || openPos < h.End {
			return 0, false, nil
		}
		if err := t.sealActive(q.ID, h); err != nil {
			return 0, false, err
		}
		return h.ActiveBase, true, nil
	}
	v, err := t.get(segmentKey(q.ID, prop.CutBase))
	if errors.Is(err, ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	sr, err := decodeSegmentRecord(segmentKey(q.ID, prop.CutBase), v)
	if err != nil {
		return 0, false, err
	}
	if sr.End != prop.Cut || sr.LastAppendMs > nowMs-lag || openPos < sr.End {
		return 0, false, nil
	}
	return sr.End, true, nil
}

// openTxnPos is the stream position of the first record of the oldest Kafka
// transaction still open in the queue (math.MaxUint64: none). A pass never
// cuts past it, so everything it cleans is decided: committed, aborted or
// not transactional (Kafka's cleaner stops at the last stable offset too).
// An open transaction whose first record is inline in the index holds
// every cut back.
func (t *Tx) openTxnPos(queueID uint64) (uint64, error) {
	pos := uint64(math.MaxUint64)
	err := t.scan(partitionPrefix(queueID), nil, func(_, v []byte) (bool, error) {
		if len(v) != 8 {
			return false, errBadRecord
		}
		pid := beUint64(v)
		open, err := t.OpenTxns(pid, maxOpenTxnScan)
		if err != nil {
			return false, err
		}
		for _, o := range open {
			es, err := t.entries(pid, o.FirstOffset, math.MaxInt, 1, false)
			if err != nil {
				return false, err
			}
			if len(es) > 0 && es[0].ptr != nil {
				pos = min(pos, es[0].ptr.pos)
			} else {
				pos = 0
			}
		}
		return true, nil
	})
	return pos, err
}

// maxOpenTxnScan bounds the open transactions looked at per partition.
const maxOpenTxnScan = 10_000

// maxAbortedCheck bounds the aborted ranges one check looks at.
const maxAbortedCheck = 10_000

// txnAborted reports whether offset off of producerID's transactional batch
// on a partition belongs to an aborted transaction; certain is false when
// the check gave up (too many aborted ranges to look at). The producer's
// first range whose marker is at or after off is its transaction's if that
// one aborted: a producer has one transaction open at a time.
func (t *Tx) txnAborted(partitionID uint64, producerID int64, off uint64) (aborted, certain bool, err error) {
	seen := 0
	certain = true
	seek := binary.BigEndian.AppendUint64(abortedTxnPrefix(partitionID), off)
	err = t.scan(abortedTxnPrefix(partitionID), seek, func(k, v []byte) (bool, error) {
		if len(k) != 25 || len(v) != 8 {
			return false, errBadRecord
		}
		if int64(beUint64(k[17:])) == producerID {
			aborted = beUint64(v) <= off
			return false, nil
		}
		if seen++; seen >= maxAbortedCheck {
			certain = false
			return false, nil
		}
		return true, nil
	})
	return aborted, certain, err
}

// sealActive seals a stream's active segment where it ends, as an append
// past its limits would.
func (t *Tx) sealActive(queueID uint64, h *streamHead) error {
	if t.segs == nil {
		return errors.New("store: sealing on a read-only transaction")
	}
	_, err := t.seal(queueID, h)
	return err
}

func (t *Tx) indexedTo(queueID, partitionID uint64) (uint64, error) {
	b, err := t.get(compactIndexedKey(queueID, partitionID))
	switch {
	case errors.Is(err, ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	case len(b) != 8:
		return 0, errBadRecord
	}
	return beUint64(b), nil
}

// entryBody reads an index entry's whole body (an inline one has it).
func (t *Tx) entryBody(partitionID uint64, e Entry) (Entry, error) {
	if e.ptr == nil {
		return e, nil
	}
	full, err := t.readPointed(partitionID, e.Offset, *e.ptr)
	full.ptr = e.ptr
	return full, err
}

// indexPartition indexes a partition's records from where the last pass
// stopped up to the first entry at or after the cut, and reports whether
// it got there.
func (t *Tx) indexPartition(q Queue, part Partition, st *CompactState, b *compactBudget, out *CompactOutcome) (bool, error) {
	from, err := t.indexedTo(q.ID, part.ID)
	if err != nil {
		return false, err
	}
	from = max(from, part.StartOffset)
	start := from
	for !b.spent() {
		want := min(b.MaxEntries-b.entries, 1000)
		es, err := t.entries(part.ID, from, math.MaxInt, want, false)
		if err != nil {
			return false, err
		}
		done := len(es) < want
		for _, e := range es {
			if (e.ptr != nil && e.ptr.pos >= st.Cut) || b.spent() {
				done = e.ptr != nil && e.ptr.pos >= st.Cut
				break
			}
			b.entries++
			b.bytes += e.Size()
			full, err := t.entryBody(part.ID, e)
			if err != nil {
				return false, err
			}
			next := e.Offset + uint64(e.Count)
			// An aborted transaction's records are never the newest of
			// their key: indexed, one would make its key's committed value
			// go. One not known for sure to be committed is left out too
			// (the clean phase keeps transactional records it has no index
			// entry for).
			index := full.Batch != nil && !recordbatch.IsControl(full.Batch)
			if h, ok := recordbatch.ReadHeader(full.Batch); index && ok && h.Transactional {
				aborted, certain, err := t.txnAborted(part.ID, h.ProducerID, e.Offset)
				if err != nil {
					return false, err
				}
				index = certain && !aborted
			}
			if index {
				stopped := false
				var ierr error
				_, _, _, ferr := recordbatch.Filter(full.Batch, maxCompactDecompressed, func(r recordbatch.KeyedRecord) bool {
					off := uint64(r.Offset)
					if off < from || off >= e.Offset+uint64(e.Count) || stopped || ierr != nil {
						return true // an offset delta outside the batch is never indexed
					}
					if b.records >= b.MaxRecords || b.writes >= b.MaxWrites {
						stopped, next = true, off
						return true
					}
					b.records++
					if r.Key != nil {
						b.writes++
						out.Indexed++
						ierr = t.set(keyIndexKey(q.ID, part.ID, r.Key), binary.BigEndian.AppendUint64(appendUint64(nil, off), 0))
					}
					return true
				})
				if ierr != nil {
					return false, ierr
				}
				_ = ferr // a batch that does not decode keeps all its records
			}
			from = next
			if next < e.Offset+uint64(e.Count) {
				done = false
				break
			}
		}
		if from != start {
			b.writes++
			if err := t.set(compactIndexedKey(q.ID, part.ID), appendUint64(nil, from)); err != nil {
				return false, err
			}
			start = from
		}
		if done {
			return true, nil
		}
		if len(es) == 0 {
			return true, nil
		}
	}
	return false, nil
}

// keyIndexValue is a key's newest indexed offset and when a pass first
// found it a tombstone that survived (0: not one, or not yet).
type keyIndexValue struct {
	offset uint64
	seenMs int64
}

func (t *Tx) keyIndex(k []byte) (keyIndexValue, bool, error) {
	v, err := t.get(k)
	switch {
	case errors.Is(err, ErrNotFound):
		return keyIndexValue{}, false, nil
	case err != nil:
		return keyIndexValue{}, false, err
	case len(v) != 16:
		return keyIndexValue{}, false, errBadRecord
	}
	return keyIndexValue{offset: beUint64(v), seenMs: int64(beUint64(v[8:]))}, true, nil
}

// cleanPartition filters the partition's indexed entries from st.Next on
// (see the package comment above) and reports whether it reached the end
// of them; st.Next is where to resume.
func (t *Tx) cleanPartition(q Queue, part Partition, st *CompactState, nowMs int64, b *compactBudget, out *CompactOutcome) (bool, error) {
	indexed, err := t.indexedTo(q.ID, part.ID)
	if err != nil {
		return false, err
	}
	retention := q.DeleteRetention()
	for !b.spent() {
		want := min(b.MaxEntries-b.entries, 1000)
		es, err := t.entries(part.ID, st.Next, math.MaxInt, want, false)
		if err != nil {
			return false, err
		}
		if len(es) == 0 {
			return true, nil
		}
		for _, e := range es {
			if e.Offset >= indexed {
				return true, nil
			}
			if b.spent() {
				return false, nil
			}
			b.entries++
			end := e.Offset + uint64(e.Count)
			below := e.ptr == nil || e.ptr.pos < st.Cut
			if end <= part.StartOffset { // below the log start: unreadable already
				if below {
					b.writes++
					if err := t.del(messageKey(part.ID, e.Offset)); err != nil {
						return false, err
					}
				}
				st.Next = end
				continue
			}
			b.bytes += e.Size()
			full, err := t.entryBody(part.ID, e)
			if err != nil {
				return false, err
			}
			switch {
			case full.Message != nil || full.Messages != nil || recordbatch.IsControl(full.Batch):
				if below {
					if err := t.moveEntry(q, part.ID, full, full.Batch, nowMs, b, st, out); err != nil {
						return false, err
					}
				}
			default:
				var ierr error
				h, _ := recordbatch.ReadHeader(full.Batch)
				raw, kept, changed, ferr := recordbatch.Filter(full.Batch, maxCompactDecompressed, func(r recordbatch.KeyedRecord) bool {
					if r.Key == nil || ierr != nil || uint64(r.Offset) < e.Offset || uint64(r.Offset) >= end {
						return true // no key, or an offset delta outside the batch: kept
					}
					b.records++
					k := keyIndexKey(q.ID, part.ID, r.Key)
					iv, found, err := t.keyIndex(k)
					if err != nil {
						ierr = err
						return true
					}
					if !found && h.Transactional {
						return true // not indexed: maybe aborted, maybe not known to be committed
					}
					if !found || iv.offset > uint64(r.Offset) {
						return false // a newer record of the key exists (or a newer tombstone went)
					}
					if !r.Tombstone {
						return true
					}
					switch {
					case iv.seenMs == 0:
						b.writes++
						ierr = t.set(k, binary.BigEndian.AppendUint64(appendUint64(nil, iv.offset), uint64(nowMs)))
						st.TombstoneDueMs = minDue(st.TombstoneDueMs, nowMs+retention)
						return true
					case nowMs-iv.seenMs >= retention:
						b.writes++
						ierr = t.del(k)
						return false
					}
					st.TombstoneDueMs = minDue(st.TombstoneDueMs, iv.seenMs+retention)
					return true
				})
				if ierr != nil {
					return false, ierr
				}
				if ferr != nil { // does not decode: kept whole
					raw, changed = full.Batch, false
				}
				if changed {
					n := int(recordbatch.NumRecords(full.Batch)) - kept
					out.Dropped += n
					st.Dropped += uint64(n)
				}
				switch {
				case changed && kept == 0 && end < part.NextOffset:
					b.writes++
					if err := t.del(messageKey(part.ID, e.Offset)); err != nil {
						return false, err
					}
				case changed || below:
					if err := t.moveEntry(q, part.ID, full, raw, nowMs, b, st, out); err != nil {
						return false, err
					}
				}
			}
			st.Next = end
		}
	}
	return false, nil
}

func minDue(cur, due int64) int64 {
	if cur == 0 || due < cur {
		return due
	}
	return cur
}

// moveEntry writes an entry again at the stream's end (raw: the batch to
// write, when it is one) and points its key there.
func (t *Tx) moveEntry(q Queue, partitionID uint64, e Entry, raw []byte, nowMs int64, b *compactBudget, st *CompactState, out *CompactOutcome) error {
	var body []byte
	switch {
	case e.Message != nil:
		body = e.Message.appendTo(recordBody(partitionID, e.Offset, e.Message.encodedSize()))
	case e.Messages != nil:
		body = appendMessageBatch(recordBody(partitionID, e.Offset, messageBatchSize(e.Messages)), e.Messages)
	default:
		body = appendBatch(recordBody(partitionID, e.Offset, 21+len(raw)), e.Count, e.MaxTimestampMs, e.AppendSeq, raw)
	}
	b.writes += 2 // the pointer, and now and then a sealed segment's record
	b.bytes += len(body)
	st.Moved += uint64(len(body) + 8)
	out.Moved++
	if err := t.appendData(q, partitionID, e.Offset, body, e.Count, e.MaxTimestampMs, e.AppendSeq, nowMs); err != nil {
		return fmt.Errorf("compact partition %d offset %d: %w", partitionID, e.Offset, err)
	}
	return nil
}

// CompactionCandidate is what the leader needs to decide on a pass: the
// state, the stream's head, where its oldest data begins and the newest
// sealed segment whose last append is at or before cleanableMs.
type CompactionCandidate struct {
	State                       CompactState
	End, ActiveBase, First      uint64
	ActiveSinceMs, LastAppendMs int64
	SealedCut, SealedBase       uint64
	SealedFound                 bool
}

// CompactionCandidate reads a queue's compaction picture (a bounded read:
// the head, the oldest segment and a reverse walk over sealed segments
// newer than cleanableMs, at most 1,000).
func (t *Tx) CompactionCandidate(queueID uint64, cleanableMs int64) (CompactionCandidate, error) {
	var c CompactionCandidate
	var err error
	if c.State, err = t.CompactState(queueID); err != nil {
		return c, err
	}
	h, err := t.head(queueID)
	if err != nil {
		return c, err
	}
	c.End, c.ActiveBase, c.ActiveSinceMs, c.LastAppendMs = h.End, h.ActiveBase, h.ActiveSinceMs, h.LastAppendMs
	c.First = h.ActiveBase
	if err := t.scan(segmentPrefix(queueID), nil, func(k, v []byte) (bool, error) {
		sr, err := decodeSegmentRecord(k, v)
		c.First = sr.Base
		return false, err
	}); err != nil {
		return c, err
	}
	prefix := segmentPrefix(queueID)
	it := t.txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
	defer it.Close()
	n := 0
	for it.Seek(appendUint64(append([]byte(nil), prefix...), math.MaxUint64)); it.Valid() && n < 1000; it.Next() {
		n++
		v, err := it.Item().ValueCopy(nil)
		if err != nil {
			return c, err
		}
		sr, err := decodeSegmentRecord(it.Item().Key(), v)
		if err != nil {
			return c, err
		}
		if sr.LastAppendMs <= cleanableMs {
			c.SealedCut, c.SealedBase, c.SealedFound = sr.End, sr.Base, true
			break
		}
	}
	return c, nil
}

// compactionPhases sweep a deleted queue's compaction keys; they follow
// queuePhases (see there).
func compactionSweep(queueID uint64) [][]byte {
	return [][]byte{
		compactStateKey(queueID),
		appendUint64([]byte{familyCompactIndexed}, queueID),
		appendUint64([]byte{familyKeyIndex}, queueID),
	}
}
