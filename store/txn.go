package store

import (
	"encoding/binary"
	"errors"

	"github.com/waggle-mq/waggle/dedup"
	"github.com/waggle-mq/waggle/recordbatch"
)

// Kafka transactions (KIP-98). A transactional producer's coordinator state
// is one record per transactional id; the per-partition facts a reader
// needs are kept under the partition's id, so a fetch finds them with one
// seek:
//
//	familyTxn        [0x18] transactionalID                    -> TxnState (JSON, versioned)
//	familyTxnProducer [0x19] producerID(8)                     -> transactionalID
//	familyOpenTxn    [0x1A] partitionID(8) producerID(8)       -> firstOffset(8)
//	familyAbortedTxn [0x1B] partitionID(8) lastOffset(8) producerID(8) -> firstOffset(8)
//	familyTxnGroup   [0x1C] len(group)(2) group transactionalID -> empty
//	familyTxnDue     [0x1D] deadlineMs(8) transactionalID       -> empty
//
// An open transaction's first offset on a partition bounds the last stable
// offset there; an aborted one is listed by the offset of its abort marker,
// so a read_committed fetch seeks to its own offset and reads on.
const (
	familyTxn         byte = 0x18
	familyTxnProducer byte = 0x19
	familyOpenTxn     byte = 0x1A
	familyAbortedTxn  byte = 0x1B
	familyTxnGroup    byte = 0x1C
	familyTxnDue      byte = 0x1D
)

// TxnStatus is where a transaction stands.
type TxnStatus string

// Transaction states. There are no "prepare" states: ending a transaction
// (markers, offsets, state) is one raft entry.
const (
	TxnEmpty          TxnStatus = "Empty"
	TxnOngoing        TxnStatus = "Ongoing"
	TxnCompleteCommit TxnStatus = "CompleteCommit"
	TxnCompleteAbort  TxnStatus = "CompleteAbort"
)

// TxnPartition is a partition a transaction writes to.
type TxnPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// TxnOffset is a consumer group offset staged by TxnOffsetCommit; it is
// committed with the transaction, or dropped with it.
type TxnOffset struct {
	Group       string `json:"group"`
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Offset      int64  `json:"offset"`
	LeaderEpoch int32  `json:"leaderEpoch"`
	Metadata    string `json:"metadata,omitempty"`
}

// TxnProducer is a producer id with an epoch.
type TxnProducer struct {
	ID    int64 `json:"id"`
	Epoch int16 `json:"epoch"`
}

// TxnState is a transactional id's replicated coordinator state.
type TxnState struct {
	TransactionalID string `json:"id"`
	ProducerID      int64  `json:"producerId"`
	Epoch           int16  `json:"epoch"`
	// Prev is the producer id and epoch before the last bump, so a retried
	// InitProducerId that names them is answered again (KIP-360).
	Prev *TxnProducer `json:"prev,omitempty"`
	// PrevEnded: the bump that left Prev ended a transaction (EndTxn of
	// transaction version 2), so an EndTxn retried from Prev is answered
	// again; any other bump (InitProducerId fencing a zombie, a timeout)
	// clears it, and the zombie stays fenced.
	PrevEnded bool      `json:"prevEnded,omitempty"`
	TimeoutMs int32     `json:"timeoutMs"`
	Status    TxnStatus `json:"status"`
	// StartMs is when the transaction in progress began (its first
	// partition or group); UpdatedMs the last change.
	StartMs    int64          `json:"startMs,omitempty"`
	UpdatedMs  int64          `json:"updatedMs"`
	Partitions []TxnPartition `json:"partitions,omitempty"`
	Groups     []string       `json:"groups,omitempty"`
	Offsets    []TxnOffset    `json:"offsets,omitempty"`
}

func txnKey(id string) []byte { return append([]byte{familyTxn}, id...) }

func txnProducerKey(producerID int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{familyTxnProducer}, uint64(producerID))
}

func openTxnKey(partitionID uint64, producerID int64) []byte {
	return binary.BigEndian.AppendUint64(openTxnPrefix(partitionID), uint64(producerID))
}

func openTxnPrefix(partitionID uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{familyOpenTxn}, partitionID)
}

func abortedTxnKey(partitionID, lastOffset uint64, producerID int64) []byte {
	k := binary.BigEndian.AppendUint64(abortedTxnPrefix(partitionID), lastOffset)
	return binary.BigEndian.AppendUint64(k, uint64(producerID))
}

