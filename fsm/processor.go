package fsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/dedup"
	"github.com/waggle-mq/waggle/store"
)

// Processor applies decoded commands to a store transaction. It is the whole
// state machine without raft: the FSM feeds it committed entries, and tests
// or recovery tools can replay entries through it directly.
//
// Everything it does is a function of the store and the entry: no clock, no
// randomness, no map iteration, no local configuration.
type Processor struct {
	// appended collects the partitions that entries appended to since the
	// FSM last took them, for waking readers; it is not state.
	appended []uint64
	// deadLetterBytes counts what the current entry copied into dead
	// letters (see maxDeadLetterBytes).
	deadLetterBytes int
	// term is the raft term of the entry being applied (set by the FSM;
	// every replica sees the same). Kafka batches appended by the entry
	// carry it as their partition leader epoch (KIP-101).
	term uint64
	// index and entry are the raft index and data of the entry being
	// applied (set by the FSM): from log format 5 a Kafka batch stays in
	// the entry and the store keeps a ref to it (store.BatchRef).
	index uint64
	entry []byte
	// anomaly, when set, is told of state a consistent store never holds
	// (see FSM.Anomaly).
	anomaly func(msg string, args ...any)
}

// Apply applies one command entry and returns its answer. meta is updated in
// place (replicated clock, id counter); the caller stores it. A cleanup
// entry needs a transaction with nothing written yet (see
// store.Tx.CleanUp); the FSM commits before one. An entry that
// does not decode, or a store that fails, panics: replicas must never
// diverge, and a restart replays the entry from the raft log.
func (p *Processor) Apply(tx *store.Tx, meta *store.Meta, data []byte) any {
	if len(data) == 0 {
		panic("fsm: empty command entry")
	}
	h := handlers[command.CommandType(data[0])]
	if h == nil {
		panic(fmt.Sprintf("fsm: unknown command type %d: the entry needs a newer waggle than this one (log format %d); run the cluster's version on this node", data[0], command.MaxLogFormat))
	}
	p.deadLetterBytes = 0
	return h(p, tx, meta, data)
}

// handler applies one command entry (type byte included).
type handler func(p *Processor, tx *store.Tx, meta *store.Meta, data []byte) any

// handlers is every command type's handler, registered once in init.
var handlers = map[command.CommandType]handler{}

// answerDecoders read back, per command type, an answer recorded as JSON
// (a keyed request's outcome, requests.go) as the type the command
// declares.
var answerDecoders = map[command.CommandType]func([]byte) (any, error){}

// register adds what applying a command type does: the leader-stamped
// time in it (nil for commands that carry none) and the apply function,
// which returns the answer the command declares (Answering). The type's
// decoder is registered with the codec (registerCodec). A type registered
// twice, or without a decoder, panics at start-up.
func register[C, R any, PC interface {
	*C
	command.Answering[R]
}](t command.CommandType, stamp func(PC) int64, apply func(*Processor, *store.Tx, *store.Meta, PC) R) {
	if _, dup := handlers[t]; dup {
		panic(fmt.Sprintf("fsm: command type %d registered twice", t))
	}
	if !command.KnownCommand(t) {
		panic(fmt.Sprintf("fsm: command type %d has no decoder", t))
	}
	answerDecoders[t] = func(b []byte) (any, error) {
		var r R
		err := json.Unmarshal(b, &r)
		return r, err
	}
	handlers[t] = func(p *Processor, tx *store.Tx, meta *store.Meta, data []byte) any {
		c, err := command.DecodeCommand(data)
		mustDecode(err, data)
		cmd := c.(PC)
		if stamp != nil {
			advanceClock(meta, stamp(cmd))
		}
		return apply(p, tx, meta, cmd)
	}
}

