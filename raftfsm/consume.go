package raftfsm

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/waggle-mq/waggle/store"
)

// Consuming over HTTP. A pop leases up to Batch messages of one partition
// to one consumer of a group: while the lease lives no other consumer of
// the group gets that partition, which keeps per-partition order. Each
// leased message is acked on its own; once all are acked the lease ends and
// the group's cursor moves past every finished message. Failed and retried
// messages are delivered again from there; a lease that expires (judged by
// the replicated clock) hands its unacked messages to the next pop.

// Ack statuses.
const (
	AckCompleted = "completed"
	AckFailed    = "failed"
	AckRetry     = "retry"
	AckDLQ       = "dlq"
)

// PopCommand leases messages to one consumer. LeaseID is minted by the
// leader. Partition "" lets the state machine pick a partition.
type PopCommand struct {
	NowMs     int64
	Group     string
	Queue     string
	Partition string
	Batch     int
	LeaseMs   int64 // 0: the queue's leaseTime
	FromNew   bool  // subscriptionMode=new, used on the group's first pop
	LeaseID   string
}

// PopResult is what a pop leased: offsets of one partition, with each
// one's delivery count. No offsets: nothing was available.
type PopResult struct {
	Error       string // the queue does not exist
	PartitionID uint64
	Partition   string
	LeaseID     string
	ExpiresAtMs int64
	Offsets     []int64
	Attempts    []int32
	// More: nothing was leased, but the pop stopped at maxPopScan
	// partitions and the queue has more; popping again looks at them.
	More bool
}

// Encode returns the raft entry for the command.
func (c *PopCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdPop))
	e.varint(c.NowMs)
	e.string(c.Group)
	e.string(c.Queue)
	e.string(c.Partition)
	e.varint(int64(c.Batch))
	e.varint(c.LeaseMs)
	if c.FromNew {
		e.byte(1)
	} else {
		e.byte(0)
	}
	e.string(c.LeaseID)
	return e.b
}

func decodePop(b []byte) (*PopCommand, error) {
	d := decoder{b: b}
	c := &PopCommand{NowMs: d.varint(), Group: d.string(), Queue: d.string(), Partition: d.string(),
		Batch: int(d.varint()), LeaseMs: d.varint(), FromNew: d.byte() == 1, LeaseID: d.string()}
	if d.err == nil && (c.Batch < 1 || c.Batch > 10_000) {
		return nil, fmt.Errorf("raftfsm: pop batch %d", c.Batch)
	}
	return c, d.finish()
}

// Ack acknowledges one leased message.
type Ack struct {
	// The JSON names are log format 1 (see legacy.go).
	PartitionID   uint64 `json:"PartitionID"`
	LeaseID       string `json:"LeaseID"`
	TransactionID string `json:"TransactionID"`
	Status        string `json:"Status"`
	Error         string `json:"Error"`
}

// AckCommand acknowledges messages of one group.
type AckCommand struct {
	NowMs int64
	Group string
	Acks  []Ack
}

// AckResult answers one Ack.
type AckResult struct {
	Success       bool
	Error         string
	LeaseReleased bool
	DeadLettered  bool
}

// Encode returns the raft entry for the command.
func (c *AckCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdAck))
	e.varint(c.NowMs)
	e.string(c.Group)
	e.uvarint(uint64(len(c.Acks)))
	for i := range c.Acks {
		e.ack(&c.Acks[i])
	}
	return e.b
}

// minAckSize is the fewest bytes one encoded Ack takes.
const minAckSize = 5

func (e *encoder) ack(a *Ack) {
	e.uvarint(a.PartitionID)
	e.string(a.LeaseID)
	e.string(a.TransactionID)
	e.string(a.Status)
	e.string(a.Error)
}

func (d *decoder) ack() Ack {
	return Ack{PartitionID: d.uvarint(), LeaseID: d.string(), TransactionID: d.string(), Status: d.string(), Error: d.string()}
}

