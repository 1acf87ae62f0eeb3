package raftfsm

import (
	"errors"
	"fmt"

	"github.com/waggle-mq/waggle/dedup"
	"github.com/waggle-mq/waggle/store"
)

// Processor applies decoded commands to a store transaction. It is the whole
// state machine without raft: the FSM feeds it committed entries, and tests
// or recovery tools can replay entries through it directly.
//
// Everything it does is a function of the store and the entry: no clock, no
// randomness, no map iteration, no local configuration.
type Processor struct{}

// Apply applies one command entry and returns its answer. meta is updated in
// place (replicated clock, id counter); the caller stores it. An entry that
// does not decode, or a store that fails, panics: replicas must never
// diverge, and a restart replays the entry from the raft log.
func (p *Processor) Apply(tx *store.Tx, meta *store.Meta, data []byte) any {
	if len(data) == 0 {
		panic("raftfsm: empty command entry")
	}
	switch CommandType(data[0]) {
	case CmdPush:
		cmd, err := decodePush(data[1:])
		mustDecode(err, data)
		advanceClock(meta, cmd.NowMs)
		return p.push(tx, meta, cmd)
	case CmdConfigureQueue:
		cmd, err := decodeConfigureQueue(data[1:])
		mustDecode(err, data)
		advanceClock(meta, cmd.NowMs)
		return p.configure(tx, meta, cmd)
	case CmdPruneDedup:
		cmd, err := decodePruneDedup(data[1:])
		mustDecode(err, data)
		advanceClock(meta, cmd.NowMs)
		n, err := tx.PruneDedup(meta.ClockMs, cmd.Limit)
		must(err)
		return PruneDedupResult{Removed: n}
	case CmdRegisterNode:
		cmd, err := decodeRegisterNode(data[1:])
		mustDecode(err, data)
		must(tx.PutNode(cmd.Node))
		return nil
	case CmdForgetNode:
		cmd, err := decodeForgetNode(data[1:])
		mustDecode(err, data)
		must(tx.DeleteNode(cmd.ID))
		return nil
	default:
		panic(fmt.Sprintf("raftfsm: unknown command type %d (entry from a newer binary?)", data[0]))
	}
}

func mustDecode(err error, data []byte) {
	if err != nil {
		panic(fmt.Sprintf("raftfsm: undecodable command type %d (%d bytes): %v", data[0], len(data), err))
	}
}

func must(err error) {
	if err != nil {
		panic(fmt.Sprintf("raftfsm: store failed during apply: %v", err))
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
type pushTarget struct {
	queue store.Queue
	part  store.Partition
}

func (p *Processor) push(tx *store.Tx, meta *store.Meta, cmd *PushCommand) []PushResult {
	now := meta.ClockMs
	results := make([]PushResult, len(cmd.Items))
	targets := map[[2]string]*pushTarget{}
	var touched []*pushTarget // in first-use order, for deterministic writes
	var seen dedup.Request

	for i := range cmd.Items {
		it := &cmd.Items[i]
		if len(it.TransactionID) > dedup.MaxIDBytes {
			results[i] = PushResult{Status: PushRejected, Error: "transactionId longer than 65535 bytes"}
			continue
		}
		key := [2]string{it.Queue, it.Partition}
		tg := targets[key]
		if tg == nil {
			tg = p.target(tx, meta, it.Queue, it.Partition)
			targets[key] = tg
			touched = append(touched, tg)
		}
		pid := tg.part.ID
		if prev, ok := seen.Seen(pid, it.TransactionID); ok {
			results[i] = PushResult{Status: PushDuplicate, Offset: prev.Offset, MessageID: prev.MessageID}
			continue
		}
		windowMs := tg.queue.DedupWindowSeconds * 1000
		var replaced *dedup.Entry
		if windowMs > 0 {
			prev, found, err := tx.Dedup(pid, it.TransactionID)
			must(err)
			if dedup.IsDuplicate(prev, found, windowMs, now) {
				results[i] = PushResult{Status: PushDuplicate, Offset: prev.Offset, MessageID: prev.MessageID}
				continue
			}
			if found { // expired but not yet pruned: replaced below
				replaced = &prev
			}
		}

		offset := tg.part.NextOffset
		tg.part.NextOffset++
		must(tx.PutMessage(pid, store.Message{
			Offset:        offset,
			ID:            it.MessageID,
			TimestampMs:   now,
			TransactionID: it.TransactionID,
			Payload:       it.Payload,
		}))
		entry := dedup.Entry{Offset: offset, MessageID: it.MessageID, StoredAtMs: now, ExpiresAtMs: now + windowMs}
		if windowMs > 0 {
			must(tx.PutDedup(pid, it.TransactionID, entry, replaced))
		}
		seen.Remember(pid, it.TransactionID, entry)
		results[i] = PushResult{Status: PushQueued, Offset: offset, MessageID: it.MessageID}
	}

	for _, tg := range touched {
		must(tx.PutPartition(tg.part))
	}
	return results
}

// target finds or creates the queue and partition a push names.
func (p *Processor) target(tx *store.Tx, meta *store.Meta, queue, partition string) *pushTarget {
	q, err := tx.Queue(queue)
	if errors.Is(err, store.ErrNotFound) {
		q = newQueue(meta, queue)
		err = tx.PutQueue(q)
	}
	must(err)
	part, err := tx.Partition(q.ID, partition)
	if errors.Is(err, store.ErrNotFound) {
		part = store.Partition{ID: meta.NextID, QueueID: q.ID, Name: partition}
		meta.NextID++
		err = tx.CreatePartition(part)
	}
	must(err)
	return &pushTarget{queue: q, part: part}
}

func newQueue(meta *store.Meta, name string) store.Queue {
	q := store.Queue{
		ID:                 meta.NextID,
		Name:               name,
		DedupWindowSeconds: DefaultDedupWindowSeconds,
		CreatedAtMs:        meta.ClockMs,
	}
	meta.NextID++
	return q
}

func (p *Processor) configure(tx *store.Tx, meta *store.Meta, cmd *ConfigureQueueCommand) ConfigureQueueResult {
	q, err := tx.Queue(cmd.Queue)
	if errors.Is(err, store.ErrNotFound) {
		q, err = newQueue(meta, cmd.Queue), nil
	}
	must(err)
	if cmd.DedupWindowSeconds != nil {
		q.DedupWindowSeconds = *cmd.DedupWindowSeconds
	}
	must(tx.PutQueue(q))
	return ConfigureQueueResult{Queue: q}
}