func init() {
	register(command.CmdPush, func(c *command.PushCommand) int64 { return c.NowMs }, (*Processor).push)
	register(command.CmdConfigureQueue, func(c *command.ConfigureQueueCommand) int64 { return c.NowMs }, (*Processor).configure)
	register(command.CmdPruneDedup, func(c *command.PruneDedupCommand) int64 { return c.NowMs }, (*Processor).pruneDedup)
	register(command.CmdRegisterNode, nil, (*Processor).registerNode)
	register(command.CmdForgetNode, nil, (*Processor).forgetNode)
	register(command.CmdCreateTopic, func(c *command.CreateTopicCommand) int64 { return c.NowMs }, (*Processor).createTopic)
	register(command.CmdProduce, func(c *command.ProduceCommand) int64 { return c.NowMs }, (*Processor).produce)
	register(command.CmdAddPartitions, nil, (*Processor).addPartitions)
	register(command.CmdDeleteQueue, nil, (*Processor).deleteQueue)
	register(command.CmdNewProducerID, nil, (*Processor).newProducerID)
	register(command.CmdCommitOffsets, func(c *command.CommitOffsetsCommand) int64 { return c.NowMs }, (*Processor).commitOffsets)
	register(command.CmdDeleteOffsets, nil, (*Processor).deleteOffsets)
	register(command.CmdPop, func(c *command.PopCommand) int64 { return c.NowMs }, (*Processor).pop)
	register(command.CmdAck, func(c *command.AckCommand) int64 { return c.NowMs }, (*Processor).ack)
	register(command.CmdExtendLease, func(c *command.ExtendLeaseCommand) int64 { return c.NowMs }, (*Processor).extendLease)
	register(command.CmdSeek, func(c *command.SeekCommand) int64 { return c.NowMs }, (*Processor).seek)
	register(command.CmdKVJSON, func(c *command.KVCommand) int64 { return c.NowMs }, (*Processor).kvCall)
	register(command.CmdTransactionJSON, func(c *command.TransactionCommand) int64 { return c.NowMs }, (*Processor).transaction)
	register(command.CmdTimersJSON, func(c *command.TimersCommand) int64 { return c.NowMs }, (*Processor).timers)
	register(command.CmdTickJSON, func(c *command.TickCommand) int64 { return c.NowMs }, (*Processor).tick)
	register(command.CmdCleanup, nil, (*Processor).cleanup)
	register(command.CmdRetain, func(c *command.RetainCommand) int64 { return c.NowMs }, (*Processor).retain)
	register(command.CmdKV, func(c *command.KVCommand) int64 { return c.NowMs }, (*Processor).kvCall)
	register(command.CmdTransaction, func(c *command.TransactionCommand) int64 { return c.NowMs }, (*Processor).transaction)
	register(command.CmdTimers, func(c *command.TimersCommand) int64 { return c.NowMs }, (*Processor).timers)
	register(command.CmdTick, func(c *command.TickCommand) int64 { return c.NowMs }, (*Processor).tick)
	register(command.CmdSetLogFormat, nil, (*Processor).setLogFormat)
	register(command.CmdAlterTopic, nil, (*Processor).alterTopic)
	register(command.CmdDeleteRecords, nil, (*Processor).deleteRecords)
	register(command.CmdInitTxnProducer, func(c *command.InitTxnProducerCommand) int64 { return c.NowMs }, (*Processor).initTxnProducer)
	register(command.CmdAddToTxn, func(c *command.AddToTxnCommand) int64 { return c.NowMs }, (*Processor).addToTxn)
	register(command.CmdTxnOffsetCommit, func(c *command.TxnOffsetCommitCommand) int64 { return c.NowMs }, (*Processor).txnOffsetCommit)
	register(command.CmdEndTxn, func(c *command.EndTxnCommand) int64 { return c.NowMs }, (*Processor).endTxnCommand)
	register(command.CmdEndTxnBump, func(c *command.EndTxnBumpCommand) int64 { return c.NowMs }, (*Processor).endTxnBump)
	register(command.CmdAlterACLs, nil, (*Processor).alterACLs)
	register(command.CmdForgetTxns, func(c *command.ForgetTxnsCommand) int64 { return c.NowMs }, (*Processor).forgetTxns)
	register(command.CmdCompact, func(c *command.CompactCommand) int64 { return c.NowMs }, (*Processor).compact)
	register(command.CmdReplayDeadLetter, func(c *command.ReplayDeadLetterCommand) int64 { return c.NowMs }, (*Processor).replayDeadLetter)
	register(command.CmdDeleteDeadLetters, nil, (*Processor).deleteDeadLetters)
	register(command.CmdKeyed, func(c *command.KeyedCommand) int64 { return c.NowMs }, (*Processor).keyed)
	register(command.CmdPruneRequests, func(c *command.PruneRequestsCommand) int64 { return c.NowMs }, (*Processor).pruneRequests)
	register(command.CmdSeedIDs, nil, (*Processor).seedIDs)
	register(command.CmdPreferLeader, nil, (*Processor).preferLeader)
	register(command.CmdSetReplicas, nil, (*Processor).setReplicas)
	register(command.CmdSaveClassicGroup, nil, (*Processor).saveClassicGroup)
	register(command.CmdAlterGroupConfig, nil, (*Processor).alterGroupConfig)
	register(command.CmdShareAcquire, func(c *command.ShareAcquireCommand) int64 { return c.NowMs }, (*Processor).shareAcquire)
	register(command.CmdShareAck, func(c *command.ShareAckCommand) int64 { return c.NowMs }, (*Processor).shareAck)
	register(command.CmdShareAcquireShared, func(c *command.ShareAcquireCommand) int64 { return c.NowMs }, (*Processor).shareAcquire)
}

