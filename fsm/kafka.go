package fsm

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"unsafe"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/dedup"
	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

func (p *Processor) createTopic(tx *store.Tx, meta *store.Meta, c *command.CreateTopicCommand) command.TopicOutcome {
	if _, err := tx.Queue(c.Name); err == nil {
		return command.TopicExists
	} else if !errors.Is(err, store.ErrNotFound) {
		must(err)
	}
	if c.Partitions < 1 || c.Partitions > maxKafkaPartitions {
		return command.TopicInvalidPartitions
	}
	q := newQueue(meta, c.Name, 0, c.Partitions)
	q.RetentionMs, q.MaxMessageBytes = c.RetentionMs, c.MaxMessageBytes
	q.SegmentBytes, q.SegmentMs, q.KafkaCreated = c.SegmentBytes, c.SegmentMs, true
	q.RetentionBytes = c.RetentionBytes
	if !command.ApplyTopicSettings(&q, c.Settings) {
		return command.TopicInvalidConfig
	}
	var queues queueCache
	for i := range c.Partitions {
		p.partition(tx, meta, &queues, &q, strconv.Itoa(int(i)))
	}
	must(tx.PutQueue(q))
	return command.TopicOK
}

func (p *Processor) addPartitions(tx *store.Tx, meta *store.Meta, c *command.AddPartitionsCommand) command.TopicOutcome {
	q, err := tx.Queue(c.Name)
	if errors.Is(err, store.ErrNotFound) {
		return command.TopicUnknown
	}
	must(err)
	if c.Count <= max(q.KafkaPartitions, 1) || c.Count > maxKafkaPartitions {
		return command.TopicInvalidPartitions // Kafka only ever grows a topic
	}
	var queues queueCache
	for i := q.KafkaPartitions; i < c.Count; i++ {
		p.partition(tx, meta, &queues, &q, strconv.Itoa(int(i)))
	}
	q.KafkaPartitions = c.Count
	must(tx.PutQueue(q))
	return command.TopicOK
}

// deleteQueue makes the queue unreachable at once (its name is free again)
// and files a tombstone; cleanup entries remove its data in bounded steps.
func (p *Processor) deleteQueue(tx *store.Tx, meta *store.Meta, c *command.DeleteQueueCommand) command.TopicOutcome {
	q, err := tx.Queue(c.Name)
	if errors.Is(err, store.ErrNotFound) {
		return command.TopicUnknown
	}
	must(err)
	must(tx.DeleteQueue(q, meta.NextID))
	meta.NextID++
	return command.TopicOK
}

// leaderEpoch is the Kafka partition leader epoch of what the current
// entry appends: its raft term (broker.Service.LeaderEpoch), held at the
// largest int32. A cluster still at log format 1 writes 0, as release
// v0.1.0 does, so replicas of both releases store the same bytes during a
// rolling upgrade; so does a processor used without an FSM.
func (p *Processor) leaderEpoch(meta *store.Meta) int32 {
	if effectiveLogFormat(*meta) < command.LogFormat2 {
		return 0
	}
	return int32(min(p.term, math.MaxInt32))
}

// inEntry returns where raw, bytes decoded from the entry being applied (a
// Kafka batch, a payload), lie in the entry's data, when the store is to
// keep a ref to them there (log format 5 on; a processor used without an
// FSM has no entry).
func (p *Processor) inEntry(meta *store.Meta, raw []byte) (int, bool) {
	if effectiveLogFormat(*meta) < command.LogFormat5 || len(p.entry) == 0 || len(raw) == 0 {
		return 0, false
	}
	// The decoder slices the entry without copying (command.decoder.bytes).
	start := uintptr(unsafe.Pointer(unsafe.SliceData(p.entry)))
	at := uintptr(unsafe.Pointer(unsafe.SliceData(raw)))
	if at < start || at+uintptr(len(raw)) > start+uintptr(len(p.entry)) {
		return 0, false
	}
	return int(at - start), true
}

// payloadsInEntry returns where each message's payload lies in the entry
// being applied, when all do (a fired timer's or a replayed dead letter's
// come from the store, and are written into the segment).
func (p *Processor) payloadsInEntry(meta *store.Meta, msgs []store.Message) ([]uint32, bool) {
	ats := make([]uint32, len(msgs))
	for i, m := range msgs {
		at, ok := p.inEntry(meta, m.Payload)
		if !ok {
			return nil, false
		}
		ats[i] = uint32(at)
	}
	return ats, true
}

func (p *Processor) produce(tx *store.Tx, meta *store.Meta, c *command.ProduceCommand) command.ProduceResult {
	q, err := tx.Queue(c.Topic)
	if errors.Is(err, store.ErrNotFound) {
		if c.AutoCreatePartitions <= 0 {
			return command.ProduceResult{Outcome: command.TopicUnknown}
		}
		if p.createTopic(tx, meta, &command.CreateTopicCommand{Name: c.Topic, Partitions: c.AutoCreatePartitions}) != command.TopicOK {
			return command.ProduceResult{Outcome: command.TopicInvalidPartitions}
		}
		q, err = tx.Queue(c.Topic)
	}
	must(err)
	if c.Partition < 0 || c.Partition >= max(q.KafkaPartitions, 1) {
		return command.ProduceResult{Outcome: command.TopicUnknownPartition}
	}
	var queues queueCache
	part := p.partition(tx, meta, &queues, &q, strconv.Itoa(int(c.Partition)))
	res := command.ProduceResult{Outcome: command.TopicOK, BaseOffset: -1, LogStart: int64(part.StartOffset), AppendTimeMs: meta.ClockMs}

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
			if outcome := checkTxnBatch(tx, c.Topic, c.Partition, b.ProducerID, b.ProducerEpoch); outcome != command.TopicOK {
				return command.ProduceResult{Outcome: outcome, BaseOffset: -1}
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
			verdict, dup := dedup.CheckSequence(*st, len(st.Batches) > 0, b.ProducerEpoch, b.FirstSequence, b.LastSequence(), meta.ClockMs)
			switch verdict {
			case dedup.OutOfOrder:
				return command.ProduceResult{Outcome: command.SequenceOutOfOrder, BaseOffset: -1}
			case dedup.StaleEpoch:
				return command.ProduceResult{Outcome: command.ProducerFenced, BaseOffset: -1}
			case dedup.DuplicateBatch:
				appendAt[i] = -1
				if i == 0 {
					res.BaseOffset = dup.BaseOffset
				}
				continue
			}
			*st = st.Record(b.ProducerEpoch, dedup.ProducerBatch{FirstSeq: b.FirstSequence, LastSeq: b.LastSequence(), BaseOffset: base}, meta.ClockMs)
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
		base, epoch := uint64(appendAt[i]), p.leaderEpoch(meta)
		// A compacted topic's batches are written into its segments: its
		// cleaner weighs and rewrites segment bytes.
		if at, ok := p.inEntry(meta, b.Raw); ok && !q.Compacts() {
			ref := store.BatchRef{Index: p.index, At: uint32(at), Length: uint32(len(b.Raw)), Epoch: epoch}
			must(tx.PutBatchRef(q, part.ID, base, uint32(b.NumRecords), b.MaxTimestamp, meta.NextID, meta.ClockMs, ref))
			continue
		}
		raw := recordbatch.Rebase(b.Raw, appendAt[i], epoch)
		must(tx.PutBatch(q, part.ID, base, uint32(b.NumRecords), b.MaxTimestamp, meta.NextID, meta.ClockMs, raw))
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
