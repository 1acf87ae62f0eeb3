package fsm

import (
	"errors"
	"fmt"
	"slices"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// Kafka share groups (KIP-932) on the leases of HTTP pops: acquiring is a
// pop of each named partition, acknowledging acks offsets of a lease. The
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
// offsets, or none when one of them is not acquired under the holder's
// lease.
func (p *Processor) shareAckOne(tx *store.Tx, meta *store.Meta, group string, tg *ackTarget, a command.ShareAck) command.ShareAckResult {
	now := meta.ClockMs
	l := tg.cur.Lease
	if l == nil || !command.HeldBy(l.ID, a.Holder) || l.ExpiresAtMs <= now {
		return command.ShareAckResult{Error: "the records are not acquired by this member (its lease ended or expired)"}
	}
	if a.Kind == command.ShareRenew {
		l.ExpiresAtMs = max(l.ExpiresAtMs, now+a.RenewMs)
		tg.cur.UpdatedMs = now
		return command.ShareAckResult{}
	}
	status, ok := shareAckStatus[a.Kind]
	if !ok {
		return command.ShareAckResult{Error: "unknown acknowledgement kind " + a.Kind}
	}
	var offsets []int64
	switch {
	case a.Rest:
		for _, o := range l.Offsets {
			if l.Acks[o] == "" {
				offsets = append(offsets, o)
			}
		}
	case a.First > a.Last || a.Last-a.First >= int64(len(l.Offsets)):
		return command.ShareAckResult{Error: fmt.Sprintf("offsets %d to %d are not all acquired by this member", a.First, a.Last)}
	default:
		for o := a.First; o <= a.Last; o++ {
			if _, found := slices.BinarySearch(l.Offsets, o); !found { // leased in order
				return command.ShareAckResult{Error: fmt.Sprintf("offset %d is not acquired by this member", o)}
			}
			offsets = append(offsets, o)
		}
	}
	for _, o := range offsets {
		if tg.cur.Lease == nil {
			break // released by the last ack
		}
		if res := p.ackOffset(tx, meta, group, tg, o, status, "rejected by a share consumer"); res.Error != "" {
			return command.ShareAckResult{Error: res.Error}
		}
	}
	return command.ShareAckResult{}
}
