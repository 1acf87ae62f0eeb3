package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/dedup"
	"github.com/waggle-mq/waggle/store"
)

// MaxPushItems bounds the items of one push, which become one raft entry.
const MaxPushItems = 10_000

// PushItem is one message to push.
type PushItem struct {
	Queue         string
	Partition     string // empty: DefaultPartition
	TransactionID string // empty: the message id, so never deduplicated
	Payload       []byte // a JSON document
}

// Push statuses, as the HTTP API spells them.
const (
	StatusQueued    = "queued"
	StatusDuplicate = "duplicate"
	StatusError     = "error"
)

// PushResult answers one pushed item.
type PushResult struct {
	Index         int
	MessageID     string
	TransactionID string
	Queue         string
	Partition     string
	Status        string
	Offset        uint64 // meaningful for queued and duplicate
	Error         string // for StatusError
}

// Push stores the items in one raft entry and answers each in request
// order. A transactionId seen in the item's (queue, partition) inside the
// queue's dedup window, or earlier in the same request, stores nothing and
// answers duplicate with the original message id and offset. An item that
// breaks a per-item rule answers error and the others go on; a request
// that is malformed as a whole returns ErrInvalid and writes nothing.
func (s *Service) Push(ctx context.Context, items []PushItem) ([]PushResult, error) {
	if len(items) == 0 {
		return nil, fmt.Errorf("%w: items is empty", ErrInvalid)
	}
	if len(items) > MaxPushItems {
		return nil, fmt.Errorf("%w: %d items; at most %d in one push", ErrInvalid, len(items), MaxPushItems)
	}
	if err := s.admitGrowth(); err != nil {
		return nil, err
	}
	stamped, results, err := s.stampItems(ctx, "push", items)
	if err != nil || len(stamped) == 0 {
		return results, err
	}
	if err := s.checkTargets(stamped); err != nil {
		return nil, err
	}
	cmd := command.PushCommand{NowMs: s.now().UnixMilli(), Items: stamped}
	answer, err := applyFor(ctx, s, &cmd)
	if err != nil {
		return nil, err
	}
	return fillPushResults(results, answer), nil
}

// checkTargets refuses items that reach more distinct partitions than one
// raft entry may write to, and items for a compacted queue: compaction
// keeps the newest record of each key, and an HTTP push carries no key (as
// Kafka refuses keyless records on a compacted topic).
func (s *Service) checkTargets(items []command.PushItem) error {
	targets := map[[2]string]struct{}{}
	queues := map[string]struct{}{}
	for _, it := range items {
		targets[[2]string{it.Queue, it.Partition}] = struct{}{}
		if len(targets) > command.MaxPushTargets {
			return fmt.Errorf("%w: the items reach more than %d distinct partitions; split the push", ErrInvalid, command.MaxPushTargets)
		}
		queues[it.Queue] = struct{}{}
	}
	return s.store.View(func(tx *store.Tx) error {
		for name := range queues {
			q, err := tx.Queue(name)
			if errors.Is(err, store.ErrNotFound) {
				continue // created by the push, with the default policy
			}
			if err != nil {
				return err
			}
			if q.Compacts() {
				return fmt.Errorf("%w: queue %s is compacted (its Kafka cleanup.policy), which keeps the newest record of each key, and a push carries no key; produce keyed records over Kafka", ErrInvalid, name)
			}
		}
		return nil
	})
}

// stampItems validates items and mints their message ids (leader only);
// scope names the items within their request, for the transaction ids a
// keyed request mints (see mintID). It returns the items to put in the
// command, and a result per item in which
// an item that breaks a per-item rule already answers error (and is left
// out of the command).
func (s *Service) stampItems(ctx context.Context, scope string, items []PushItem) ([]command.PushItem, []PushResult, error) {
	results := make([]PushResult, len(items))
	stamped := make([]command.PushItem, 0, len(items))
	for i, it := range items {
		if err := validateQueueName(it.Queue); err != nil {
			return nil, nil, fmt.Errorf("items[%d]: %w", i, err)
		}
		part, err := partitionName(it.Partition)
		if err != nil {
			return nil, nil, fmt.Errorf("items[%d]: %w", i, err)
		}
		if it.Payload == nil {
			return nil, nil, fmt.Errorf("items[%d]: %w: payload is required", i, ErrInvalid)
		}
		results[i] = PushResult{Index: i, TransactionID: it.TransactionID, Queue: it.Queue, Partition: part}
		if len(it.TransactionID) > dedup.MaxIDBytes {
			results[i].Status = StatusError
			results[i].Error = fmt.Sprintf("transactionId is %d bytes; at most %d", len(it.TransactionID), dedup.MaxIDBytes)
			results[i].TransactionID = ""
			continue
		}
		id, err := uuid.NewV7()
		if err != nil {
			return nil, nil, fmt.Errorf("mint message id: %w", err)
		}
		if it.TransactionID == "" {
			results[i].TransactionID = id.String()
			if _, keyed := RequestKeyOf(ctx); keyed {
				results[i].TransactionID = mintID(ctx, fmt.Sprintf("%s/item/%d", scope, i)).String()
			}
		}
		stamped = append(stamped, command.PushItem{
			Queue:         it.Queue,
			Partition:     part,
			TransactionID: results[i].TransactionID,
			MessageID:     id,
			Payload:       it.Payload,
		})
	}
	return stamped, results, nil
}

// fillPushResults completes the results of the stamped items (those not
// already in error, in order) from the state machine's answers.
func fillPushResults(results []PushResult, answers []command.PushResult) []PushResult {
	j := 0
	for i := range results {
		if results[i].Status == StatusError {
			continue
		}
		r, res := answers[j], &results[i]
		j++
		res.MessageID = uuid.UUID(r.MessageID).String()
		res.Offset = r.Offset
		switch r.Status {
		case command.PushQueued:
			res.Status = StatusQueued
		case command.PushDuplicate:
			res.Status = StatusDuplicate
		default:
			res.Status, res.Error, res.MessageID = StatusError, r.Error, ""
		}
	}
	return results
}