func decodeAck(b []byte) (*AckCommand, error) {
	d := decoder{b: b}
	c := &AckCommand{NowMs: d.varint(), Group: d.string()}
	c.Acks = make([]Ack, d.count(minAckSize))
	for i := range c.Acks {
		c.Acks[i] = d.ack()
	}
	return c, d.finish()
}

// ExtendLeaseCommand pushes a live lease's expiry to at least Seconds from
// now; it never shortens a lease.
type ExtendLeaseCommand struct {
	NowMs   int64
	LeaseID string
	Seconds int64
}

// ExtendLeaseResult answers an ExtendLeaseCommand.
type ExtendLeaseResult struct {
	Success     bool
	ExpiresAtMs int64
}

// Encode returns the raft entry for the command.
func (c *ExtendLeaseCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdExtendLease))
	e.varint(c.NowMs)
	e.string(c.LeaseID)
	e.varint(c.Seconds)
	return e.b
}

func decodeExtendLease(b []byte) (*ExtendLeaseCommand, error) {
	d := decoder{b: b}
	c := &ExtendLeaseCommand{NowMs: d.varint(), LeaseID: d.string(), Seconds: d.varint()}
	return c, d.finish()
}

// SeekCommand moves a group's cursors on a queue: to the end, to an
// offset, or to the first message at or after a time. Leases and pending
// redeliveries of those partitions are dropped.
type SeekCommand struct {
	NowMs       int64
	Group       string
	Queue       string
	ToEnd       bool
	Offset      int64 // used when TimestampMs is 0 and not ToEnd
	TimestampMs int64
}

// Encode returns the raft entry for the command.
func (c *SeekCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdSeek))
	e.varint(c.NowMs)
	e.string(c.Group)
	e.string(c.Queue)
	if c.ToEnd {
		e.byte(1)
	} else {
		e.byte(0)
	}
	e.varint(c.Offset)
	e.varint(c.TimestampMs)
	return e.b
}

func decodeSeek(b []byte) (*SeekCommand, error) {
	d := decoder{b: b}
	c := &SeekCommand{NowMs: d.varint(), Group: d.string(), Queue: d.string(), ToEnd: d.byte() == 1, Offset: d.varint(), TimestampMs: d.varint()}
	return c, d.finish()
}

// KafkaRecordTxID names a record produced over Kafka for acks: Kafka
// records carry no transactionId.
func KafkaRecordTxID(offset int64) string { return "kafka:" + strconv.FormatInt(offset, 10) }

// maxSettlesPerPop bounds how many expired leases one pop settles on its
// way to a partition with something to deliver; the rest are settled by
// later pops (settling is the same whenever it happens).
const maxSettlesPerPop = 1_000

// maxPopScan bounds how many partitions one pop looks at. A pop that finds
// nothing in them records where it stopped, and the next pop goes on from
// there, so a queue of any width is covered by successive pops.
const maxPopScan = 1_000

