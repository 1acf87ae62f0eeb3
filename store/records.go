package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/waggle-mq/waggle/dedup"
)

// Every persisted value starts with a format version byte. A binary that
// changes a format adds a new version and keeps decoding the old ones, so a
// store written by an older binary (or a snapshot it sent) stays readable;
// there is no in-place migration.
const recordV1 byte = 1

var errBadRecord = errors.New("store: malformed record")

// Meta is the state machine's own bookkeeping, written in the same badger
// transaction as the entries it describes.
type Meta struct {
	// AppliedIndex and AppliedTerm name the last raft entry whose effects are stored.
	AppliedIndex uint64
	AppliedTerm  uint64
	// ClockMs is the replicated clock: the largest leader-stamped time seen,
	// in Unix milliseconds. It never goes backwards, even when a new leader's
	// wall clock is behind the old one's.
	ClockMs int64
	// NextID is the next free numeric id for queues and partitions.
	NextID uint64
	// LogFormat is the raft log format the cluster writes (command.LogFormat;
	// 0 in stores from before it was recorded, which means 1). It is kept
	// under a key of its own (PutLogFormat), not in this record: a binary
	// older than log formats then still reads the record, and stops only
	// at the first entry it cannot read, instead of taking the whole store
	// for damaged.
	LogFormat uint32
	// Digest is the state digest as of AppliedIndex: every write the
	// entries after DigestSince made, folded in order (see digest.go).
	// Replicas with the same DigestSince compare at equal indexes. Kept
	// under a key of its own, like LogFormat.
	Digest, DigestSince uint64
}

func (m Meta) encode() []byte {
	b := make([]byte, 0, 33)
	b = append(b, recordV1)
	b = binary.BigEndian.AppendUint64(b, m.AppliedIndex)
	b = binary.BigEndian.AppendUint64(b, m.AppliedTerm)
	b = binary.BigEndian.AppendUint64(b, uint64(m.ClockMs))
	return binary.BigEndian.AppendUint64(b, m.NextID)
}

func decodeMeta(b []byte) (Meta, error) {
	if len(b) != 33 || b[0] != recordV1 {
		return Meta{}, errBadRecord
	}
	return Meta{
		AppliedIndex: binary.BigEndian.Uint64(b[1:]),
		AppliedTerm:  binary.BigEndian.Uint64(b[9:]),
		ClockMs:      int64(binary.BigEndian.Uint64(b[17:])),
		NextID:       binary.BigEndian.Uint64(b[25:]),
	}, nil
}

