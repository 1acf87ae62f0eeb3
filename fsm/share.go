package fsm

import (
	"errors"
	"fmt"
	"slices"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// Kafka share groups (KIP-932) on the leases of HTTP pops: acquiring is a
// pop of each named partition (from log format 11, a take beside other
// members' leases), acknowledging acks offsets of the member's leases. The
// mapping of acknowledgement kinds: accept and gap finish a record, reject
// dead-letters it (where the queue keeps dead letters; otherwise it is
// dropped), release gives it back for another delivery; a record that has
// been delivered the group's delivery limit of times is archived at its
// next acquisition, as Kafka archives it when it comes back.

func (p *Processor) shareAcquire(tx *store.Tx, meta *store.Meta, c *command.ShareAcquireCommand) command.ShareAcquireResult {
	if _, err := tx.Queue(c.Queue); errors.Is(err, store.ErrNotFound) {
		return command.ShareAcquireResult{Error: "unknown queue"}
	} else {
		must(err)
	}
	if c.MaxLocks > 0 {
		return p.shareAcquireShared(tx, meta, c)
	}
	var out command.ShareAcquireResult
	left := c.Batch
	for i, name := range c.Partitions {
		if left <= 0 || i >= len(c.LeaseIDs) {
			break
		}
		pop := command.PopCommand{NowMs: c.NowMs, Group: c.Group, Queue: c.Queue, Partition: name, Batch: left,
			LeaseMs: c.LeaseMs, FromNew: c.FromNew, LeaseID: c.LeaseIDs[i]}
		if res := p.popWith(tx, meta, &pop, c.MaxDeliveries, c.FromMs); len(res.Offsets) > 0 {
			out.Leases = append(out.Leases, res)
			left -= len(res.Offsets)
		}
	}
	return out
}

// shareAcquireShared leases to the member, partition by partition, the
// records no other lease holds and no one finished, among the MaxLocks
// from the group's position on (Kafka's share-partition): members hold a
// partition's records side by side. Expired leases are settled first.
// Leases taken here stay out of the lease index (store.SharedLeasePrefix),
// so settling any number of them writes nothing but the cursor.
func (p *Processor) shareAcquireShared(tx *store.Tx, meta *store.Meta, c *command.ShareAcquireCommand) command.ShareAcquireResult {
	q, err := tx.Queue(c.Queue)
	if errors.Is(err, store.ErrNotFound) {
		return command.ShareAcquireResult{Error: "unknown queue"}
	}
	must(err)
	view := subscribe(tx, meta, c.Group, q, c.FromNew, c.FromMs)
	now, delayMs, leaseMs := meta.ClockMs, command.DelaySeconds(q)*1000, c.LeaseMs
	if leaseMs <= 0 {
		leaseMs = command.LeaseTimeSeconds(q) * 1000
	}
	var out command.ShareAcquireResult
	left := c.Batch
	for i, name := range c.Partitions {
		if left <= 0 || i >= len(c.LeaseIDs) {
			break
		}
		part, err := tx.Partition(q.ID, name)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		must(err)
		cur, found, err := tx.Position(view, part)
		must(err)
		if !found {
			cur.Offset = int64(part.StartOffset)
		}
		before := len(cur.Leases)
		settleExpired(tx, &cur, now)
		settled := len(cur.Leases) != before
		// Retention may have dropped records the group never finished: it
		// moves past them unless a lease still holds one.
		jumped := !slices.ContainsFunc(cur.Leases, func(l *store.Lease) bool { return l.Offsets[0] < int64(part.StartOffset) }) &&
			skipExpired(&cur, part)
		moved := settled || jumped
		k := pick{batch: left, now: now, delayMs: delayMs, shared: true, taken: takenOffsets(&cur),
			window: int64(c.MaxLocks), uncommitted: c.ReadUncommitted}
		var offsets []int64
		var hashes []uint64
		if cur.Offset < int64(part.NextOffset) {
			var passed bool
			offsets, hashes, passed = deliverable(tx, part, &cur, k)
			moved = moved || passed
		}
		if c.MaxDeliveries > 0 && len(offsets) > 0 {
			var archived bool
			offsets, hashes, archived = p.archiveSpent(tx, meta, q, part, c.Group, &cur, offsets, hashes, c.MaxDeliveries)
			moved = moved || archived
		}
		if len(offsets) == 0 {
			if moved || cur.Resolved() {
				must(tx.PutCursor(c.Group, cur, meta.NextID))
			}
			continue
		}
		res := command.PopResult{PartitionID: part.ID, Partition: part.Name, LeaseID: c.LeaseIDs[i], ExpiresAtMs: now + leaseMs, Offsets: offsets}
		if cur.Attempts == nil {
			cur.Attempts = map[int64]int32{}
		}
		for _, o := range offsets {
			cur.Attempts[o]++
			res.Attempts = append(res.Attempts, cur.Attempts[o])
		}
		cur.Leases = append(cur.Leases, &store.Lease{ID: res.LeaseID, ExpiresAtMs: res.ExpiresAtMs, Offsets: offsets, TxHashes: hashes})
		cur.UpdatedMs = now
		must(tx.PutCursor(c.Group, cur, meta.NextID))
		out.Leases = append(out.Leases, res)
		left -= len(offsets)
	}
	return out
}

// takenOffsets are the offsets past a cursor's position that a share
// acquisition passes over: finished, or under a lease (all live once
// expired ones are settled).
func takenOffsets(cur *store.Cursor) map[int64]bool {
	taken := make(map[int64]bool, len(cur.Done)+cur.InFlight())
	for _, o := range cur.Done {
		taken[o] = true
	}
	for _, l := range cur.Leases {
		for _, o := range l.Offsets {
			taken[o] = true
		}
	}
	return taken
}

// archiveSpent takes out of offsets (and their hashes) the records already
// delivered maxDeliveries times, finishing them as dead letters; it
// reports whether it archived any. One it cannot copy into a dead letter
// in this entry (the entry's dead-letter bytes are spent) is left for a
// later acquisition, neither delivered nor archived now.
func (p *Processor) archiveSpent(tx *store.Tx, meta *store.Meta, q store.Queue, part store.Partition, group string, cur *store.Cursor,
	offsets []int64, hashes []uint64, maxDeliveries int32) ([]int64, []uint64, bool) {
	archived := false
	keptOffsets, keptHashes := offsets[:0:0], hashes[:0:0]
	for i, o := range offsets {
		attempts := cur.Attempts[o]
		if attempts < maxDeliveries {
			keptOffsets, keptHashes = append(keptOffsets, o), append(keptHashes, hashes[i])
			continue
		}
		if command.DeadLettering(q) &&
			!p.storeDeadLetter(tx, meta, q, part, group, o, fmt.Sprintf("delivered %d times (share.delivery.count.limit)", attempts), attempts) {
			continue
		}
		cur.Done = append(cur.Done, o)
		archived = true
	}
	if archived {
		passDone(cur)
	}
	return keptOffsets, keptHashes, archived
}

// shareAckStatus maps a share acknowledgement kind to an ack status.
var shareAckStatus = map[string]string{
	command.ShareAccept:  command.AckCompleted,
	command.ShareGap:     command.AckCompleted,
	command.ShareRelease: command.AckRetry,
	command.ShareReject:  command.AckDLQ,
}

func (p *Processor) shareAck(tx *store.Tx, meta *store.Meta, c *command.ShareAckCommand) []command.ShareAckResult {
	out := make([]command.ShareAckResult, len(c.Acks))
	type partKey struct{ queue, partition string }
	var targets ackTargets[partKey]
	for i, a := range c.Acks {
		tg, errText := targets.get(partKey{a.Queue, a.Partition}, func() (*ackTarget, string) { return shareTarget(tx, c.Group, a.Queue, a.Partition) })
		if tg == nil {
			out[i] = command.ShareAckResult{Error: errText}
			continue
		}
		out[i] = p.shareAckOne(tx, meta, c.Group, tg, a)
	}
	targets.put(tx, c.Group, meta)
	return out
}

// shareTarget loads a queue partition's cursor for a share ack.
func shareTarget(tx *store.Tx, group, queue, partition string) (*ackTarget, string) {
	q, err := tx.Queue(queue)
	if errors.Is(err, store.ErrNotFound) {
		return nil, "unknown topic"
	}
	must(err)
	part, err := tx.Partition(q.ID, partition)
	if errors.Is(err, store.ErrNotFound) {
		return nil, "the records are not acquired by this member"
	}
	must(err)
	view, err := tx.ConsumerGroupView(group, q.ID)
	must(err)
	cur, _, err := tx.Position(view, part)
	must(err)
	return &ackTarget{queue: q, part: part, cur: cur}, ""
}

// shareAckOne applies one ShareAck to its partition's cursor: all of its
// offsets, or none when one of them is not acquired under one of the
// holder's live leases there. A renew extends every one of them.
func (p *Processor) shareAckOne(tx *store.Tx, meta *store.Meta, group string, tg *ackTarget, a command.ShareAck) command.ShareAckResult {
	now := meta.ClockMs
	var held []*store.Lease
	inFlight := 0
	for _, l := range tg.cur.Leases {
		if command.HeldBy(l.ID, a.Holder) && l.ExpiresAtMs > now {
			held = append(held, l)
			inFlight += len(l.Offsets)
		}
	}
	if len(held) == 0 {
		return command.ShareAckResult{Error: "the records are not acquired by this member (its lease ended or expired)"}
	}
	if a.Kind == command.ShareRenew {
		for _, l := range held {
			l.ExpiresAtMs = max(l.ExpiresAtMs, now+a.RenewMs)
		}
		tg.cur.UpdatedMs = now
		return command.ShareAckResult{}
	}
	status, ok := shareAckStatus[a.Kind]
	if !ok {
		return command.ShareAckResult{Error: "unknown acknowledgement kind " + a.Kind}
	}
	type leasedOffset struct {
		lease  *store.Lease
		offset int64
	}
	var targets []leasedOffset
	switch {
	case a.Rest:
		for _, l := range held {
			for _, o := range l.Offsets {
				if l.Acks[o] == "" {
					targets = append(targets, leasedOffset{l, o})
				}
			}
		}
	case a.First > a.Last || a.Last-a.First >= int64(inFlight):
		return command.ShareAckResult{Error: fmt.Sprintf("offsets %d to %d are not all acquired by this member", a.First, a.Last)}
	default:
		holding := make(map[int64]*store.Lease, inFlight)
		for _, l := range held {
			for _, o := range l.Offsets {
				holding[o] = l
			}
		}
		for o := a.First; o <= a.Last; o++ {
			l := holding[o]
			if l == nil {
				return command.ShareAckResult{Error: fmt.Sprintf("offset %d is not acquired by this member", o)}
			}
			targets = append(targets, leasedOffset{l, o})
		}
	}
	for _, t := range targets {
		if tg.cur.LeaseByID(t.lease.ID) == nil {
			continue // released by an earlier ack
		}
		if status == command.AckRetry && !store.IndexedLease(t.lease.ID) {
			releaseShared(tx, tg, t.lease, t.offset, meta.ClockMs)
			continue
		}
		if res := p.ackOffset(tx, meta, group, tg, t.lease, t.offset, status, "rejected by a share consumer"); res.Error != "" {
			return command.ShareAckResult{Error: res.Error}
		}
	}
	return command.ShareAckResult{}
}

// releaseShared gives offset o of shared lease l back at once, for any
// member's next acquisition (KIP-932), rather than when the lease ends;
// the lease ends when nothing of it is left to acknowledge.
func releaseShared(tx *store.Tx, tg *ackTarget, l *store.Lease, o, now int64) {
	cur := &tg.cur
	l.Drop(o)
	switch {
	case len(l.Offsets) == 0:
		cur.DropLease(l)
	case len(l.Acks) == len(l.Offsets):
		settleLease(tx, cur, l)
	}
	cur.UpdatedMs = now
}