func (p *Processor) pop(tx *store.Tx, meta *store.Meta, c *PopCommand) PopResult {
	q, err := tx.Queue(c.Queue)
	if errors.Is(err, store.ErrNotFound) {
		return PopResult{Error: "unknown queue"}
	}
	must(err)
	view, err := tx.GroupView(c.Group, q.ID)
	must(err)
	sub := view.Sub
	if !view.Subscribed {
		// The group's first pop decides where it starts, for every
		// partition: from new is a reset to the end, worked out per
		// partition when it is read.
		sub = store.Subscription{FromNew: c.FromNew, StartedMs: meta.ClockMs}
		if c.FromNew {
			sub.Reset = newReset(meta, store.ResetToEnd)
		}
		must(tx.PutSubscription(c.Group, q.ID, sub, meta.NextID))
		view, err = tx.GroupView(c.Group, q.ID)
		must(err)
	}
	now := meta.ClockMs
	parts, windowFull := popCandidates(tx, q.ID, c.Partition, sub.Resume)
	leaseMs := c.LeaseMs
	if leaseMs <= 0 {
		leaseMs = LeaseTimeSeconds(q) * 1000
	}
	delayMs := DelaySeconds(q) * 1000
	settles := 0
	for _, part := range parts {
		cur, found, err := tx.Position(view, part)
		must(err)
		if !found {
			cur.Offset = int64(part.StartOffset)
		}
		settled := false
		if cur.Lease != nil {
			if cur.Lease.ExpiresAtMs > now || settles == maxSettlesPerPop {
				continue // a consumer holds this partition
			}
			settle(tx, &cur)
			settled = true
			settles++
		}
		jumped := cur.Lease == nil && skipExpired(&cur, part)
		var offsets []int64
		var hashes []uint64
		passed := false
		if cur.Offset < int64(part.NextOffset) { // else there is nothing to read
			offsets, hashes, passed = deliverable(tx, part, &cur, c.Batch, now, delayMs)
		}
		if len(offsets) == 0 {
			if settled || jumped || passed || cur.Resolved() { // a position worked out from a reset is kept
				must(tx.PutCursor(c.Group, cur, meta.NextID))
			}
			continue
		}
		res := PopResult{PartitionID: part.ID, Partition: part.Name, LeaseID: c.LeaseID, ExpiresAtMs: now + leaseMs, Offsets: offsets}
		if cur.Attempts == nil {
			cur.Attempts = map[int64]int32{}
		}
		for _, o := range offsets {
			cur.Attempts[o]++
			res.Attempts = append(res.Attempts, cur.Attempts[o])
		}
		cur.Lease = &store.Lease{ID: c.LeaseID, ExpiresAtMs: res.ExpiresAtMs, Offsets: offsets, TxHashes: hashes}
		cur.UpdatedMs = now
		must(tx.PutCursor(c.Group, cur, meta.NextID))
		must(tx.PutLease(c.LeaseID, c.Group, q.ID, part.Name))
		if c.Partition == "" {
			sub.Resume = part.Name // the next pop looks at the next partition first
			must(tx.PutSubscription(c.Group, q.ID, sub, meta.NextID))
		}
		return res
	}
	if windowFull {
		sub.Resume = parts[len(parts)-1].Name
		must(tx.PutSubscription(c.Group, q.ID, sub, meta.NextID))
	}
	return PopResult{More: windowFull}
}

// popCandidates lists the partitions a pop looks at, in order: the named
// one, or up to maxPopScan from the one after resume on, wrapping round to
// the first. windowFull reports that the queue has partitions beyond them.
func popCandidates(tx *store.Tx, queueID uint64, partition, resume string) (parts []store.Partition, windowFull bool) {
	if partition != "" {
		part, err := tx.Partition(queueID, partition)
		if errors.Is(err, store.ErrNotFound) {
			return nil, false
		}
		must(err)
		return []store.Partition{part}, false
	}
	// One more than a pop looks at tells whether there is more.
	parts, err := tx.PartitionsAfter(queueID, resume, maxPopScan+1)
	must(err)
	if len(parts) <= maxPopScan && resume != "" {
		wrapped, err := tx.PartitionsAfter(queueID, "", maxPopScan+1-len(parts))
		must(err)
		for _, p := range wrapped {
			if p.Name > resume {
				break // back where this pop started
			}
			parts = append(parts, p)
		}
	}
	if len(parts) > maxPopScan {
		return parts[:maxPopScan], true
	}
	return parts, false
}

// newReset starts a reset of a group's positions in a queue. Its
// generation is a fresh id: every entry appended so far carries an append
// sequence at or below it, every later one a larger one, so where the
// reset puts each partition is exact whenever it is worked out.
func newReset(meta *store.Meta, mode string) *store.Reset {
	r := &store.Reset{Gen: meta.NextID, Mode: mode}
	meta.NextID++
	return r
}

// skipExpired moves a cursor that retention left behind to the partition's
// start: messages before it are gone, so the group jumps past them, and
// counts the unfinished ones in cur.Expired (group describe and the
// waggle_group_expired_messages metric show it). It reports whether it
// moved the cursor.
func skipExpired(cur *store.Cursor, part store.Partition) bool {
	start := int64(part.StartOffset)
	if cur.Offset >= start {
		return false
	}
	passed := start - cur.Offset
	cur.Offset = start
	for len(cur.Done) > 0 && cur.Done[0] < start {
		cur.Done = cur.Done[1:]
		passed-- // finished already: not lost to this group
	}
	cur.Expired += passed
	for o := range cur.Attempts {
		if o < start {
			delete(cur.Attempts, o)
		}
	}
	for o := range cur.Failures {
		if o < start {
			delete(cur.Failures, o)
		}
	}
	return true
}