// Queue is a queue's replicated configuration.
type Queue struct {
	ID                 uint64 `json:"id"`
	Name               string `json:"name"`
	DedupWindowSeconds int64  `json:"dedupWindowSeconds"`
	CreatedAtMs        int64  `json:"createdAtMs"`
	// KafkaPartitions is how many partitions ("0" … "n-1") Kafka clients
	// see; at least 1.
	KafkaPartitions int32 `json:"kafkaPartitions"`
	// RetentionMs: how long messages are kept; zero is the default (see
	// command.RetentionMs), negative for ever. Kafka's retention.ms, or an
	// HTTP queue's retentionSeconds.
	RetentionMs     int64 `json:"retentionMs,omitempty"`
	MaxMessageBytes int32 `json:"maxMessageBytes,omitempty"`
	// RetentionBytes is Kafka's retention.bytes, per partition; zero or
	// negative: no limit (see command.RetentionBytes).
	RetentionBytes int64 `json:"retentionBytes,omitempty"`
	// CompletedRetentionMs: messages every consumer group has finished go
	// once older than this (an HTTP queue's completedRetentionSeconds); 0
	// keeps them.
	CompletedRetentionMs int64 `json:"completedRetentionMs,omitempty"`
	// KafkaCreated: created over Kafka, so a zero RetentionMs means the
	// Kafka default rather than for ever.
	KafkaCreated bool `json:"kafkaCreated,omitempty"`
	// Segment files: zero means the default (see SegmentLimits).
	SegmentBytes int64 `json:"segmentBytes,omitempty"`
	SegmentMs    int64 `json:"segmentMs,omitempty"`
	// Kafka log compaction (see compact.go): CleanupPolicy is one of the
	// Policy constants (0: delete, the default). DeleteRetentionMs and
	// MinCleanableDirtyPPM (millionths) read 0 as the default and -1 as
	// an explicit zero. CompactedLayout is set by the first compaction
	// pass and never cleared: the queue's entries may since lie out of
	// offset order in its stream (retention then scans, see trimPartition).
	CleanupPolicy        int64 `json:"cleanupPolicy,omitempty"`
	MinCompactionLagMs   int64 `json:"minCompactionLagMs,omitempty"`
	DeleteRetentionMs    int64 `json:"deleteRetentionMs,omitempty"`
	MinCleanableDirtyPPM int64 `json:"minCleanableDirtyPpm,omitempty"`
	CompactedLayout      bool  `json:"compactedLayout,omitempty"`
	// Configs holds the Kafka topic configs of log format 8 and later
	// (command.ConfigCompressionType, …) by name; a config absent is at
	// its default. JSON writes a map's keys in order, so every replica
	// encodes the same bytes.
	Configs map[string]int64 `json:"configs,omitempty"`
	// Consuming over HTTP; nil means the default (see package fsm).
	LeaseTimeSeconds         *int64 `json:"leaseTime,omitempty"`
	RetryLimit               *int32 `json:"retryLimit,omitempty"`
	DeadLetterQueue          *bool  `json:"deadLetterQueue,omitempty"`
	DelayedProcessingSeconds *int64 `json:"delayedProcessing,omitempty"`
}

// Config is the value of a Kafka topic config kept in Configs, and
// whether the topic sets it.
func (q Queue) Config(name string) (v int64, set bool) {
	v, set = q.Configs[name]
	return v, set
}

// SetConfig sets a config kept in Configs; 0 returns it to its default.
// It writes a new map: copies of q (a cached queue) keep the old one.
func (q *Queue) SetConfig(name string, v int64) {
	configs := make(map[string]int64, len(q.Configs)+1)
	for k, old := range q.Configs {
		if k != name {
			configs[k] = old
		}
	}
	if v != 0 {
		configs[name] = v
	}
	q.Configs = configs
	if len(configs) == 0 {
		q.Configs = nil
	}
}

// Queue and node records are JSON behind the version byte: they are small,
// rarely written, and gain fields over time.
func encodeJSONRecord(v any) []byte {
	js, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("store: encode %T: %v", v, err)) // plain structs: cannot fail
	}
	return append([]byte{recordV1}, js...)
}

func decodeJSONRecord[T any](b []byte) (T, error) {
	var v T
	if len(b) < 1 || b[0] != recordV1 {
		return v, errBadRecord
	}
	if err := json.Unmarshal(b[1:], &v); err != nil {
		return v, fmt.Errorf("%w: %v", errBadRecord, err)
	}
	return v, nil
}

func (q Queue) encode() []byte { return encodeJSONRecord(q) }

// TopicID is the queue's KIP-516 topic id as Kafka clients see it: derived
// from the queue id, so the same on every node, and new for a topic
// deleted and created again (which gets a new queue id).
func (q Queue) TopicID() [16]byte {
	var in [16]byte
	copy(in[:], "waggleid")
	binary.BigEndian.PutUint64(in[8:], q.ID)
	sum := sha256.Sum256(in[:])
	var id [16]byte
	copy(id[:], sum[:16])
	return id
}

func decodeQueue(b []byte) (Queue, error) { return decodeJSONRecord[Queue](b) }

// Node is a cluster member's advertised addresses, registered by the node
// itself so any member can tell clients where the others are.
type Node struct {
	ID        string `json:"id"`
	HTTPAddr  string `json:"httpAddr"`
	KafkaAddr string `json:"kafkaAddr"`
	// LogFormat is the newest raft log format the node's binary reads, as
	// it registered it (0: registered before formats were recorded).
	LogFormat uint32 `json:"logFormat,omitempty"`
}