func (p *Processor) pruneDedup(tx *store.Tx, meta *store.Meta, c *command.PruneDedupCommand) command.PruneDedupResult {
	n, err := tx.PruneDedup(meta.ClockMs, c.Limit)
	must(err)
	return command.PruneDedupResult{Removed: n}
}

func (p *Processor) registerNode(tx *store.Tx, _ *store.Meta, c *command.RegisterNodeCommand) any {
	must(tx.PutNode(c.Node))
	return nil
}

func (p *Processor) forgetNode(tx *store.Tx, _ *store.Meta, c *command.ForgetNodeCommand) any {
	must(tx.DeleteNode(c.ID))
	return nil
}

func (p *Processor) newProducerID(_ *store.Tx, meta *store.Meta, _ *command.NewProducerIDCommand) int64 {
	id := int64(meta.NextID)
	meta.NextID++
	return id
}

func (p *Processor) timers(tx *store.Tx, meta *store.Meta, c *command.TimersCommand) []command.TimerResult {
	out := make([]command.TimerResult, len(c.Ops))
	for i, op := range c.Ops {
		out[i] = applyTimer(tx, meta.ClockMs, op)
	}
	return out
}

func mustDecode(err error, data []byte) {
	if err != nil {
		panic(fmt.Sprintf("fsm: undecodable command type %d (%d bytes): %v", data[0], len(data), err))
	}
}

func must(err error) {
	if err != nil {
		panic(fmt.Sprintf("fsm: store failed during apply: %v", err))
	}
}

// advanceClock moves the replicated clock to the entry's stamped time, never
// backwards: a new leader whose wall clock lags must not make stored ids
// look younger than they are.
func advanceClock(meta *store.Meta, stampedMs int64) {
	if stampedMs > meta.ClockMs {
		meta.ClockMs = stampedMs
	}
}

// pushTarget caches one partition and its queue while a push entry applies.
// From log format 3 it also collects what the entry stores there, written
// once the entry's items are decided: one batch of messages, and the
// dedup records of their transactionIds under one expiry index entry.
type pushTarget struct {
	queue *store.Queue
	part  store.Partition

	msgs   []store.Message
	ids    []string
	dedups []dedup.Entry
}

// queueCache holds the queues one entry touches, writing back the ones it
// changed in first-use order (deterministic).
type queueCache struct {
	byName map[string]*store.Queue
	dirty  []*store.Queue
}

func (c *queueCache) get(tx *store.Tx, meta *store.Meta, name string) *store.Queue {
	if q := c.byName[name]; q != nil {
		return q
	}
	q, err := tx.Queue(name)
	created := errors.Is(err, store.ErrNotFound)
	if created {
		q, err = newQueue(meta, name, command.DefaultDedupWindowSeconds, 1), nil
	}
	must(err)
	if c.byName == nil {
		c.byName = map[string]*store.Queue{}
	}
	c.byName[name] = &q
	if created {
		c.dirty = append(c.dirty, &q)
	}
	return &q
}

func (c *queueCache) markDirty(q *store.Queue) {
	for _, d := range c.dirty {
		if d == q {
			return
		}
	}
	c.dirty = append(c.dirty, q)
}

