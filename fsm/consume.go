package fsm

import (
	"encoding/json"
	"errors"
	"slices"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

// maxSettlesPerPop bounds how many expired leases one pop settles on its
// way to a partition with something to deliver; the rest are settled by
// later pops (settling is the same whenever it happens).
const maxSettlesPerPop = 1_000

// maxPopScan bounds how many partitions one pop looks at. A pop that finds
// nothing in them records where it stopped, and the next pop goes on from
// there, so a queue of any width is covered by successive pops.
const maxPopScan = 1_000

func (p *Processor) pop(tx *store.Tx, meta *store.Meta, c *command.PopCommand) command.PopResult {
	return p.popWith(tx, meta, c, 0, 0)
}

// popWith pops; a record delivered maxDeliveries times already (0: no
// limit) is archived instead of delivered again, and a group that has not
// read the queue yet starts at the first record at or after fromMs when
// that is set (share groups: share.auto.offset.reset=by_duration).
func (p *Processor) popWith(tx *store.Tx, meta *store.Meta, c *command.PopCommand, maxDeliveries int32, fromMs int64) command.PopResult {
	q, err := tx.Queue(c.Queue)
	if errors.Is(err, store.ErrNotFound) {
		return command.PopResult{Error: "unknown queue"}
	}
	must(err)
	view := subscribe(tx, meta, c.Group, q, c.FromNew, fromMs)
	sub := view.Sub
	now := meta.ClockMs
	parts, windowFull := popCandidates(tx, q.ID, c.Partition, sub.Resume)
	leaseMs := c.LeaseMs
	if leaseMs <= 0 {
		leaseMs = command.LeaseTimeSeconds(q) * 1000
	}
	delayMs := command.DelaySeconds(q) * 1000
	settles := 0
	for _, part := range parts {
		cur, found, err := tx.Position(view, part)
		must(err)
		if !found {
			cur.Offset = int64(part.StartOffset)
		}
		settled := false
		if len(cur.Leases) > 0 {
			if cur.HasLiveLease(now) || settles+indexedLeases(cur.Leases) > maxSettlesPerPop {
				continue // a consumer holds this partition
			}
			settles += settleExpired(tx, &cur, now)
			settled = true
		}
		jumped := len(cur.Leases) == 0 && skipExpired(&cur, part)
		var offsets []int64
		var hashes []uint64
		passed := false
		if cur.Offset < int64(part.NextOffset) { // else there is nothing to read
			offsets, hashes, passed = deliverable(tx, part, &cur, pick{batch: c.Batch, now: now, delayMs: delayMs})
		}
		if maxDeliveries > 0 && len(offsets) > 0 {
			var archived bool
			offsets, hashes, archived = p.archiveSpent(tx, meta, q, part, c.Group, &cur, offsets, hashes, maxDeliveries)
			passed = passed || archived
		}
		if len(offsets) == 0 {
			if settled || jumped || passed || cur.Resolved() { // a position worked out from a reset is kept
				must(tx.PutCursor(c.Group, cur, meta.NextID))
			}
			continue
		}
		res := command.PopResult{PartitionID: part.ID, Partition: part.Name, LeaseID: c.LeaseID, ExpiresAtMs: now + leaseMs, Offsets: offsets}
		if cur.Attempts == nil {
			cur.Attempts = map[int64]int32{}
		}
		for _, o := range offsets {
			cur.Attempts[o]++
			res.Attempts = append(res.Attempts, cur.Attempts[o])
		}
		cur.Leases = []*store.Lease{{ID: c.LeaseID, ExpiresAtMs: res.ExpiresAtMs, Offsets: offsets, TxHashes: hashes}}
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
	return command.PopResult{More: windowFull}
}

// subscribe answers the group's view of queue q, subscribing the group
// first when it has not read q yet: its first pop or acquisition decides
// where it starts, for every partition. From new is a reset to the end,
// worked out per partition when it is read; fromMs (when set) a reset to
// the first record stamped then or later; else the group starts at each
// partition's start.
func subscribe(tx *store.Tx, meta *store.Meta, group string, q store.Queue, fromNew bool, fromMs int64) store.ConsumerGroupView {
	view, err := tx.ConsumerGroupView(group, q.ID)
	must(err)
	if view.Subscribed {
		return view
	}
	sub := store.Subscription{FromNew: fromNew, StartedMs: meta.ClockMs}
	switch {
	case fromNew:
		sub.Reset = newReset(meta, store.ResetToEnd)
	case fromMs > 0:
		sub.Reset = newReset(meta, store.ResetToTime)
		sub.Reset.AtMs = fromMs
	}
	must(tx.PutSubscription(group, q.ID, sub, meta.NextID))
	view, err = tx.ConsumerGroupView(group, q.ID)
	must(err)
	return view
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

// pick says what deliverable may take.
type pick struct {
	batch        int
	now, delayMs int64
	// shared: a share acquisition beside other members' leases (log
	// format 11). It passes over taken offsets (finished, or under a live
	// lease) and over records no consumer may see that the cursor has not
	// reached, takes only offsets below the cursor's plus window
	// (share.partition.max.record.locks), and with uncommitted reads as
	// Kafka's read_uncommitted.
	shared      bool
	taken       map[int64]bool
	window      int64
	uncommitted bool
}

// deliverable lists up to batch offsets from the cursor that are not
// finished, stopping at the first message still delayed or inside a Kafka
// transaction still open (order is kept), with the TxHash of each one's
// transactionId. Records no consumer may see (Kafka transaction markers,
// records of aborted Kafka transactions) count as finished: when nothing
// unfinished comes before such an entry the cursor passes it whole (moved
// reports that it did); otherwise a pop stops there (a shared acquisition
// goes on past it) and a later one passes it, so the cursor never lists
// them one by one.
func deliverable(tx *store.Tx, part store.Partition, cur *store.Cursor, k pick) (offsets []int64, hashes []uint64, moved bool) {
	view := readView(tx, part, k.uncommitted)
	// take looks at one entry; false: the pick is over.
	take := func(e store.Entry) bool {
		if e.Offset >= view.Stable || k.delayMs > 0 && e.MaxTimestampMs+k.delayMs > k.now {
			return false
		}
		if k.window > 0 && int64(e.Offset) >= cur.Offset+k.window {
			return false
		}
		hidden, err := view.Hidden(e)
		must(err)
		if hidden {
			passDone(cur)
			if len(offsets) > 0 || int64(e.Offset) > cur.Offset {
				return k.shared // a share acquisition goes on; the cursor passes it once it gets there
			}
			cur.Offset = max(cur.Offset, int64(e.Offset)+int64(e.Count))
			passDone(cur)
			moved = true
			return true
		}
		for o := int64(e.Offset); o < int64(e.Offset)+int64(e.Count); o++ {
			if k.window > 0 && o >= cur.Offset+k.window {
				return false
			}
			if o < cur.Offset || k.taken[o] || !k.shared && slices.Contains(cur.Done, o) {
				continue
			}
			offsets = append(offsets, o)
			hashes = append(hashes, store.TxHash(entryTxID(e, o)))
			if len(offsets) == k.batch {
				return false
			}
		}
		return true
	}
	if !k.shared {
		entries, err := tx.Entries(part.ID, uint64(cur.Offset), 64<<20, k.batch+len(cur.Done)+1)
		must(err)
		for _, e := range entries {
			if !take(e) {
				break
			}
		}
		return offsets, hashes, moved
	}
	// A share acquisition looks at the window's entries as the index
	// lists them and reads the bodies of those with an offset it may
	// take: the rest are held or finished, and reading them on every
	// acquisition cost more than the records it took.
	heads, err := tx.EntryHeads(part.ID, uint64(cur.Offset), int(k.window)+1)
	must(err)
	for _, h := range heads {
		if allTaken(h, cur.Offset, k.taken) {
			continue
		}
		bodies, err := tx.EntryBodies(part.ID, h)
		must(err)
		for _, e := range bodies {
			if !take(e) {
				return offsets, hashes, moved
			}
		}
	}
	return offsets, hashes, moved
}

// allTaken reports whether every offset of entry h from the cursor's on
// is taken.
func allTaken(h store.Entry, from int64, taken map[int64]bool) bool {
	for o := max(int64(h.Offset), from); o < int64(h.Offset)+int64(h.Count); o++ {
		if !taken[o] {
			return false
		}
	}
	return true
}

// readView is a committed read of a partition, or with uncommitted one as
// Kafka's read_uncommitted.
func readView(tx *store.Tx, part store.Partition, uncommitted bool) *store.CommittedView {
	if uncommitted {
		return tx.UncommittedView(part)
	}
	view, err := tx.CommittedView(part)
	must(err)
	return view
}

// entryTxID is the transactionId of offset o of an entry.
func entryTxID(e store.Entry, o int64) string {
	if e.Message != nil {
		return e.Message.TransactionID
	}
	return command.KafkaRecordTxID(o)
}

// settleLease ends lease l of a cursor: its finished messages are done,
// the rest wait for redelivery, and the cursor moves past the finished
// prefix.
func settleLease(tx *store.Tx, cur *store.Cursor, l *store.Lease) {
	endLease(tx, cur, l)
	passDone(cur)
	cur.DropLease(l)
}

// endLease counts lease l's finished messages done and drops l from the
// lease index where it is there; it reports whether it was. The caller
// moves the cursor on and takes l off it.
func endLease(tx *store.Tx, cur *store.Cursor, l *store.Lease) (indexed bool) {
	for _, o := range l.Offsets {
		if s := l.Acks[o]; s == command.AckCompleted || s == command.AckDLQ {
			cur.Done = append(cur.Done, o)
		}
	}
	if store.IndexedLease(l.ID) {
		must(tx.DeleteLease(l.ID))
		return true
	}
	return false
}

// settleExpired settles, in one pass, the cursor's leases that expired by
// now, as settleLease settles one; it answers how many of them the lease
// index held (each a key deleted).
func settleExpired(tx *store.Tx, cur *store.Cursor, now int64) (indexed int) {
	if !cur.HasExpiredLease(now) {
		return 0
	}
	expired := func(l *store.Lease) bool { return l.ExpiresAtMs <= now }
	for _, l := range cur.Leases {
		if expired(l) && endLease(tx, cur, l) {
			indexed++
		}
	}
	passDone(cur)
	cur.Leases = slices.DeleteFunc(cur.Leases, expired)
	if len(cur.Leases) == 0 {
		cur.Leases = nil
	}
	return indexed
}

// indexedLeases counts the leases the lease index holds.
func indexedLeases(leases []*store.Lease) int {
	n := 0
	for _, l := range leases {
		if store.IndexedLease(l.ID) {
			n++
		}
	}
	return n
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

// ackTargets are the cursors an entry acks in, each loaded at its first
// use and written once at the end, in first-use order (deterministic).
type ackTargets[K comparable] struct {
	byKey map[K]*ackTarget
	order []*ackTarget
}

// get answers the target of k, loading it the first time; nil with why
// when there is none.
func (ts *ackTargets[K]) get(k K, load func() (*ackTarget, string)) (*ackTarget, string) {
	if tg := ts.byKey[k]; tg != nil {
		return tg, ""
	}
	tg, why := load()
	if tg != nil {
		if ts.byKey == nil {
			ts.byKey = map[K]*ackTarget{}
		}
		ts.byKey[k], ts.order = tg, append(ts.order, tg)
	}
	return tg, why
}

// put writes every target's cursor.
func (ts *ackTargets[K]) put(tx *store.Tx, group string, meta *store.Meta) {
	for _, tg := range ts.order {
		must(tx.PutCursor(group, tg.cur, meta.NextID))
	}
}

func (p *Processor) ack(tx *store.Tx, meta *store.Meta, c *command.AckCommand) []command.AckResult {
	out := make([]command.AckResult, len(c.Acks))
	var targets ackTargets[uint64]
	for i, a := range c.Acks {
		tg, errText := targets.get(a.PartitionID, func() (*ackTarget, string) { return p.ackTarget(tx, c.Group, a.PartitionID) })
		if tg == nil {
			out[i] = command.AckResult{Error: errText}
			continue
		}
		out[i] = p.ackOne(tx, meta, c.Group, tg, a)
	}
	targets.put(tx, c.Group, meta)
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
	view, err := tx.ConsumerGroupView(group, q.ID)
	must(err)
	cur, _, err := tx.Position(view, part)
	must(err)
	return &ackTarget{queue: q, part: part, cur: cur}, ""
}

// leased finds the offset of lease l whose message has the transactionId:
// the lease keeps each message's TxHash, and a hash match is confirmed by
// reading that one message.
func (tg *ackTarget) leased(tx *store.Tx, meta *store.Meta, l *store.Lease, txID string) (int64, bool) {
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

func (p *Processor) ackOne(tx *store.Tx, meta *store.Meta, group string, tg *ackTarget, a command.Ack) command.AckResult {
	now := meta.ClockMs
	fail := func(msg string) command.AckResult { return command.AckResult{Error: msg} }
	switch a.Status {
	case command.AckCompleted, command.AckFailed, command.AckRetry, command.AckDLQ:
	default:
		return fail("status must be completed, failed, retry or dlq")
	}
	l := tg.cur.LeaseByID(a.LeaseID)
	if l == nil || l.ExpiresAtMs <= now {
		return fail("lease unknown or expired")
	}
	offset, ok := tg.leased(tx, meta, l, a.TransactionID)
	if !ok {
		return fail("transactionId is not in this lease")
	}
	return p.ackOffset(tx, meta, group, tg, l, offset, a.Status, a.Error)
}

// ackOffset acks one offset of tg's live lease l with status; the lease is
// released once every offset of it is acked.
func (p *Processor) ackOffset(tx *store.Tx, meta *store.Meta, group string, tg *ackTarget, l *store.Lease, offset int64, status, reason string) command.AckResult {
	cur, now := &tg.cur, meta.ClockMs
	res := command.AckResult{Success: true}
	if l.Acks[offset] != "" {
		return res // acked before: nothing changes
	}
	outcome, failures := ackOutcome(tg, offset, status)
	if outcome == command.AckDLQ && command.DeadLettering(tg.queue) {
		if !p.storeDeadLetter(tx, meta, tg.queue, tg.part, group, offset, reason, cur.Attempts[offset]) {
			return command.AckResult{Error: "this call dead-letters too much at once: ack this message again"}
		}
		res.DeadLettered = true
	}
	if status == command.AckFailed {
		if cur.Failures == nil {
			cur.Failures = map[int64]int32{}
		}
		cur.Failures[offset] = failures
	}
	if l.Acks == nil {
		l.Acks = map[int64]string{}
	}
	l.Acks[offset] = outcome
	if len(l.Acks) == len(l.Offsets) {
		settleLease(tx, cur, l)
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
	if status == command.AckFailed {
		failures++
		if failures > command.RetryLimit(tg.queue) {
			return command.AckDLQ, failures
		}
	}
	return status, failures
}

// wouldDeadLetter reports whether acking a leased offset with status
// stores a dead letter.
func wouldDeadLetter(tg *ackTarget, offset int64, status string) bool {
	outcome, _ := ackOutcome(tg, offset, status)
	return outcome == command.AckDLQ && command.DeadLettering(tg.queue)
}

// storeDeadLetter stores the dead letter of offset, unless the entry has
// copied maxDeadLetterBytes into dead letters already (one is always
// taken); it reports whether it stored it.
func (p *Processor) storeDeadLetter(tx *store.Tx, meta *store.Meta, q store.Queue, part store.Partition, group string, offset int64, reason string, attempts int32) bool {
	d := deadLetter(tx, meta, q, part, group, offset, reason, attempts)
	size := d.Size()
	if p.deadLetterBytes > 0 && p.deadLetterBytes+size > maxDeadLetterBytes {
		return false
	}
	p.deadLetterBytes += size
	d.ID, d.AtMs = meta.NextID, meta.ClockMs
	meta.NextID++
	must(tx.PutDeadLetter(d))
	return true
}

// maxDeadLetterBytes bounds what one entry copies into dead letters (a
// dead letter keeps its message's payload): past it, further dead-lettering
// acks of the entry are refused, to be sent again. One is always taken.
const maxDeadLetterBytes = 2 << 20

// deadLetter builds the dead letter of a leased message; the caller gives
// it an id and stores it. From log format 7 a Kafka record's dead letter
// keeps the record, as HTTP readers see it (kafkaRecordPayload), so a
// replay pushes it back whole; before, it kept no payload.
func deadLetter(tx *store.Tx, meta *store.Meta, q store.Queue, part store.Partition, group string, offset int64, reason string, attempts int32) store.DeadLetter {
	d := store.DeadLetter{QueueID: q.ID, Group: group, Partition: part.Name, Offset: offset, Error: reason, Attempts: attempts}
	e, found := entryAt(tx, meta, part.ID, offset)
	switch {
	case found && e.Message != nil:
		d.TransactionID, d.Payload = e.Message.TransactionID, e.Message.Payload
	default:
		d.TransactionID = command.KafkaRecordTxID(offset)
		if found && effectiveLogFormat(*meta) >= command.LogFormat7 {
			d.Payload = kafkaRecordPayload(e, offset)
		}
	}
	return d
}

// maxDecodedBatch caps a stored Kafka batch decompressed to copy a record.
const maxDecodedBatch = 64 << 20

// kafkaRecordPayload is a stored Kafka record as an HTTP reader gets it:
// its value when that is JSON, else {"key","value"} with both base64 (nil
// when the batch does not decode or lacks the offset).
func kafkaRecordPayload(e store.Entry, offset int64) json.RawMessage {
	recs, err := recordbatch.Records(e.Batch, maxDecodedBatch)
	if err != nil {
		return nil
	}
	for _, r := range recs {
		if r.Offset != offset {
			continue
		}
		if len(r.Value) > 0 && json.Valid(r.Value) {
			return r.Value
		}
		env, _ := json.Marshal(struct {
			Key   []byte `json:"key"`
			Value []byte `json:"value"`
		}{r.Key, r.Value})
		return env
	}
	return nil
}

func (p *Processor) extendLease(tx *store.Tx, meta *store.Meta, c *command.ExtendLeaseCommand) command.ExtendLeaseResult {
	group, cur, err := tx.LeaseCursor(c.LeaseID)
	if errors.Is(err, store.ErrNotFound) {
		return command.ExtendLeaseResult{}
	}
	must(err)
	_, err = tx.QueueByID(cur.QueueID)
	if errors.Is(err, store.ErrNotFound) {
		return command.ExtendLeaseResult{} // the queue was deleted
	}
	must(err)
	l := cur.LeaseByID(c.LeaseID)
	if l == nil || l.ExpiresAtMs <= meta.ClockMs {
		return command.ExtendLeaseResult{}
	}
	l.ExpiresAtMs = max(l.ExpiresAtMs, meta.ClockMs+c.Seconds*1000)
	must(tx.PutCursor(group, cur, meta.NextID))
	return command.ExtendLeaseResult{Success: true, ExpiresAtMs: l.ExpiresAtMs}
}

// seek moves all of a group's positions in a queue with one subscription
// write: the reset supersedes every cursor written before it (their leases
// and pending redeliveries go with them), and each partition's position is
// worked out when it is next read.
func (p *Processor) seek(tx *store.Tx, meta *store.Meta, c *command.SeekCommand) command.TopicOutcome {
	q, err := tx.Queue(c.Queue)
	if errors.Is(err, store.ErrNotFound) {
		return command.TopicUnknown
	}
	must(err)
	view, err := tx.ConsumerGroupView(c.Group, q.ID)
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
	return command.TopicOK
}

// entryAt reads the entry holding offset. Up to log format 1 an offset no
// entry holds (trimmed by retention under a lease) answered the next entry
// (store.Tx.EntryAtOrAfter): replicas go on answering so for those
// entries, since binaries of that format apply the same log; from format 2
// it is not found.
func entryAt(tx *store.Tx, meta *store.Meta, partitionID uint64, offset int64) (store.Entry, bool) {
	read := tx.EntryAt
	if effectiveLogFormat(*meta) < command.LogFormat2 {
		read = tx.EntryAtOrAfter
	}
	e, found, err := read(partitionID, uint64(offset))
	must(err)
	return e, found
}
