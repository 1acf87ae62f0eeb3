package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// DefaultGroup is the consumer group of a pop that names none: the queue's
// shared group (Queen's name for it).
const DefaultGroup = "__QUEUE_MODE__"

// Consuming limits.
const (
	MaxPopBatch = 1000
	MaxPopWait  = 60 * time.Second
)

// PopRequest asks for a lease on up to Batch messages.
type PopRequest struct {
	Queue        string
	Partition    string // empty: any partition
	Group        string // empty: DefaultGroup
	Batch        int    // 0: 1
	Wait         time.Duration
	LeaseSeconds int64 // 0: the queue's leaseTime
	FromNew      bool  // subscriptionMode=new
}

// PoppedMessage is one leased message.
type PoppedMessage struct {
	Record
	Partition       string
	PartitionID     string
	LeaseID         string
	Group           string
	DeliveryAttempt int32
}

// Pop leases messages of one partition to the caller. With Wait it long-
// polls: an empty pop waits for a push to the queue (a signal from the
// state machine), not a timer, and tries again until Wait passes. It
// returns no messages when none became available.
func (s *Service) Pop(ctx context.Context, r PopRequest) ([]PoppedMessage, error) {
	if err := validateQueueName(r.Queue); err != nil {
		return nil, err
	}
	if r.Partition != "" {
		if _, err := partitionName(r.Partition); err != nil {
			return nil, err
		}
	}
	if r.Group == "" {
		r.Group = DefaultGroup
	}
	if r.Batch == 0 {
		r.Batch = 1
	}
	switch {
	case len(r.Group) > MaxGroupName:
		return nil, validateGroupName(r.Group)
	case r.Batch < 1 || r.Batch > MaxPopBatch:
		return nil, fmt.Errorf("%w: batch must be between 1 and %d", ErrInvalid, MaxPopBatch)
	case r.Wait < 0 || r.Wait > MaxPopWait:
		return nil, fmt.Errorf("%w: timeout must be between 0 and %v", ErrInvalid, MaxPopWait)
	case r.LeaseSeconds < 0 || r.LeaseSeconds > maxLeaseSeconds:
		return nil, fmt.Errorf("%w: leaseSeconds must be between 1 and %d", ErrInvalid, maxLeaseSeconds)
	}
	deadline := time.Now().Add(r.Wait)
	rounds := 0 // pops in a row that stopped short of the whole queue
	for {
		// Take the signal before popping, so a push that lands between an
		// empty pop and the wait still wakes us.
		appended, err := s.queueSignal(r.Queue)
		if err != nil {
			return nil, err
		}
		cmd := command.PopCommand{NowMs: s.now().UnixMilli(), Group: r.Group, Queue: r.Queue, Partition: r.Partition,
			Batch: r.Batch, LeaseMs: r.LeaseSeconds * 1000, FromNew: r.FromNew, LeaseID: s.newLeaseID()}
		res, err := apply(s, &cmd)
		if err != nil {
			return nil, err
		}
		if res.Error != "" {
			return nil, fmt.Errorf("queue %q: %w", r.Queue, ErrNotFound)
		}
		if len(res.Offsets) > 0 {
			return s.leasedMessages(r.Group, res)
		}
		// A pop looks at a bounded number of partitions; on a wider queue
		// the next ones are looked at by popping again, a few times at once
		// and then about once a second while the caller waits.
		if res.More && rounds < maxPopRounds {
			rounds++
			continue
		}
		wait := time.Until(deadline)
		if wait <= 0 || appended == nil {
			return nil, nil
		}
		if res.More {
			wait, rounds = min(wait, time.Second), 0
		}
		if !s.waitForAppend(ctx, appended, wait) && !res.More {
			return nil, nil
		}
		if ctx.Err() != nil {
			return nil, nil
		}
	}
}