// deliverable lists up to batch offsets from the cursor that are not
// finished, stopping at the first message still delayed or inside a Kafka
// transaction still open (order is kept), with the TxHash of each one's
// transactionId. Records no consumer may see (Kafka transaction markers,
// records of aborted Kafka transactions) count as finished: when nothing
// unfinished comes before such an entry the cursor passes it whole (moved
// reports that it did); otherwise the pop stops there and a later one
// passes it, so the cursor never lists them one by one.
func deliverable(tx *store.Tx, part store.Partition, cur *store.Cursor, batch int, now, delayMs int64) (offsets []int64, hashes []uint64, moved bool) {
	view, err := tx.CommittedView(part)
	must(err)
	entries, err := tx.Entries(part.ID, uint64(cur.Offset), 64<<20, batch+len(cur.Done)+1)
	must(err)
	for _, e := range entries {
		if e.Offset >= view.Stable || delayMs > 0 && e.MaxTimestampMs+delayMs > now {
			break
		}
		hidden, err := view.Hidden(e)
		must(err)
		if hidden {
			passDone(cur)
			if len(offsets) > 0 || int64(e.Offset) > cur.Offset {
				break // something before it is unfinished
			}
			cur.Offset = max(cur.Offset, int64(e.Offset)+int64(e.Count))
			passDone(cur)
			moved = true
			continue
		}
		for o := int64(e.Offset); o < int64(e.Offset)+int64(e.Count); o++ {
			if o < cur.Offset || slices.Contains(cur.Done, o) {
				continue
			}
			offsets = append(offsets, o)
			hashes = append(hashes, store.TxHash(entryTxID(e, o)))
			if len(offsets) == batch {
				return offsets, hashes, moved
			}
		}
	}
	return offsets, hashes, moved
}

// entryTxID is the transactionId of offset o of an entry.
func entryTxID(e store.Entry, o int64) string {
	if e.Message != nil {
		return e.Message.TransactionID
	}
	return KafkaRecordTxID(o)
}

// settle ends a cursor's lease: finished messages are done, the rest wait
// for redelivery, and the cursor moves past the finished prefix.
func settle(tx *store.Tx, cur *store.Cursor) {
	l := cur.Lease
	for _, o := range l.Offsets {
		if s := l.Acks[o]; s == AckCompleted || s == AckDLQ {
			cur.Done = append(cur.Done, o)
		}
	}
	passDone(cur)
	must(tx.DeleteLease(l.ID))
	cur.Lease = nil
}

// passDone moves a cursor past the finished prefix of what follows it.
func passDone(cur *store.Cursor) {
	slices.Sort(cur.Done)
	cur.Done = slices.Compact(cur.Done)
	for len(cur.Done) > 0 && cur.Done[0] <= cur.Offset {
		if cur.Done[0] == cur.Offset {
			delete(cur.Attempts, cur.Offset)
			delete(cur.Failures, cur.Offset)
			cur.Offset++
		}
		cur.Done = cur.Done[1:]
	}
	if len(cur.Done) == 0 {
		cur.Done = nil
	}
}

// ackTarget is one partition's cursor while an ack entry applies: loaded
// once and written once, however many of its messages the entry acks.
type ackTarget struct {
	queue store.Queue
	part  store.Partition
	cur   store.Cursor
}