func abortedTxnPrefix(partitionID uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{familyAbortedTxn}, partitionID)
}

func txnGroupPrefix(group string) []byte {
	k := binary.BigEndian.AppendUint16([]byte{familyTxnGroup}, uint16(len(group)))
	return append(k, group...)
}

// PutTxnGroup records that a transaction in progress may stage offsets of
// group; DeleteTxnGroup forgets it when the transaction ends.
func (t *Tx) PutTxnGroup(group, id string) error {
	return t.set(append(txnGroupPrefix(group), id...), nil)
}

// DeleteTxnGroup forgets a transaction's link to a group.
func (t *Tx) DeleteTxnGroup(group, id string) error {
	return t.del(append(txnGroupPrefix(group), id...))
}

// PendingTxnOffsets lists the offsets of group staged by transactions in
// progress (at most limit transactions looked at): a consumer that asks
// for stable offsets (KIP-447) waits until they are decided.
func (t *Tx) PendingTxnOffsets(group string, limit int) ([]TxnOffset, error) {
	prefix := txnGroupPrefix(group)
	var ids []string
	err := t.scan(prefix, nil, func(k, _ []byte) (bool, error) {
		ids = append(ids, string(k[len(prefix):]))
		return len(ids) < limit, nil
	})
	if err != nil {
		return nil, err
	}
	var out []TxnOffset
	for _, id := range ids {
		st, err := t.Txn(id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, o := range st.Offsets {
			if o.Group == group {
				out = append(out, o)
			}
		}
	}
	return out, nil
}

func txnDueKey(deadlineMs int64, id string) []byte {
	return append(binary.BigEndian.AppendUint64([]byte{familyTxnDue}, uint64(deadlineMs)), id...)
}

// PutTxnDue files a transaction in progress under the time its timeout
// passes; DeleteTxnDue takes it out when it ends.
func (t *Tx) PutTxnDue(deadlineMs int64, id string) error {
	return t.set(txnDueKey(deadlineMs, id), nil)
}

// DeleteTxnDue takes a transaction out of the timeout index.
func (t *Tx) DeleteTxnDue(deadlineMs int64, id string) error { return t.del(txnDueKey(deadlineMs, id)) }

// TxnsDue lists up to limit transactional ids whose transaction in
// progress timed out at or before nowMs, oldest deadline first.
func (t *Tx) TxnsDue(nowMs int64, limit int) ([]string, error) {
	var out []string
	err := t.scan([]byte{familyTxnDue}, nil, func(k, _ []byte) (bool, error) {
		if len(k) < 9 {
			return false, errBadRecord
		}
		if int64(beUint64(k[1:9])) > nowMs {
			return false, nil
		}
		out = append(out, string(k[9:]))
		return len(out) < limit, nil
	})
	return out, err
}

// Txn reads a transactional id's state, or ErrNotFound.
func (t *Tx) Txn(id string) (TxnState, error) {
	b, err := t.get(txnKey(id))
	if err != nil {
		return TxnState{}, err
	}
	return decodeJSONRecord[TxnState](b)
}

// PutTxn stores a transactional id's state and the producer id's way back
// to it. The id must be valid UTF-8 (the broker checks): the state is JSON,
// which would store another id in TransactionalID.
func (t *Tx) PutTxn(st TxnState) error {
	if err := t.set(txnKey(st.TransactionalID), encodeJSONRecord(st)); err != nil {
		return err
	}
	return t.set(txnProducerKey(st.ProducerID), []byte(st.TransactionalID))
}

// DeleteTxn forgets a transactional id: its state and its producer id's
// link to it.
func (t *Tx) DeleteTxn(st TxnState) error {
	if err := t.del(txnKey(st.TransactionalID)); err != nil {
		return err
	}
	return t.del(txnProducerKey(st.ProducerID))
}

// ForgetTxnProducer drops a producer id's link to its transactional id,
// when the id moved to a new producer id.
func (t *Tx) ForgetTxnProducer(producerID int64) error { return t.del(txnProducerKey(producerID)) }

// TxnOfProducer names the transactional id a producer id belongs to;
// found is false for a producer that is not transactional.
func (t *Tx) TxnOfProducer(producerID int64) (id string, found bool, err error) {
	b, err := t.get(txnProducerKey(producerID))
	if errors.Is(err, ErrNotFound) {
		return "", false, nil
	}
	return string(b), err == nil, err
}

// TxnsAfter lists up to limit transactional ids' states in id order, from
// the one after the named id ("": from the first).
func (t *Tx) TxnsAfter(after string, limit int) ([]TxnState, error) {
	var out []TxnState
	var seek []byte
	if after != "" {
		seek = append(txnKey(after), 0)
	}
	err := t.scan([]byte{familyTxn}, seek, func(_, v []byte) (bool, error) {
		st, err := decodeJSONRecord[TxnState](v)
		if err != nil {
			return false, err
		}
		out = append(out, st)
		return len(out) < limit, nil
	})
	return out, err
}

// OpenTxn reports the first offset a producer's open transaction wrote to
// a partition.
func (t *Tx) OpenTxn(partitionID uint64, producerID int64) (first uint64, found bool, err error) {
	b, err := t.get(openTxnKey(partitionID, producerID))
	if errors.Is(err, ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if len(b) != 8 {
		return 0, false, errBadRecord
	}
	return beUint64(b), true, nil
}

// PutOpenTxn records the first offset a producer's transaction wrote to a
// partition; DeleteOpenTxn forgets it when the transaction ends.
func (t *Tx) PutOpenTxn(partitionID uint64, producerID int64, first uint64) error {
	return t.set(openTxnKey(partitionID, producerID), binary.BigEndian.AppendUint64(nil, first))
}

// DeleteOpenTxn forgets a producer's open transaction on a partition.
func (t *Tx) DeleteOpenTxn(partitionID uint64, producerID int64) error {
	return t.del(openTxnKey(partitionID, producerID))
}

// OpenTxn is a transaction in progress on one partition.
type OpenTxn struct {
	ProducerID  int64
	FirstOffset uint64
}

// OpenTxns lists up to limit transactions in progress on a partition.
func (t *Tx) OpenTxns(partitionID uint64, limit int) ([]OpenTxn, error) {
	var out []OpenTxn
	err := t.scan(openTxnPrefix(partitionID), nil, func(k, v []byte) (bool, error) {
		if len(k) != 17 || len(v) != 8 {
			return false, errBadRecord
		}
		out = append(out, OpenTxn{ProducerID: int64(beUint64(k[9:])), FirstOffset: beUint64(v)})
		return len(out) < limit, nil
	})
	return out, err
}

// StableOffset is a partition's last stable offset: the first offset of its
// oldest open transaction, or next (its high watermark) when none is open.
// Everything below it is decided: committed, aborted or not transactional.
func (t *Tx) StableOffset(partitionID, next uint64) (uint64, error) {
	lso := next
	err := t.scan(openTxnPrefix(partitionID), nil, func(_, v []byte) (bool, error) {
		if len(v) != 8 {
			return false, errBadRecord
		}
		lso = min(lso, beUint64(v))
		return true, nil
	})
	return lso, err
}

// AbortedTxn is an aborted transaction's range on one partition: from its
// first record to its abort marker.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset uint64
	LastOffset  uint64
}

// PutAbortedTxn records an aborted transaction's range on a partition.
func (t *Tx) PutAbortedTxn(partitionID uint64, a AbortedTxn) error {
	return t.set(abortedTxnKey(partitionID, a.LastOffset, a.ProducerID), binary.BigEndian.AppendUint64(nil, a.FirstOffset))
}

// PruneAbortedTxns forgets up to limit aborted ranges of a partition that
// end below its log start (nobody can read their records any more) and
// reports how many it removed. Called with every new abort, it keeps the
// index from growing with ranges retention or DeleteRecords left behind.
func (t *Tx) PruneAbortedTxns(partitionID, logStart uint64, limit int) (int, error) {
	var stale [][]byte
	err := t.scan(abortedTxnPrefix(partitionID), nil, func(k, _ []byte) (bool, error) {
		if len(k) != 25 || beUint64(k[9:]) >= logStart {
			return false, nil
		}
		stale = append(stale, append([]byte(nil), k...))
		return len(stale) < limit, nil
	})
	if err != nil {
		return 0, err
	}
	for _, k := range stale {
		if err := t.del(k); err != nil {
			return 0, err
		}
	}
	return len(stale), nil
}

// AbortedTxns lists the aborted transactions of a partition whose records
// may lie in [from, to): those whose marker is at or after from and whose
// first record is before to, looking at most at limit ranges.
func (t *Tx) AbortedTxns(partitionID, from, to uint64, limit int) ([]AbortedTxn, error) {
	var out []AbortedTxn
	seen := 0
	seek := binary.BigEndian.AppendUint64(abortedTxnPrefix(partitionID), from)
	err := t.scan(abortedTxnPrefix(partitionID), seek, func(k, v []byte) (bool, error) {
		if len(k) != 25 || len(v) != 8 {
			return false, errBadRecord
		}
		a := AbortedTxn{LastOffset: beUint64(k[9:]), ProducerID: int64(beUint64(k[17:])), FirstOffset: beUint64(v)}
		if a.FirstOffset < to {
			out = append(out, a)
		}
		seen++
		return seen < limit, nil
	})
	return out, err
}

// IsAborted reports whether offset o of a producer's batch lies in one of
// the aborted ranges.
func IsAborted(aborted []AbortedTxn, producerID int64, o uint64) bool {
	for _, a := range aborted {
		if a.ProducerID == producerID && a.FirstOffset <= o && o <= a.LastOffset {
			return true
		}
	}
	return false
}

// CommittedView is what a reader that sees only committed Kafka
// transactions needs of one partition: where the decided part of the log
// ends and which stored batches to leave out.
type CommittedView struct {
	tx          *Tx
	partitionID uint64
	// Stable is the partition's last stable offset: a reader stops there.
	Stable      uint64
	aborted     []AbortedTxn
	abortedRead bool
	uncommitted bool
}

// MaxAbortedScan bounds the aborted ranges one read looks at. A read
// returns at most 10,000 entries, so at most that many abort markers lie
// inside it; the rest of the bound is for transactions whose marker lies
// beyond its end (at most one per producer writing to the partition).
const MaxAbortedScan = 20_000

// CommittedView starts a committed-only read of a partition.
func (t *Tx) CommittedView(p Partition) (*CommittedView, error) {
	stable, err := t.StableOffset(p.ID, p.NextOffset)
	return &CommittedView{tx: t, partitionID: p.ID, Stable: stable}, err
}

// UncommittedView starts a read of a partition that takes what Kafka's
// read_uncommitted isolation does: every record up to the end,
// transactional or not, aborted or not; only transaction markers are left
// out.
func (t *Tx) UncommittedView(p Partition) *CommittedView {
	return &CommittedView{tx: t, partitionID: p.ID, Stable: p.NextOffset, uncommitted: true}
}

// Hidden reports whether an entry below Stable is left out: a transaction
// marker, or (in a committed view) a batch of an aborted transaction.
func (v *CommittedView) Hidden(e Entry) (bool, error) {
	h, ok := recordbatch.ReadHeader(e.Batch)
	if e.Message != nil || !ok || !h.Transactional {
		return false, nil
	}
	if h.Control || v.uncommitted {
		return h.Control, nil
	}
	if !v.abortedRead {
		var err error
		if v.aborted, err = v.tx.AbortedTxns(v.partitionID, e.Offset, v.Stable, MaxAbortedScan); err != nil {
			return false, err
		}
		v.abortedRead = true
	}
	return IsAborted(v.aborted, h.ProducerID, e.Offset), nil
}

// PartitionProducer is a producer's state on one partition, for
// DescribeProducers.
type PartitionProducer struct {
	ProducerID int64
	State      dedup.ProducerState
}

// PartitionProducers lists the producers with state on a partition,
// looking at most at maxScan producer records (they are keyed by producer
// first); complete is false when it stopped there.
func (t *Tx) PartitionProducers(partitionID uint64, maxScan int) (out []PartitionProducer, complete bool, err error) {
	seen := 0
	complete = true
	err = t.scan([]byte{familyProducer}, nil, func(k, v []byte) (bool, error) {
		if seen++; seen > maxScan {
			complete = false
			return false, nil
		}
		if len(k) != 17 || beUint64(k[9:]) != partitionID {
			return true, nil
		}
		st, err := decodeProducer(v)
		if err != nil {
			return false, err
		}
		out = append(out, PartitionProducer{ProducerID: int64(beUint64(k[1:9])), State: st})
		return true, nil
	})
	return out, complete, err
}
