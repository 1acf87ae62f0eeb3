package fsm

import (
	"errors"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/dedup"
	"github.com/waggle-mq/waggle/store"
)

type groupPartition struct {
	group       string
	partitionID uint64
}

func (p *Processor) transaction(tx *store.Tx, meta *store.Meta, c *command.TransactionCommand) command.TransactionResult {
	now := meta.ClockMs
	rollback := func(reason, msg string) command.TransactionResult {
		return command.TransactionResult{Reason: reason, Error: msg}
	}

	// 1. Acks: every lease must be live and hold the message.
	targets := map[groupPartition]*ackTarget{}
	var targetOrder []groupPartition
	dlBytes := 0
	for _, op := range c.Ops {
		if op.Type != "ack" || op.Ack == nil {
			continue
		}
		k := groupPartition{op.Group, op.Ack.PartitionID}
		tg := targets[k]
		if tg == nil {
			var errText string
			if tg, errText = p.ackTarget(tx, op.Group, op.Ack.PartitionID); tg == nil {
				return rollback(command.RollbackRejectedAck, errText)
			}
			targets[k] = tg
			targetOrder = append(targetOrder, k)
		}
		l := tg.cur.LeaseByID(op.Ack.LeaseID)
		if l == nil || l.ExpiresAtMs <= now {
			return rollback(command.RollbackRejectedAck, "lease unknown or expired")
		}
		offset, ok := tg.leased(tx, meta, l, op.Ack.TransactionID)
		if !ok {
			return rollback(command.RollbackRejectedAck, "transactionId "+op.Ack.TransactionID+" is not in the lease")
		}
		// The commit below must not refuse a dead letter: bound what the
		// acks could dead-letter here (one is always taken).
		if wouldDeadLetter(tg, offset, op.Ack.Status) {
			size := deadLetter(tx, meta, tg.queue, tg.part, op.Group, offset, op.Ack.Error, 0).Size()
			if dlBytes > 0 && dlBytes+size > maxDeadLetterBytes {
				return rollback(command.RollbackRejectedAck, "the acks could dead-letter more than 2 MiB in one transaction: split it")
			}
			dlBytes += size
		}
	}

	// 2. Pushes: an id already stored in its window rolls back; one
	// repeated inside the transaction is stored once.
	var items []command.PushItem
	seen := map[[3]string]bool{}
	for _, op := range c.Ops {
		for _, it := range op.Items {
			items = append(items, it)
			k := [3]string{it.Queue, it.Partition, it.TransactionID}
			if seen[k] {
				continue
			}
			seen[k] = true
			if dup, err := storedInWindow(tx, now, it); err != nil {
				must(err)
			} else if dup {
				return rollback(command.RollbackDuplicate, "transactionId "+it.TransactionID+" is already stored in "+it.Queue+"/"+it.Partition)
			}
		}
	}

	// 3. KV, evaluated on an overlay and written only on commit.
	o := newKVOverlay(tx, now)
	kvResults, abort := evalKV(o, c.KV)
	if abort != nil {
		res := rollback(command.RollbackKVPrecondition, "a required KV operation did not apply")
		res.Abort = abort
		return res
	}

	// Commit: nothing below can refuse.
	res := command.TransactionResult{Success: true, KV: kvResults}
	for _, op := range c.Ops {
		if op.Type == "ack" && op.Ack != nil {
			ar := p.ackOne(tx, meta, op.Group, targets[groupPartition{op.Group, op.Ack.PartitionID}], *op.Ack)
			res.Ops = append(res.Ops, command.TxnOpResult{Ack: &ar})
		} else {
			res.Ops = append(res.Ops, command.TxnOpResult{})
		}
	}
	for _, k := range targetOrder {
		must(tx.PutCursor(k.group, targets[k].cur, meta.NextID))
	}
	if len(items) > 0 {
		pushed := p.push(tx, meta, &command.PushCommand{NowMs: now, Items: items})
		i := 0
		for j, op := range c.Ops {
			if n := len(op.Items); n > 0 {
				res.Ops[j].Push = pushed[i : i+n]
				i += n
			}
		}
	}
	o.flush()
	for _, t := range c.Timers {
		res.Timers = append(res.Timers, applyTimer(tx, now, t))
	}
	return res
}

// storedInWindow reports whether a push of it would be a duplicate of a
// message stored before (not counting this transaction).
func storedInWindow(tx *store.Tx, now int64, it command.PushItem) (bool, error) {
	q, err := tx.Queue(it.Queue)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil || q.DedupWindowSeconds <= 0 {
		return false, err
	}
	part, err := tx.Partition(q.ID, it.Partition)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	prev, found, err := tx.Dedup(part.ID, it.TransactionID)
	return dedup.IsDuplicate(prev, found, q.DedupWindowSeconds*1000, now), err
}
