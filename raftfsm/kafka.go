package raftfsm

import (
	"errors"
	"math"
	"slices"
	"strconv"

	"github.com/waggle-mq/waggle/dedup"
	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

// TopicOutcome is the state machine's answer to a topic command.
type TopicOutcome byte

// Topic outcomes; the kafka package maps them to error codes.
const (
	TopicOK TopicOutcome = iota
	TopicExists
	TopicUnknown
	TopicUnknownPartition
	TopicInvalidPartitions
	// SequenceOutOfOrder and ProducerFenced refuse an idempotent batch
	// (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH).
	SequenceOutOfOrder
	ProducerFenced
	// TopicInvalidConfig refuses an AlterTopicCommand naming an unknown
	// config.
	TopicInvalidConfig
	// OffsetOutOfRange refuses a DeleteRecords offset past the high
	// watermark.
	OffsetOutOfRange
)

// CreateTopicCommand creates a queue from Kafka: dedup window 0 (Kafka
// records carry no transactionId), Partitions Kafka partitions.
type CreateTopicCommand struct {
	NowMs           int64
	Name            string
	Partitions      int32
	RetentionMs     int64
	MaxMessageBytes int32
	// Added after the first release: entries that end before them read 0.
	SegmentBytes int64
	SegmentMs    int64
	// Added later still.
	RetentionBytes int64
	// Settings are further topic configs (ApplyTopicSettings), written
	// only when there are some: an entry with them needs log format 2.
	Settings []TopicSetting
}

// since: a topic created with Settings needs format 2; without, format 1
// reads it.
func (c *CreateTopicCommand) since() LogFormat {
	if len(c.Settings) > 0 {
		return LogFormat2
	}
	return LogFormat1
}

// Encode returns the raft entry for the command.
func (c *CreateTopicCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdCreateTopic))
	e.varint(c.NowMs)
	e.string(c.Name)
	e.varint(int64(c.Partitions))
	e.varint(c.RetentionMs)
	e.varint(int64(c.MaxMessageBytes))
	e.varint(c.SegmentBytes)
	e.varint(c.SegmentMs)
	e.varint(c.RetentionBytes)
	if len(c.Settings) > 0 {
		e.uvarint(uint64(len(c.Settings)))
		for _, s := range c.Settings {
			e.string(s.Name)
			e.varint(s.Value)
		}
	}
	return e.b
}

func decodeCreateTopic(b []byte) (*CreateTopicCommand, error) {
	d := decoder{b: b}
	c := &CreateTopicCommand{NowMs: d.varint(), Name: d.string(), Partitions: int32(d.varint()),
		RetentionMs: d.varint(), MaxMessageBytes: int32(d.varint())}
	if d.more() {
		c.SegmentBytes, c.SegmentMs = d.varint(), d.varint()
	}
	if d.more() {
		c.RetentionBytes = d.varint()
	}
	if d.more() {
		if n := d.count(2); n > 0 {
			c.Settings = make([]TopicSetting, n)
			for i := range c.Settings {
				c.Settings[i] = TopicSetting{Name: d.string(), Value: d.varint()}
			}
		}
	}
	return c, d.finish()
}

func (p *Processor) createTopic(tx *store.Tx, meta *store.Meta, c *CreateTopicCommand) TopicOutcome {
	if _, err := tx.Queue(c.Name); err == nil {
		return TopicExists
	} else if !errors.Is(err, store.ErrNotFound) {
		must(err)
	}
	if c.Partitions < 1 || c.Partitions > maxKafkaPartitions {
		return TopicInvalidPartitions
	}
	q := newQueue(meta, c.Name, 0, c.Partitions)
	q.RetentionMs, q.MaxMessageBytes = c.RetentionMs, c.MaxMessageBytes
	q.SegmentBytes, q.SegmentMs, q.KafkaCreated = c.SegmentBytes, c.SegmentMs, true
	q.RetentionBytes = c.RetentionBytes
	if !ApplyTopicSettings(&q, c.Settings) {
		return TopicInvalidConfig
	}
	var queues queueCache
	for i := range c.Partitions {
		p.partition(tx, meta, &queues, &q, strconv.Itoa(int(i)))
	}
	must(tx.PutQueue(q))
	return TopicOK
}

// AddPartitionsCommand raises a topic's Kafka partition count.
type AddPartitionsCommand struct {
	Name  string
	Count int32
}

// Encode returns the raft entry for the command.
func (c *AddPartitionsCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdAddPartitions))
	e.string(c.Name)
	e.varint(int64(c.Count))
	return e.b
}

func decodeAddPartitions(b []byte) (*AddPartitionsCommand, error) {
	d := decoder{b: b}
	c := &AddPartitionsCommand{Name: d.string(), Count: int32(d.varint())}
	return c, d.finish()
}