// Partition is one partition of a queue with its offset range: messages
// live at offsets [StartOffset, NextOffset).
type Partition struct {
	ID          uint64
	QueueID     uint64
	Name        string
	NextOffset  uint64
	StartOffset uint64
}

func (p Partition) encodeMeta() []byte {
	b := make([]byte, 0, 25+len(p.Name))
	b = append(b, recordV1)
	b = binary.BigEndian.AppendUint64(b, p.QueueID)
	b = binary.BigEndian.AppendUint64(b, p.NextOffset)
	b = binary.BigEndian.AppendUint64(b, p.StartOffset)
	return append(b, p.Name...)
}

func decodePartitionMeta(id uint64, b []byte) (Partition, error) {
	if len(b) < 25 || b[0] != recordV1 {
		return Partition{}, errBadRecord
	}
	return Partition{
		ID:          id,
		QueueID:     binary.BigEndian.Uint64(b[1:]),
		NextOffset:  binary.BigEndian.Uint64(b[9:]),
		StartOffset: binary.BigEndian.Uint64(b[17:]),
		Name:        string(b[25:]),
	}, nil
}

// Message values start with a kind byte: a JSON message pushed over HTTP
// (at one offset) or a Kafka record batch as produced (at Count offsets
// from the key's). Version 2 of each adds the append sequence (see
// Entry.AppendSeq); records of version 1, written by older binaries, read
// it as 0. A changed format gets a new kind.
const (
	kindMessage   = recordV1
	kindBatch     = 2
	kindBatchV2   = 3
	kindMessageV2 = 4
	// kindMessageBatch holds the messages one push entry appended to one
	// partition (log format 3), at consecutive offsets. It is only ever
	// found in a segment record, never inline under a message key.
	kindMessageBatch = 6
)

// Message is one stored message.
type Message struct {
	Offset        uint64
	ID            [16]byte // UUIDv7 stamped by the leader
	TimestampMs   int64    // leader-stamped append time
	TransactionID string
	Payload       []byte // the JSON document as pushed
	AppendSeq     uint64 // see Entry.AppendSeq
}

// encodedSize bounds the bytes appendTo writes.
func (m Message) encodedSize() int {
	return 1 + 8 + 16 + 8 + binary.MaxVarintLen64 + len(m.TransactionID) + len(m.Payload)
}