func (p *Processor) ack(tx *store.Tx, meta *store.Meta, c *AckCommand) []AckResult {
	out := make([]AckResult, len(c.Acks))
	targets := map[uint64]*ackTarget{}
	var order []*ackTarget // first-use order, for deterministic writes
	for i, a := range c.Acks {
		tg, errText := targets[a.PartitionID], ""
		if tg == nil {
			tg, errText = p.ackTarget(tx, c.Group, a.PartitionID)
			if tg != nil {
				targets[a.PartitionID] = tg
				order = append(order, tg)
			}
		}
		if tg == nil {
			out[i] = AckResult{Error: errText}
			continue
		}
		out[i] = p.ackOne(tx, meta, c.Group, tg, a)
	}
	for _, tg := range order {
		must(tx.PutCursor(c.Group, tg.cur, meta.NextID))
	}
	return out
}

func (p *Processor) ackTarget(tx *store.Tx, group string, partitionID uint64) (*ackTarget, string) {
	part, err := tx.PartitionByID(partitionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, "unknown partitionId"
	}
	must(err)
	q, err := tx.QueueByID(part.QueueID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, "the queue was deleted"
	}
	must(err)
	view, err := tx.GroupView(group, q.ID)
	must(err)
	cur, _, err := tx.Position(view, part)
	must(err)
	return &ackTarget{queue: q, part: part, cur: cur}, ""
}

// leased finds the leased offset whose message has the transactionId: the
// lease keeps each message's TxHash, and a hash match is confirmed by
// reading that one message.
func (tg *ackTarget) leased(tx *store.Tx, meta *store.Meta, txID string) (int64, bool) {
	l := tg.cur.Lease
	if l == nil {
		return 0, false
	}
	h := store.TxHash(txID)
	for i, o := range l.Offsets {
		if i >= len(l.TxHashes) || l.TxHashes[i] != h {
			continue
		}
		if e, found := entryAt(tx, meta, tg.part.ID, o); found && entryTxID(e, o) == txID {
			return o, true
		}
	}
	return 0, false
}

func (p *Processor) ackOne(tx *store.Tx, meta *store.Meta, group string, tg *ackTarget, a Ack) AckResult {
	now := meta.ClockMs
	fail := func(msg string) AckResult { return AckResult{Error: msg} }
	switch a.Status {
	case AckCompleted, AckFailed, AckRetry, AckDLQ:
	default:
		return fail("status must be completed, failed, retry or dlq")
	}
	cur := &tg.cur
	l := cur.Lease
	if l == nil || l.ID != a.LeaseID || l.ExpiresAtMs <= now {
		return fail("lease unknown or expired")
	}
	offset, ok := tg.leased(tx, meta, a.TransactionID)
	if !ok {
		return fail("transactionId is not in this lease")
	}
	res := AckResult{Success: true}
	if l.Acks[offset] != "" {
		return res // acked before: nothing changes
	}
	status, failures := ackOutcome(tg, offset, a.Status)
	if status == AckDLQ && DeadLettering(tg.queue) {
		d := deadLetter(tx, meta, tg.queue, tg.part, group, offset, a.Error, cur.Attempts[offset])
		size := d.Size()
		if p.deadLetterBytes > 0 && p.deadLetterBytes+size > maxDeadLetterBytes {
			return fail("this call dead-letters too much at once: ack this message again")
		}
		p.deadLetterBytes += size
		d.ID, d.AtMs = meta.NextID, meta.ClockMs
		meta.NextID++
		must(tx.PutDeadLetter(d))
		res.DeadLettered = true
	}
	if a.Status == AckFailed {
		if cur.Failures == nil {
			cur.Failures = map[int64]int32{}
		}
		cur.Failures[offset] = failures
	}
	if l.Acks == nil {
		l.Acks = map[int64]string{}
	}
	l.Acks[offset] = status
	if len(l.Acks) == len(l.Offsets) {
		settle(tx, cur)
		res.LeaseReleased = true
	}
	cur.UpdatedMs = now
	return res
}

// ackOutcome is what an ack of a leased offset comes to: a failure past
// the queue's retry limit is a dead letter. failures is the offset's
// failure count after it.
func ackOutcome(tg *ackTarget, offset int64, status string) (outcome string, failures int32) {
	failures = tg.cur.Failures[offset]
	if status == AckFailed {
		failures++
		if failures > RetryLimit(tg.queue) {
			return AckDLQ, failures
		}
	}
	return status, failures
}