func (p *Processor) addPartitions(tx *store.Tx, meta *store.Meta, c *AddPartitionsCommand) TopicOutcome {
	q, err := tx.Queue(c.Name)
	if errors.Is(err, store.ErrNotFound) {
		return TopicUnknown
	}
	must(err)
	if c.Count <= max(q.KafkaPartitions, 1) || c.Count > maxKafkaPartitions {
		return TopicInvalidPartitions // Kafka only ever grows a topic
	}
	var queues queueCache
	for i := q.KafkaPartitions; i < c.Count; i++ {
		p.partition(tx, meta, &queues, &q, strconv.Itoa(int(i)))
	}
	q.KafkaPartitions = c.Count
	must(tx.PutQueue(q))
	return TopicOK
}

// DeleteQueueCommand deletes a queue (a topic) with its partitions. The
// queue disappears at once; its data is removed by cleanup entries.
type DeleteQueueCommand struct {
	Name string
}

// Encode returns the raft entry for the command.
func (c *DeleteQueueCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdDeleteQueue))
	e.string(c.Name)
	return e.b
}

func decodeDeleteQueue(b []byte) (*DeleteQueueCommand, error) {
	d := decoder{b: b}
	c := &DeleteQueueCommand{Name: d.string()}
	return c, d.finish()
}

// deleteQueue makes the queue unreachable at once (its name is free again)
// and files a tombstone; cleanup entries remove its data in bounded steps.
func (p *Processor) deleteQueue(tx *store.Tx, meta *store.Meta, c *DeleteQueueCommand) TopicOutcome {
	q, err := tx.Queue(c.Name)
	if errors.Is(err, store.ErrNotFound) {
		return TopicUnknown
	}
	must(err)
	must(tx.DeleteQueue(q, meta.NextID))
	meta.NextID++
	return TopicOK
}

// ProduceCommand appends validated Kafka record batches to one partition
// of a topic. With AutoCreatePartitions > 0 a missing topic is created
// (dedup window 0) with that many partitions first.
type ProduceCommand struct {
	NowMs                int64
	Topic                string
	Partition            int32
	AutoCreatePartitions int32
	Batches              []ProduceBatch
}

// ProduceBatch is one record batch as the producer sent it, with the header
// fields the state machine needs lifted out by the leader.
type ProduceBatch struct {
	NumRecords   int32
	MaxTimestamp int64
	// ProducerID < 0: not an idempotent batch.
	ProducerID    int64
	ProducerEpoch int16
	FirstSequence int32
	Raw           []byte
}

// leaderEpoch is the Kafka partition leader epoch of what the current
// entry appends: its raft term (broker.Service.LeaderEpoch), held at the
// largest int32. A cluster still at log format 1 writes 0, as release
// v0.1.0 does, so replicas of both releases store the same bytes during a
// rolling upgrade; so does a processor used without an FSM.
func (p *Processor) leaderEpoch(meta *store.Meta) int32 {
	if effectiveLogFormat(*meta) < LogFormat2 {
		return 0
	}
	return int32(min(p.term, math.MaxInt32))
}

// lastSequence is the sequence of the batch's last record; they wrap at 2^31-1.
func (b ProduceBatch) lastSequence() int32 {
	return int32((int64(b.FirstSequence) + int64(b.NumRecords) - 1) % (1 << 31))
}

// ProduceResult answers a ProduceCommand: the first offset given to its
// first batch, or why nothing was appended.
type ProduceResult struct {
	Outcome      TopicOutcome
	BaseOffset   int64
	LogStart     int64
	AppendTimeMs int64
}

// minProduceBatchSize is the fewest bytes one encoded batch takes.
const minProduceBatchSize = 3

// Encode returns the raft entry for the command.
func (c *ProduceCommand) Encode() []byte {
	size := 32 + len(c.Topic)
	for _, b := range c.Batches {
		size += len(b.Raw) + 16
	}
	e := encoder{b: make([]byte, 0, size)}
	e.byte(byte(CmdProduce))
	e.varint(c.NowMs)
	e.string(c.Topic)
	e.varint(int64(c.Partition))
	e.varint(int64(c.AutoCreatePartitions))
	e.uvarint(uint64(len(c.Batches)))
	for _, b := range c.Batches {
		e.varint(int64(b.NumRecords))
		e.varint(b.MaxTimestamp)
		e.varint(b.ProducerID)
		e.varint(int64(b.ProducerEpoch))
		e.varint(int64(b.FirstSequence))
		e.bytes(b.Raw)
	}
	return e.b
}

func decodeProduce(b []byte) (*ProduceCommand, error) {
	d := decoder{b: b}
	c := &ProduceCommand{NowMs: d.varint(), Topic: d.string(), Partition: int32(d.varint()), AutoCreatePartitions: int32(d.varint())}
	c.Batches = make([]ProduceBatch, d.count(minProduceBatchSize))
	for i := range c.Batches {
		c.Batches[i] = ProduceBatch{NumRecords: int32(d.varint()), MaxTimestamp: d.varint(), ProducerID: d.varint(),
			ProducerEpoch: int16(d.varint()), FirstSequence: int32(d.varint()), Raw: d.bytes()}
	}
	if d.err == nil {
		for _, b := range c.Batches {
			if b.NumRecords <= 0 || len(b.Raw) < recordbatch.HeaderSize {
				return nil, errors.New("raftfsm: produce batch without records")
			}
		}
	}
	return c, d.finish()
}