// waitForAppend waits up to wait for appended to close, counted as a long
// poll while it does (tests wait on that gauge to know a pop is parked);
// it reports whether the append came.
func (s *Service) waitForAppend(ctx context.Context, appended <-chan struct{}, wait time.Duration) bool {
	defer s.Metrics.LongPoll("pop")()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-appended:
		return true
	case <-timer.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// maxPopRounds bounds the pops one request makes in a row over a queue
// wider than one pop looks at.
const maxPopRounds = 10

// queueSignal returns the channel closed by the queue's next append (nil
// when the queue does not exist yet).
func (s *Service) queueSignal(queue string) (<-chan struct{}, error) {
	var ch <-chan struct{}
	err := s.store.View(func(tx *store.Tx) error {
		q, err := tx.Queue(queue)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err == nil {
			ch = s.node.FSM.AppendSignal(q.ID)
		}
		return err
	})
	return ch, err
}

// leasedMessages reads the leased offsets from the local store (applied,
// since the pop was).
func (s *Service) leasedMessages(group string, res command.PopResult) ([]PoppedMessage, error) {
	var out []PoppedMessage
	err := s.store.View(func(tx *store.Tx) error {
		first := uint64(res.Offsets[0])
		entries, err := tx.Entries(res.PartitionID, first, 1<<30, len(res.Offsets)+64)
		if err != nil {
			return err
		}
		for _, e := range entries {
			recs, err := entryRecords(e, first)
			if err != nil {
				return err
			}
			for _, rec := range recs {
				i := slices.Index(res.Offsets, int64(rec.Offset))
				if i < 0 {
					continue
				}
				out = append(out, PoppedMessage{Record: rec, Partition: res.Partition, PartitionID: strconv.FormatUint(res.PartitionID, 10),
					LeaseID: res.LeaseID, Group: group, DeliveryAttempt: res.Attempts[i]})
			}
		}
		return nil
	})
	return out, err
}

// AckRequest acknowledges one leased message.
type AckRequest struct {
	TransactionID string
	PartitionID   string
	LeaseID       string
	Status        string // completed, failed, retry or dlq
	Error         string
}

// command.AckResult answers one AckRequest.

// Ack acknowledges leased messages of one group in one raft entry.
func (s *Service) Ack(ctx context.Context, group string, acks []AckRequest) ([]command.AckResult, error) {
	if group == "" {
		group = DefaultGroup
	}
	if err := validateGroupName(group); err != nil {
		return nil, err
	}
	if len(acks) == 0 || len(acks) > MaxPushItems {
		return nil, fmt.Errorf("%w: between 1 and %d acknowledgments", ErrInvalid, MaxPushItems)
	}
	out := make([]command.AckResult, len(acks))
	cmd := command.AckCommand{NowMs: s.now().UnixMilli(), Group: group}
	var index []int
	for i, a := range acks {
		pid, err := parsePartitionID(a.PartitionID)
		if err != nil {
			out[i] = command.AckResult{Error: "partitionId is not one this broker handed out"}
			continue
		}
		cmd.Acks = append(cmd.Acks, command.Ack{PartitionID: pid, LeaseID: a.LeaseID, TransactionID: a.TransactionID, Status: a.Status, Error: a.Error})
		index = append(index, i)
	}
	if len(cmd.Acks) == 0 {
		return out, nil
	}
	answer, err := applyFor(ctx, s, &cmd)
	if err != nil {
		return nil, err
	}
	for j, r := range answer {
		out[index[j]] = r
	}
	return out, nil
}

// ExtendLease pushes a live lease's expiry to at least seconds from now.
func (s *Service) ExtendLease(leaseID string, seconds int64) (command.ExtendLeaseResult, error) {
	if seconds < 1 || seconds > maxLeaseSeconds {
		return command.ExtendLeaseResult{}, fmt.Errorf("%w: seconds must be between 1 and %d", ErrInvalid, maxLeaseSeconds)
	}
	cmd := command.ExtendLeaseCommand{NowMs: s.now().UnixMilli(), LeaseID: leaseID, Seconds: seconds}
	return apply(s, &cmd)
}

// SeekRequest moves a group's cursors on a queue: exactly one of ToEnd,
// Offset or TimestampMs.
type SeekRequest struct {
	ToEnd       bool
	Offset      *int64
	TimestampMs *int64
}

// Seek moves a group's cursors on every partition of a queue.
func (s *Service) Seek(ctx context.Context, group, queue string, r SeekRequest) error {
	if err := validateGroupName(group); err != nil {
		return err
	}
	set := 0
	cmd := command.SeekCommand{NowMs: s.now().UnixMilli(), Group: group, Queue: queue, ToEnd: r.ToEnd}
	if r.ToEnd {
		set++
	}
	if r.Offset != nil {
		set++
		cmd.Offset = *r.Offset
	}
	if r.TimestampMs != nil {
		set++
		cmd.TimestampMs = max(*r.TimestampMs, 1)
	}
	if set != 1 {
		return fmt.Errorf("%w: give exactly one of toEnd, offset or timestamp", ErrInvalid)
	}
	answer, err := applyFor(ctx, s, &cmd)
	if err != nil {
		return err
	}
	if answer == command.TopicUnknown {
		return fmt.Errorf("queue %q: %w", queue, ErrNotFound)
	}
	return nil
}

// DeleteGroup forgets a group: cursors, leases and subscriptions.
func (s *Service) DeleteGroup(ctx context.Context, group string) error {
	if err := validateOffsets(group, nil); err != nil {
		return err
	}
	n, err := applyFor(ctx, s, &command.DeleteOffsetsCommand{Group: group, All: true})
	if err == nil && n == 0 {
		return fmt.Errorf("consumer group %q: %w", group, ErrNotFound)
	}
	return err
}

// DeadLetter is a message a group gave up on.
type DeadLetter struct {
	store.DeadLetter
	Queue string
}

// optionalQueueID is the id of the named queue, or 0 (every queue) when
// queue is empty.
func optionalQueueID(tx *store.Tx, queue string) (uint64, error) {
	if queue == "" {
		return 0, nil
	}
	q, err := tx.Queue(queue)
	if errors.Is(err, store.ErrNotFound) {
		return 0, fmt.Errorf("queue %q: %w", queue, ErrNotFound)
	}
	return q.ID, err
}

// DeadLetters lists dead letters, of one queue when queue is not empty.
func (s *Service) DeadLetters(queue string) ([]DeadLetter, error) {
	var out []DeadLetter
	err := s.store.View(func(tx *store.Tx) error {
		qid, err := optionalQueueID(tx, queue)
		if err != nil {
			return err
		}
		dls, err := tx.DeadLetters(qid, 10_000)
		for _, d := range dls {
			q, err := tx.QueueByID(d.QueueID)
			if errors.Is(err, store.ErrNotFound) {
				continue // its queue was deleted; cleanup removes it
			}
			if err != nil {
				return err
			}
			out = append(out, DeadLetter{DeadLetter: d, Queue: q.Name})
		}
		return err
	})
	return out, err
}

// ReplayDeadLetter pushes a copy of a dead letter back to its partition
// and marks it replayed, in one entry. A dead letter replayed before is not
// pushed again: the answer is the first copy, with status duplicate.
func (s *Service) ReplayDeadLetter(id string) (PushResult, error) {
	d, err := s.DeadLetter(id)
	if err != nil {
		return PushResult{}, err
	}
	if err := s.admitGrowth(); err != nil {
		return PushResult{}, err
	}
	msgID, err := uuid.NewV7()
	if err != nil {
		return PushResult{}, fmt.Errorf("mint message id: %w", err)
	}
	res, err := apply(s, &command.ReplayDeadLetterCommand{NowMs: s.now().UnixMilli(), ID: d.ID, MessageID: msgID})
	if err != nil {
		return PushResult{}, err
	}
	if !res.Found {
		return PushResult{}, fmt.Errorf("dead letter %q: %w", id, ErrNotFound)
	}
	out := []PushResult{{TransactionID: command.ReplayTransactionID(d.ID), Queue: d.Queue, Partition: d.Partition}}
	return fillPushResults(out, []command.PushResult{res.Push})[0], nil
}

// DeleteDeadLetter removes one dead letter.
func (s *Service) DeleteDeadLetter(id string) error {
	d, err := s.DeadLetter(id)
	if err != nil {
		return err
	}
	n, err := apply(s, &command.DeleteDeadLettersCommand{IDs: []uint64{d.ID}})
	if err == nil && n == 0 {
		err = fmt.Errorf("dead letter %q: %w", id, ErrNotFound)
	}
	return err
}

// PurgeDeadLetters removes every dead letter, of one queue when queue is
// not empty, in entries of at most command.MaxDeleteDeadLetters, and
// answers how many it removed. Dead letters written while it runs may be
// left.
func (s *Service) PurgeDeadLetters(queue string) (int, error) {
	total := 0
	for {
		var ids []uint64
		err := s.store.View(func(tx *store.Tx) error {
			qid, err := optionalQueueID(tx, queue)
			if err != nil {
				return err
			}
			dls, err := tx.DeadLetters(qid, command.MaxDeleteDeadLetters)
			for _, d := range dls {
				ids = append(ids, d.ID)
			}
			return err
		})
		if err != nil || len(ids) == 0 {
			return total, err
		}
		n, err := apply(s, &command.DeleteDeadLettersCommand{IDs: ids})
		total += n
		if err != nil || n == 0 {
			return total, err // n == 0: this node's view is behind; stop rather than spin
		}
	}
}

// DeadLetter reads one dead letter, with its queue's name, from this
// node's store.
func (s *Service) DeadLetter(id string) (DeadLetter, error) {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		return DeadLetter{}, fmt.Errorf("dead letter %q: %w", id, ErrNotFound)
	}
	var d DeadLetter
	err = s.store.View(func(tx *store.Tx) error {
		dl, err := tx.DeadLetterByID(n)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("dead letter %q: %w", id, ErrNotFound)
		}
		if err != nil {
			return err
		}
		q, err := tx.QueueByID(dl.QueueID)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("the queue of dead letter %q was deleted: %w", id, ErrNotFound)
		}
		d = DeadLetter{DeadLetter: dl, Queue: q.Name}
		return err
	})
	return d, err
}

// LeaseOwner names the group and queue a lease is (or was) on, from this
// node's store, for checking who may extend it; found is false for an
// unknown lease.
func (s *Service) LeaseOwner(leaseID string) (group, queue string, found bool, err error) {
	err = s.store.View(func(tx *store.Tx) error {
		g, c, err := tx.LeaseCursor(leaseID)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		q, err := tx.QueueByID(c.QueueID)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		group, queue, found = g, q.Name, err == nil
		return err
	})
	return group, queue, found, err
}