func (c *queueCache) flush(tx *store.Tx) {
	for _, q := range c.dirty {
		must(tx.PutQueue(*q))
	}
}

func (p *Processor) push(tx *store.Tx, meta *store.Meta, cmd *command.PushCommand) []command.PushResult {
	now := meta.ClockMs
	results := make([]command.PushResult, len(cmd.Items))
	var queues queueCache
	targets := map[[2]string]*pushTarget{}
	var touched []*pushTarget // in first-use order, for deterministic writes
	var seen dedup.Request
	batched := effectiveLogFormat(*meta) >= command.LogFormat3
	logged := effectiveLogFormat(*meta) >= command.LogFormat4

	for i := range cmd.Items {
		it := &cmd.Items[i]
		if len(it.TransactionID) > dedup.MaxIDBytes {
			results[i] = command.PushResult{Status: command.PushRejected, Error: "transactionId longer than 65535 bytes"}
			continue
		}
		key := [2]string{it.Queue, it.Partition}
		tg := targets[key]
		if tg == nil && len(touched) == command.MaxPushTargets {
			results[i] = command.PushResult{Status: command.PushRejected, Error: fmt.Sprintf("a push reaches at most %d partitions", command.MaxPushTargets)}
			continue
		}
		if tg == nil {
			q := queues.get(tx, meta, it.Queue)
			tg = &pushTarget{queue: q, part: p.partition(tx, meta, &queues, q, it.Partition)}
			targets[key] = tg
			touched = append(touched, tg)
		}
		pid := tg.part.ID
		if prev, ok := seen.Seen(pid, it.TransactionID); ok {
			results[i] = command.PushResult{Status: command.PushDuplicate, Offset: prev.Offset, MessageID: prev.MessageID}
			continue
		}
		windowMs := tg.queue.DedupWindowSeconds * 1000
		if windowMs > 0 {
			prev, found, err := tx.Dedup(pid, it.TransactionID)
			must(err)
			if dedup.IsDuplicate(prev, found, windowMs, now) {
				if prev.Offset >= tg.part.NextOffset && p.anomaly != nil {
					// The record is written with the message in one
					// transaction: a record ahead of its partition means
					// the store lost the message, or applied the entry
					// that wrote the record without its partition.
					p.anomaly("a transactionId's dedup record names an offset its partition has not reached",
						"index", p.index, "partition", pid, "transactionId", it.TransactionID, "offset", prev.Offset, "next", tg.part.NextOffset)
				}
				results[i] = command.PushResult{Status: command.PushDuplicate, Offset: prev.Offset, MessageID: prev.MessageID}
				continue
			}
		}

		offset := tg.part.NextOffset
		tg.part.NextOffset++
		m := store.Message{
			Offset:        offset,
			ID:            it.MessageID,
			TimestampMs:   now,
			TransactionID: it.TransactionID,
			Payload:       it.Payload,
			AppendSeq:     meta.NextID,
		}
		entry := dedup.Entry{Offset: offset, MessageID: it.MessageID, StoredAtMs: now, ExpiresAtMs: now + windowMs}
		switch {
		case batched:
			tg.msgs = append(tg.msgs, m)
			if windowMs > 0 {
				tg.ids, tg.dedups = append(tg.ids, it.TransactionID), append(tg.dedups, entry)
			}
		default:
			must(tx.PutMessage(*tg.queue, pid, m))
			if windowMs > 0 {
				must(tx.PutDedup(pid, it.TransactionID, entry))
			}
		}
		seen.Remember(pid, it.TransactionID, entry)
		results[i] = command.PushResult{Status: command.PushQueued, Offset: offset, MessageID: it.MessageID}
	}

	for _, tg := range touched {
		if len(tg.msgs) > 0 {
			if ats, ok := p.payloadsInEntry(meta, tg.msgs); ok && !tg.queue.Compacts() {
				must(tx.PutMessageRefs(*tg.queue, tg.part.ID, tg.msgs, p.index, ats))
			} else {
				must(tx.PutMessages(*tg.queue, tg.part.ID, tg.msgs))
			}
		}
		switch {
		case len(tg.ids) > 0 && logged:
			must(tx.PutDedupLog(tg.part.ID, tg.queue.DedupWindowSeconds*1000, tg.ids, tg.dedups))
		case len(tg.ids) > 0:
			must(tx.PutDedupGroup(tg.part.ID, tg.ids, tg.dedups))
		}
		must(tx.PutPartition(tg.part))
		// Wake readers of the partition and poppers of the whole queue.
		p.appended = append(p.appended, tg.part.ID, tg.queue.ID)
	}
	queues.flush(tx)
	return results
}