func (p *Processor) produce(tx *store.Tx, meta *store.Meta, c *ProduceCommand) ProduceResult {
	q, err := tx.Queue(c.Topic)
	if errors.Is(err, store.ErrNotFound) {
		if c.AutoCreatePartitions <= 0 {
			return ProduceResult{Outcome: TopicUnknown}
		}
		if p.createTopic(tx, meta, &CreateTopicCommand{Name: c.Topic, Partitions: c.AutoCreatePartitions}) != TopicOK {
			return ProduceResult{Outcome: TopicInvalidPartitions}
		}
		q, err = tx.Queue(c.Topic)
	}
	must(err)
	if c.Partition < 0 || c.Partition >= max(q.KafkaPartitions, 1) {
		return ProduceResult{Outcome: TopicUnknownPartition}
	}
	var queues queueCache
	part := p.partition(tx, meta, &queues, &q, strconv.Itoa(int(c.Partition)))
	res := ProduceResult{Outcome: TopicOK, BaseOffset: -1, LogStart: int64(part.StartOffset), AppendTimeMs: meta.ClockMs}

	// Decide every batch before appending any, so a refused idempotent
	// batch leaves the partition as it was (KIP-98).
	states := map[int64]*dedup.ProducerState{}
	var stateOrder []int64                    // first-use order, for deterministic writes
	appendAt := make([]int64, len(c.Batches)) // -1: a duplicate, not appended
	next := int64(part.NextOffset)
	var opened []store.OpenTxn // transactions that start on the partition in this entry
	for i, b := range c.Batches {
		base := next
		h, _ := recordbatch.ReadHeader(b.Raw)
		if h.Transactional {
			if outcome := checkTxnBatch(tx, c.Topic, c.Partition, b.ProducerID, b.ProducerEpoch); outcome != TopicOK {
				return ProduceResult{Outcome: outcome, BaseOffset: -1}
			}
		}
		if b.ProducerID >= 0 {
			st := states[b.ProducerID]
			if st == nil {
				loaded, found, err := tx.Producer(b.ProducerID, part.ID)
				must(err)
				if !found {
					loaded = dedup.ProducerState{Epoch: b.ProducerEpoch}
				}
				st = &loaded
				states[b.ProducerID] = st
				stateOrder = append(stateOrder, b.ProducerID)
			}
			verdict, dup := dedup.CheckSequence(*st, len(st.Batches) > 0, b.ProducerEpoch, b.FirstSequence, b.lastSequence(), meta.ClockMs)
			switch verdict {
			case dedup.OutOfOrder:
				return ProduceResult{Outcome: SequenceOutOfOrder, BaseOffset: -1}
			case dedup.StaleEpoch:
				return ProduceResult{Outcome: ProducerFenced, BaseOffset: -1}
			case dedup.DuplicateBatch:
				appendAt[i] = -1
				if i == 0 {
					res.BaseOffset = dup.BaseOffset
				}
				continue
			}
			*st = st.Record(b.ProducerEpoch, dedup.ProducerBatch{FirstSeq: b.FirstSequence, LastSeq: b.lastSequence(), BaseOffset: base}, meta.ClockMs)
		}
		appendAt[i] = base
		if h.Transactional && !slices.ContainsFunc(opened, func(o store.OpenTxn) bool { return o.ProducerID == b.ProducerID }) {
			_, open, err := tx.OpenTxn(part.ID, b.ProducerID)
			must(err)
			if !open {
				opened = append(opened, store.OpenTxn{ProducerID: b.ProducerID, FirstOffset: uint64(base)})
			}
		}
		if res.BaseOffset < 0 {
			res.BaseOffset = base
		}
		next += int64(b.NumRecords)
	}

	for i, b := range c.Batches {
		if appendAt[i] < 0 {
			continue
		}
		raw := recordbatch.Rebase(b.Raw, appendAt[i], p.leaderEpoch(meta))
		must(tx.PutBatch(q, part.ID, uint64(appendAt[i]), uint32(b.NumRecords), b.MaxTimestamp, meta.NextID, meta.ClockMs, raw))
	}
	for _, id := range stateOrder {
		must(tx.PutProducer(id, part.ID, *states[id]))
	}
	for _, o := range opened {
		must(tx.PutOpenTxn(part.ID, o.ProducerID, o.FirstOffset))
	}
	if next != int64(part.NextOffset) {
		part.NextOffset = uint64(next)
		must(tx.PutPartition(part))
		p.appended = append(p.appended, part.ID, q.ID)
	}
	queues.flush(tx)
	return res
}