// appendTo appends the message to b as kindMessageV2:
//
//	[0x04] appendSeq(8) id(16) timestampMs(8) len(transactionId) transactionId payload
func (m Message) appendTo(b []byte) []byte {
	b = append(b, kindMessageV2)
	b = binary.BigEndian.AppendUint64(b, m.AppendSeq)
	b = append(b, m.ID[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(m.TimestampMs))
	b = binary.AppendUvarint(b, uint64(len(m.TransactionID)))
	b = append(b, m.TransactionID...)
	return append(b, m.Payload...)
}

func decodeMessage(offset uint64, b []byte) (Message, error) {
	var seq uint64
	switch {
	case len(b) >= 34 && b[0] == kindMessageV2:
		seq, b = binary.BigEndian.Uint64(b[1:9]), b[8:] // the rest reads as version 1
	case len(b) >= 26 && b[0] == kindMessage:
	default:
		return Message{}, errBadRecord
	}
	m := Message{Offset: offset, TimestampMs: int64(binary.BigEndian.Uint64(b[17:25])), AppendSeq: seq}
	copy(m.ID[:], b[1:17])
	n, w := binary.Uvarint(b[25:])
	rest := b[25:]
	if w <= 0 || n > uint64(len(rest)-w) {
		return Message{}, errBadRecord
	}
	rest = rest[w:]
	m.TransactionID = string(rest[:n])
	m.Payload = append([]byte(nil), rest[n:]...)
	return m, nil
}

// appendMessageBatch appends msgs (consecutive offsets, one append time
// and sequence, those of msgs[0]) to b as kindMessageBatch:
//
//	[0x06] count(4) timestampMs(8) appendSeq(8)
//	then per message: id(16) uvarint(len) transactionId uvarint(len) payload
func appendMessageBatch(b []byte, msgs []Message) []byte {
	b = append(b, kindMessageBatch)
	b = binary.BigEndian.AppendUint32(b, uint32(len(msgs)))
	b = binary.BigEndian.AppendUint64(b, uint64(msgs[0].TimestampMs))
	b = binary.BigEndian.AppendUint64(b, msgs[0].AppendSeq)
	for _, m := range msgs {
		b = append(b, m.ID[:]...)
		b = binary.AppendUvarint(b, uint64(len(m.TransactionID)))
		b = append(b, m.TransactionID...)
		b = binary.AppendUvarint(b, uint64(len(m.Payload)))
		b = append(b, m.Payload...)
	}
	return b
}

// messageBatchSize bounds the bytes appendMessageBatch writes.
func messageBatchSize(msgs []Message) int {
	n := 21
	for _, m := range msgs {
		n += 16 + 2*binary.MaxVarintLen64 + len(m.TransactionID) + len(m.Payload)
	}
	return n
}

// decodeMessageBatch decodes a kindMessageBatch body whose first message
// is at offset. The payloads are copied out of b.
func decodeMessageBatch(offset uint64, b []byte) (Entry, error) {
	if len(b) < 21 || b[0] != kindMessageBatch {
		return Entry{}, errBadRecord
	}
	count := binary.BigEndian.Uint32(b[1:])
	ts := int64(beUint64(b[5:]))
	seq := beUint64(b[13:])
	rest := b[21:]
	// Each message takes at least 18 bytes: a damaged count cannot make
	// the slice below larger than the record.
	if uint64(count) > uint64(len(rest))/18+1 || count == 0 {
		return Entry{}, errBadRecord
	}
	field := func() ([]byte, bool) {
		n, w := binary.Uvarint(rest)
		if w <= 0 || n > uint64(len(rest)-w) {
			return nil, false
		}
		f := rest[w : w+int(n)]
		rest = rest[w+int(n):]
		return f, true
	}
	msgs := make([]Message, count)
	for i := range msgs {
		if len(rest) < 16 {
			return Entry{}, errBadRecord
		}
		m := &msgs[i]
		m.Offset, m.TimestampMs, m.AppendSeq = offset+uint64(i), ts, seq
		copy(m.ID[:], rest)
		rest = rest[16:]
		txID, ok := field()
		if !ok {
			return Entry{}, errBadRecord
		}
		payload, ok := field()
		if !ok {
			return Entry{}, errBadRecord
		}
		m.TransactionID, m.Payload = string(txID), append([]byte(nil), payload...)
	}
	if len(rest) != 0 {
		return Entry{}, errBadRecord
	}
	return Entry{Offset: offset, Count: count, MaxTimestampMs: ts, AppendSeq: seq, Messages: msgs}, nil
}

// Dedup records are dedup.Entry values: where a transactionId was stored,
// for answering a retry with the original message. ExpiresAtMs is also
// where the id sits in the expiry index. Records of hashed (long) ids end
// with the full id; others end after the message id (version 1) or after
// the expiry group that files them (version 2, log format 3), which is
// how deleting the record finds the group's index entry.
//
//	[0x01] offset(8) storedAtMs(8) expiresAtMs(8) messageID(16) [transactionId]
//	[0x02] offset(8) storedAtMs(8) expiresAtMs(8) messageID(16) groupOffset(8) groupCount(4) [transactionId]
func encodeDedup(d dedup.Entry, storedID string, g *dedupGroup) []byte {
	b := make([]byte, 0, 53+len(storedID))
	b = append(b, recordV1)
	if g != nil {
		b[0] = dedupV2
	}
	b = binary.BigEndian.AppendUint64(b, d.Offset)
	b = binary.BigEndian.AppendUint64(b, uint64(d.StoredAtMs))
	b = binary.BigEndian.AppendUint64(b, uint64(d.ExpiresAtMs))
	b = append(b, d.MessageID[:]...)
	if g != nil {
		b = binary.BigEndian.AppendUint64(b, g.offset)
		b = binary.BigEndian.AppendUint32(b, g.count)
	}
	return append(b, storedID...)
}

// dedupV2 is the version of dedup records filed in an expiry group.
const dedupV2 byte = 2

// dedupGroup names the expiry group (expiryGroupKey) a record is filed in:
// the offset of the first message of its push entry in the partition, and
// how many ids the group holds.
type dedupGroup struct {
	offset uint64
	count  uint32
}

func decodeDedup(b []byte) (d dedup.Entry, storedID string, g *dedupGroup, err error) {
	if len(b) < 41 || b[0] != recordV1 && (b[0] != dedupV2 || len(b) < 53) {
		return dedup.Entry{}, "", nil, errBadRecord
	}
	d = dedup.Entry{
		Offset:      binary.BigEndian.Uint64(b[1:]),
		StoredAtMs:  int64(binary.BigEndian.Uint64(b[9:])),
		ExpiresAtMs: int64(binary.BigEndian.Uint64(b[17:])),
	}
	copy(d.MessageID[:], b[25:41])
	rest := b[41:]
	if b[0] == dedupV2 {
		g = &dedupGroup{offset: binary.BigEndian.Uint64(rest), count: binary.BigEndian.Uint32(rest[8:])}
		rest = rest[12:]
	}
	return d, string(rest), g, nil
}

// Entry is what one message key holds: a JSON message, or a Kafka batch
// covering Count offsets from Offset.
type Entry struct {
	Offset uint64
	Count  uint32
	// MaxTimestampMs is the newest record timestamp in the entry.
	MaxTimestampMs int64
	// AppendSeq is the state machine's id counter when the entry was
	// appended: it never decreases along a partition, and a reset stamped
	// with generation g came after exactly the entries whose AppendSeq is
	// at most g. Records written before resets existed read 0.
	AppendSeq uint64
	// Exactly one of Message, Messages and Batch is set. Batch is the raw
	// record batch with its first offset already set to Offset. Messages
	// is a message batch (log format 3) read whole; readers of a
	// partition's entries get its messages one entry each instead.
	Message  *Message
	Messages []Message
	Batch    []byte

	ptr *pointer // where the body is, for an entry read without it
}

// Size is roughly how many bytes the entry returns to a reader.
func (e Entry) Size() int {
	if e.ptr != nil && e.Message == nil && e.Batch == nil {
		return int(e.ptr.length)
	}
	if e.Message != nil {
		return len(e.Message.Payload) + len(e.Message.TransactionID) + 40
	}
	if e.Messages != nil {
		n := 0
		for _, m := range e.Messages {
			n += len(m.Payload) + len(m.TransactionID) + 40
		}
		return n
	}
	return len(e.Batch)
}

// appendBatch appends a Kafka batch to b as kindBatchV2:
//
//	[0x03] count(4) maxTimestampMs(8) appendSeq(8) raw batch
func appendBatch(b []byte, count uint32, maxTimestampMs int64, appendSeq uint64, raw []byte) []byte {
	b = append(b, kindBatchV2)
	b = binary.BigEndian.AppendUint32(b, count)
	b = binary.BigEndian.AppendUint64(b, uint64(maxTimestampMs))
	b = binary.BigEndian.AppendUint64(b, appendSeq)
	return append(b, raw...)
}

func decodeEntry(offset uint64, b []byte) (Entry, error) {
	if len(b) == 0 {
		return Entry{}, errBadRecord
	}
	switch b[0] {
	case kindMessageBatch:
		return decodeMessageBatch(offset, b)
	case kindMessage, kindMessageV2:
		m, err := decodeMessage(offset, b)
		if err != nil {
			return Entry{}, err
		}
		return Entry{Offset: offset, Count: 1, MaxTimestampMs: m.TimestampMs, AppendSeq: m.AppendSeq, Message: &m}, nil
	case kindBatch:
		if len(b) < 13 {
			return Entry{}, errBadRecord
		}
		return Entry{
			Offset:         offset,
			Count:          binary.BigEndian.Uint32(b[1:]),
			MaxTimestampMs: int64(binary.BigEndian.Uint64(b[5:])),
			Batch:          append([]byte(nil), b[13:]...),
		}, nil
	case kindBatchV2:
		if len(b) < 21 {
			return Entry{}, errBadRecord
		}
		return Entry{
			Offset:         offset,
			Count:          binary.BigEndian.Uint32(b[1:]),
			MaxTimestampMs: int64(binary.BigEndian.Uint64(b[5:])),
			AppendSeq:      binary.BigEndian.Uint64(b[13:]),
			Batch:          append([]byte(nil), b[21:]...),
		}, nil
	default:
		return Entry{}, errBadRecord
	}
}

func encodeProducer(st dedup.ProducerState) []byte {
	b := make([]byte, 0, 12+16*len(st.Batches))
	b = append(b, recordV1)
	b = binary.BigEndian.AppendUint16(b, uint16(st.Epoch))
	b = binary.BigEndian.AppendUint64(b, uint64(st.LastUpdateMs))
	b = append(b, byte(len(st.Batches)))
	for _, pb := range st.Batches {
		b = binary.BigEndian.AppendUint32(b, uint32(pb.FirstSeq))
		b = binary.BigEndian.AppendUint32(b, uint32(pb.LastSeq))
		b = binary.BigEndian.AppendUint64(b, uint64(pb.BaseOffset))
	}
	return b
}

func decodeProducer(b []byte) (dedup.ProducerState, error) {
	if len(b) < 12 || b[0] != recordV1 || len(b) != 12+16*int(b[11]) {
		return dedup.ProducerState{}, errBadRecord
	}
	st := dedup.ProducerState{
		Epoch:        int16(binary.BigEndian.Uint16(b[1:])),
		LastUpdateMs: int64(binary.BigEndian.Uint64(b[3:])),
	}
	for rest := b[12:]; len(rest) > 0; rest = rest[16:] {
		st.Batches = append(st.Batches, dedup.ProducerBatch{
			FirstSeq:   int32(binary.BigEndian.Uint32(rest)),
			LastSeq:    int32(binary.BigEndian.Uint32(rest[4:])),
			BaseOffset: int64(binary.BigEndian.Uint64(rest[8:])),
		})
	}
	return st, nil
}

// Cursor is a consumer group's position in one queue partition, shared by
// Kafka groups (which only commit Offset) and HTTP groups (which also lease
// messages and ack them one by one).
type Cursor struct {
	QueueID   uint64 `json:"-"`
	Partition string `json:"-"`
	// Gen is the generation stamp the cursor was written with (see
	// ConsumerGroupView): a reset or a group delete with a later stamp supersedes it.
	Gen uint64 `json:"-"`
	// Offset is the next offset the group reads: everything before it is done.
	Offset      int64  `json:"offset"`
	LeaderEpoch int32  `json:"leaderEpoch,omitempty"`
	Metadata    string `json:"metadata,omitempty"`
	UpdatedMs   int64  `json:"updatedMs"`
	// Leases are the leases on the partition's offsets, each on offsets of
	// its own: at most one while HTTP consumers read it (a pop waits for
	// the partition to be free of leases, so the group reads it in order),
	// any number while share group members do (KIP-932; their offsets lie
	// within share.partition.max.record.locks of Offset). A lease past its
	// expiry stays until a pop, an acquisition or an ack settles it.
	Leases []*Lease `json:"leases,omitempty"`
	// Done lists offsets past Offset already finished (completed or dead-
	// lettered while an earlier one waits for redelivery), ascending.
	Done []int64 `json:"done,omitempty"`
	// Attempts counts deliveries and Failures failed acks, per offset past
	// Offset.
	Attempts map[int64]int32 `json:"attempts,omitempty"`
	Failures map[int64]int32 `json:"failures,omitempty"`
	// Expired counts the messages retention dropped before this group
	// read them: each time the cursor jumped to the partition's start, the
	// unfinished offsets it passed over.
	Expired int64 `json:"expired,omitempty"`

	// superseded are the leases of the stored cursor this one replaces
	// after a reset; PutCursor drops them from the lease index. resolved:
	// the position came from a reset, not a stored cursor.
	superseded []string
	resolved   bool
}

// SharedLeasePrefix starts the id of a lease a share group's member took
// beside other members' leases (log format 11). The lease index leaves
// such leases out: acks find them by partition and holder, never by id
// alone, and a cursor may hold thousands of them, too many to index and
// drop within one bounded entry. Every other lease is indexed, and a
// cursor holds at most one of those.
const SharedLeasePrefix = "shared:"

// IndexedLease reports whether the lease index holds lease id.
func IndexedLease(id string) bool { return !strings.HasPrefix(id, SharedLeasePrefix) }

// LeaseByID is the cursor's lease with id, or nil.
func (c *Cursor) LeaseByID(id string) *Lease {
	for _, l := range c.Leases {
		if l.ID == id {
			return l
		}
	}
	return nil
}

// DropLease takes lease l off the cursor.
func (c *Cursor) DropLease(l *Lease) {
	c.Leases = slices.DeleteFunc(c.Leases, func(x *Lease) bool { return x == l })
	if len(c.Leases) == 0 {
		c.Leases = nil
	}
}

// HasLiveLease reports whether one of the cursor's leases is live at now.
func (c *Cursor) HasLiveLease(now int64) bool {
	return slices.ContainsFunc(c.Leases, func(l *Lease) bool { return l.ExpiresAtMs > now })
}

// HasExpiredLease reports whether one of the cursor's leases expired by
// now (it stays until it is settled).
func (c *Cursor) HasExpiredLease(now int64) bool {
	return slices.ContainsFunc(c.Leases, func(l *Lease) bool { return l.ExpiresAtMs <= now })
}

// TakenBelow counts the offsets past the cursor's position and below end
// that are finished or under a lease.
func (c *Cursor) TakenBelow(end int64) int64 {
	n := int64(0)
	for _, o := range c.Done {
		if o >= c.Offset && o < end {
			n++
		}
	}
	for _, l := range c.Leases {
		for _, o := range l.Offsets {
			if o >= c.Offset && o < end {
				n++
			}
		}
	}
	return n
}

// InFlight counts the offsets under the cursor's leases.
func (c *Cursor) InFlight() int {
	n := 0
	for _, l := range c.Leases {
		n += len(l.Offsets)
	}
	return n
}

// Lease hands some offsets of a partition to one consumer of a group until
// ExpiresAtMs (replicated time), or until every one is acked.
type Lease struct {
	ID          string  `json:"id"`
	ExpiresAtMs int64   `json:"expiresAtMs"`
	Offsets     []int64 `json:"offsets"` // ascending
	// TxHashes[i] is TxHash of the transactionId at Offsets[i], so an ack
	// finds its message without reading the whole lease.
	TxHashes []uint64         `json:"txHashes,omitempty"`
	Acks     map[int64]string `json:"acks,omitempty"`
}

// Drop takes offset o out of the lease, with its hash and ack.
func (l *Lease) Drop(o int64) {
	i, found := slices.BinarySearch(l.Offsets, o)
	if !found {
		return
	}
	l.Offsets = slices.Delete(l.Offsets, i, i+1)
	if i < len(l.TxHashes) {
		l.TxHashes = slices.Delete(l.TxHashes, i, i+1)
	}
	delete(l.Acks, o)
}

// TxHash is the 64-bit FNV-1a hash of a transactionId.
func TxHash(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()
}

// Subscription records a group's first pop on a queue (where it started)
// and the last reset of its positions there.
type Subscription struct {
	FromNew   bool  `json:"fromNew"`
	StartedMs int64 `json:"startedMs"`
	// Resume is the partition a pop served (or looked at) last; the next
	// pop starts after it, so pops rotate over the partitions.
	Resume string `json:"resume,omitempty"`
	// Gen is the generation stamp the subscription was written with.
	Gen uint64 `json:"gen,omitempty"`
	// Reset, when set, moved every partition of the queue at once: cursors
	// stamped at or below Reset.Gen are superseded, and a partition without a
	// newer cursor is where Reset puts it.
	Reset *Reset `json:"reset,omitempty"`
}

// Reset modes.
const (
	// ResetToEnd: the first offset appended after the reset, so only
	// messages appended after it are read.
	ResetToEnd = "end"
	// ResetToOffset: Offset, kept within the partition's range at the
	// time of the reset.
	ResetToOffset = "offset"
	// ResetToTime: the first entry whose newest record is at or after AtMs
	// among those appended before the reset, else the end.
	ResetToTime = "time"
)

// Reset moves all of a group's positions in a queue without writing one
// cursor per partition: a partition's position is worked out when it is
// next read. That keeps a seek, or a first pop from new, one bounded write
// however many partitions the queue has.
type Reset struct {
	Gen    uint64 `json:"gen"`
	Mode   string `json:"mode"`
	Offset int64  `json:"offset,omitempty"`
	AtMs   int64  `json:"atMs,omitempty"`
}

// Tombstone kinds.
const (
	TombstoneQueue = "queue"
	TombstoneGroup = "group"
)

// Tombstone marks a deleted queue or group whose keys clean-up entries are
// still removing, or a queue's data being dropped by retention. Readers never see it: the queue's name and id lookups are
// gone at once, and a group's records are superseded by its group record.
type Tombstone struct {
	Seq     uint64 `json:"-"`
	Kind    string `json:"kind"`
	QueueID uint64 `json:"queueId,omitempty"`
	Queue   string `json:"queue,omitempty"`
	Group   string `json:"group,omitempty"`
	Gen     uint64 `json:"gen,omitempty"` // a group's records at or below it go
	// Progress: the phase; for a queue, the partition being emptied, the
	// key range of it being swept, and where the partition scan resumes;
	// where the current sweep resumes.
	Phase     int    `json:"phase"`
	Partition uint64 `json:"partition,omitempty"`
	PartRange int    `json:"partRange,omitempty"`
	PartNext  []byte `json:"partNext,omitempty"`
	Next      []byte `json:"next,omitempty"`
	// Pos: a trim drops the queue's data before this stream position.
	Pos uint64 `json:"pos,omitempty"`
	// Scan: the queue's entries may lie out of offset order (compacted),
	// so a trim looks at every entry of a partition, not only up to the
	// first at or after Pos; Kept: it kept one in the current partition.
	Scan bool `json:"scan,omitempty"`
	Kept bool `json:"kept,omitempty"`
}

// groupRecord is kept while a deleted group's old records are cleaned up.
type groupRecord struct {
	DeletedGen uint64 `json:"deletedGen"`
}

// DeadLetter is a message a group gave up on.
type DeadLetter struct {
	ID            uint64          `json:"id"`
	QueueID       uint64          `json:"queueId"`
	Group         string          `json:"group"`
	Partition     string          `json:"partition"`
	Offset        int64           `json:"offset"`
	TransactionID string          `json:"transactionId"`
	Payload       json.RawMessage `json:"payload"`
	Error         string          `json:"error"`
	Attempts      int32           `json:"attempts"`
	AtMs          int64           `json:"atMs"`
	// Replayed is set once the dead letter was pushed back to its queue.
	Replayed *Replay `json:"replayed,omitempty"`
}

// Replay records where a replayed dead letter's copy was stored.
type Replay struct {
	AtMs      int64    `json:"atMs"`
	MessageID [16]byte `json:"messageId"`
	Offset    uint64   `json:"offset"`
}

// Size bounds how many bytes the dead letter's record takes (a JSON
// string escape turns one byte into at most six).
func (d DeadLetter) Size() int {
	return len(d.Payload) + 6*(len(d.TransactionID)+len(d.Error)+len(d.Group)+len(d.Partition)) + 128
}