// wouldDeadLetter reports whether acking a leased offset with status
// stores a dead letter.
func wouldDeadLetter(tg *ackTarget, offset int64, status string) bool {
	outcome, _ := ackOutcome(tg, offset, status)
	return outcome == AckDLQ && DeadLettering(tg.queue)
}

// maxDeadLetterBytes bounds what one entry copies into dead letters (a
// dead letter keeps its message's payload): past it, further dead-lettering
// acks of the entry are refused, to be sent again. One is always taken.
const maxDeadLetterBytes = 2 << 20

// deadLetter builds the dead letter of a leased message; the caller gives
// it an id and stores it.
func deadLetter(tx *store.Tx, meta *store.Meta, q store.Queue, part store.Partition, group string, offset int64, reason string, attempts int32) store.DeadLetter {
	d := store.DeadLetter{QueueID: q.ID, Group: group, Partition: part.Name, Offset: offset, Error: reason, Attempts: attempts}
	if e, found := entryAt(tx, meta, part.ID, offset); found && e.Message != nil {
		d.TransactionID, d.Payload = e.Message.TransactionID, e.Message.Payload
	} else {
		d.TransactionID = KafkaRecordTxID(offset)
	}
	return d
}

func (p *Processor) extendLease(tx *store.Tx, meta *store.Meta, c *ExtendLeaseCommand) ExtendLeaseResult {
	group, cur, err := tx.LeaseCursor(c.LeaseID)
	if errors.Is(err, store.ErrNotFound) {
		return ExtendLeaseResult{}
	}
	must(err)
	_, err = tx.QueueByID(cur.QueueID)
	if errors.Is(err, store.ErrNotFound) {
		return ExtendLeaseResult{} // the queue was deleted
	}
	must(err)
	l := cur.Lease
	if l == nil || l.ID != c.LeaseID || l.ExpiresAtMs <= meta.ClockMs {
		return ExtendLeaseResult{}
	}
	l.ExpiresAtMs = max(l.ExpiresAtMs, meta.ClockMs+c.Seconds*1000)
	must(tx.PutCursor(group, cur, meta.NextID))
	return ExtendLeaseResult{Success: true, ExpiresAtMs: l.ExpiresAtMs}
}

// seek moves all of a group's positions in a queue with one subscription
// write: the reset supersedes every cursor written before it (their leases
// and pending redeliveries go with them), and each partition's position is
// worked out when it is next read.
func (p *Processor) seek(tx *store.Tx, meta *store.Meta, c *SeekCommand) TopicOutcome {
	q, err := tx.Queue(c.Queue)
	if errors.Is(err, store.ErrNotFound) {
		return TopicUnknown
	}
	must(err)
	view, err := tx.GroupView(c.Group, q.ID)
	must(err)
	sub := view.Sub
	if !view.Subscribed {
		sub = store.Subscription{StartedMs: meta.ClockMs}
	}
	switch {
	case c.ToEnd:
		sub.Reset = newReset(meta, store.ResetToEnd)
	case c.TimestampMs > 0:
		sub.Reset = newReset(meta, store.ResetToTime)
		sub.Reset.AtMs = c.TimestampMs
	default:
		sub.Reset = newReset(meta, store.ResetToOffset)
		sub.Reset.Offset = c.Offset
	}
	must(tx.PutSubscription(c.Group, q.ID, sub, meta.NextID))
	return TopicOK
}

// entryAt reads the entry holding offset. Up to log format 1 an offset no
// entry holds (trimmed by retention under a lease) answered the next entry
// (store.Tx.EntryAtOrAfter): replicas go on answering so for those
// entries, since binaries of that format apply the same log; from format 2
// it is not found.
func entryAt(tx *store.Tx, meta *store.Meta, partitionID uint64, offset int64) (store.Entry, bool) {
	read := tx.EntryAt
	if effectiveLogFormat(*meta) < LogFormat2 {
		read = tx.EntryAtOrAfter
	}
	e, found, err := read(partitionID, uint64(offset))
	must(err)
	return e, found
}