// maxKafkaPartitions bounds a queue's Kafka partition count.
const maxKafkaPartitions = 10_000

// partition finds or creates a queue's partition by name. A new partition
// named like a Kafka partition ("7") widens the queue's Kafka view to
// include it, so HTTP-pushed partitions are visible as Kafka partitions.
func (p *Processor) partition(tx *store.Tx, meta *store.Meta, queues *queueCache, q *store.Queue, name string) store.Partition {
	part, err := tx.Partition(q.ID, name)
	if errors.Is(err, store.ErrNotFound) {
		part, err = store.Partition{ID: meta.NextID, QueueID: q.ID, Name: name}, nil
		meta.NextID++
		must(tx.CreatePartition(part))
		// Readers waiting on a partition that did not exist yet wait on
		// its queue's id (ids of queues and partitions never collide).
		p.appended = append(p.appended, q.ID)
		if n, ok := kafkaPartitionIndex(name); ok && n >= q.KafkaPartitions {
			q.KafkaPartitions = n + 1
			queues.markDirty(q)
		}
	}
	must(err)
	return part
}

// kafkaPartitionIndex parses a partition name written as Kafka would
// write the number: canonical decimal, below maxKafkaPartitions.
func kafkaPartitionIndex(name string) (int32, bool) {
	n, err := strconv.Atoi(name)
	if err != nil || n < 0 || n >= maxKafkaPartitions || strconv.Itoa(n) != name {
		return 0, false
	}
	return int32(n), true
}

func newQueue(meta *store.Meta, name string, dedupWindowSeconds int64, kafkaPartitions int32) store.Queue {
	q := store.Queue{
		ID:                 meta.NextID,
		Name:               name,
		DedupWindowSeconds: dedupWindowSeconds,
		CreatedAtMs:        meta.ClockMs,
		KafkaPartitions:    kafkaPartitions,
	}
	meta.NextID++
	return q
}

func (p *Processor) configure(tx *store.Tx, meta *store.Meta, cmd *command.ConfigureQueueCommand) command.ConfigureQueueResult {
	q, err := tx.Queue(cmd.Queue)
	if errors.Is(err, store.ErrNotFound) {
		q, err = newQueue(meta, cmd.Queue, command.DefaultDedupWindowSeconds, 1), nil
	}
	must(err)
	o := cmd.Options
	if o.DedupWindowSeconds != nil {
		q.DedupWindowSeconds = *o.DedupWindowSeconds
	}
	q.LeaseTimeSeconds = keep(q.LeaseTimeSeconds, o.LeaseTimeSeconds)
	q.RetryLimit = keep(q.RetryLimit, o.RetryLimit)
	q.DeadLetterQueue = keep(q.DeadLetterQueue, o.DeadLetterQueue)
	q.DelayedProcessingSeconds = keep(q.DelayedProcessingSeconds, o.DelayedProcessingSeconds)
	if r := o.RetentionSeconds; r != nil {
		q.RetentionMs = -1 // for ever
		if *r > 0 {
			q.RetentionMs = *r * 1000
		}
	}
	if r := o.CompletedRetentionSeconds; r != nil {
		q.CompletedRetentionMs = max(*r, 0) * 1000
	}
	if n := o.KafkaPartitions; n != nil && *n > q.KafkaPartitions && *n <= maxKafkaPartitions {
		var queues queueCache
		for i := range *n { // creates the missing ones, "0" included
			p.partition(tx, meta, &queues, &q, strconv.Itoa(int(i)))
		}
		q.KafkaPartitions = *n
	}
	must(tx.PutQueue(q))
	return command.ConfigureQueueResult{Queue: q}
}

// keep returns the new option when set, else the current one.
func keep[T any](current, next *T) *T {
	if next != nil {
		return next
	}
	return current
}
