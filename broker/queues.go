package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// maxDedupWindowSeconds bounds a queue's dedup window (and message delay):
// 30 days. maxLeaseSeconds bounds a lease: 12 hours.
const (
	maxDedupWindowSeconds = 30 * 24 * 3600
	maxLeaseSeconds       = 12 * 3600
	maxRetentionSeconds   = 100 * 365 * 24 * 3600
)

// command.QueueOptions are a queue's settable options; nil keeps the current value.

// QueueInfo describes a queue and its partitions.
type QueueInfo struct {
	Name               string
	DedupWindowSeconds int64
	LeaseTimeSeconds   int64
	RetryLimit         int32
	DeadLetterQueue    bool
	DelayedProcessing  int64
	KafkaPartitions    int32
	RetentionSeconds   int64 // 0: for ever
	// CompletedRetentionSeconds: 0 keeps finished messages.
	CompletedRetentionSeconds int64
	CreatedAt                 time.Time
	Partitions                []PartitionInfo
}

// PartitionInfo describes one partition: messages live at offsets
// [StartOffset, NextOffset).
type PartitionInfo struct {
	Name        string
	StartOffset uint64
	NextOffset  uint64
}

// Configure creates a queue or merges new options into it.
func (s *Service) Configure(ctx context.Context, queue string, opts command.QueueOptions) (QueueInfo, error) {
	if err := validateQueueName(queue); err != nil {
		return QueueInfo{}, err
	}
	if w := opts.DedupWindowSeconds; w != nil && (*w < 0 || *w > maxDedupWindowSeconds) {
		return QueueInfo{}, fmt.Errorf("%w: dedupWindowSeconds must be between 0 and %d", ErrInvalid, maxDedupWindowSeconds)
	}
	if l := opts.LeaseTimeSeconds; l != nil && (*l < 1 || *l > maxLeaseSeconds) {
		return QueueInfo{}, fmt.Errorf("%w: leaseTime must be between 1 and %d seconds", ErrInvalid, maxLeaseSeconds)
	}
	if r := opts.RetryLimit; r != nil && (*r < 0 || *r > 1000) {
		return QueueInfo{}, fmt.Errorf("%w: retryLimit must be between 0 and 1000", ErrInvalid)
	}
	if d := opts.DelayedProcessingSeconds; d != nil && (*d < 0 || *d > maxDedupWindowSeconds) {
		return QueueInfo{}, fmt.Errorf("%w: delayedProcessing must be between 0 and %d seconds", ErrInvalid, maxDedupWindowSeconds)
	}
	if r := opts.RetentionSeconds; r != nil && (*r < 0 || *r > maxRetentionSeconds) {
		return QueueInfo{}, fmt.Errorf("%w: retentionSeconds must be between 0 (for ever) and %d", ErrInvalid, maxRetentionSeconds)
	}
	if r := opts.CompletedRetentionSeconds; r != nil && (*r < 0 || *r > maxRetentionSeconds) {
		return QueueInfo{}, fmt.Errorf("%w: completedRetentionSeconds must be between 0 (keep) and %d", ErrInvalid, maxRetentionSeconds)
	}
	if n := opts.KafkaPartitions; n != nil && (*n < 1 || *n > 10_000) {
		return QueueInfo{}, fmt.Errorf("%w: partitions must be between 1 and 10000", ErrInvalid)
	}
	cmd := command.ConfigureQueueCommand{NowMs: s.now().UnixMilli(), Queue: queue, Options: opts}
	answer, err := applyFor(ctx, s, &cmd)
	if err != nil {
		return QueueInfo{}, err
	}
	q := answer.Queue
	var info QueueInfo
	err = s.store.View(func(tx *store.Tx) error {
		info, err = queueInfo(tx, q, s.KafkaRetentionMs)
		return err
	})
	return info, err
}

// Queues lists every queue with its partitions, in name order.
func (s *Service) Queues() ([]QueueInfo, error) {
	var out []QueueInfo
	err := s.store.View(func(tx *store.Tx) error {
		qs, err := tx.Queues()
		if err != nil {
			return err
		}
		for _, q := range qs {
			info, err := queueInfo(tx, q, s.KafkaRetentionMs)
			if err != nil {
				return err
			}
			out = append(out, info)
		}
		return nil
	})
	return out, err
}

// Queue describes one queue, or returns ErrNotFound.
func (s *Service) Queue(name string) (QueueInfo, error) {
	var info QueueInfo
	err := s.store.View(func(tx *store.Tx) error {
		q, err := tx.Queue(name)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("queue %q: %w", name, ErrNotFound)
		}
		if err != nil {
			return err
		}
		info, err = queueInfo(tx, q, s.KafkaRetentionMs)
		return err
	})
	return info, err
}

func queueInfo(tx *store.Tx, q store.Queue, kafkaRetentionMs int64) (QueueInfo, error) {
	parts, err := tx.Partitions(q.ID)
	if err != nil {
		return QueueInfo{}, err
	}
	info := QueueInfo{Name: q.Name, DedupWindowSeconds: q.DedupWindowSeconds, CreatedAt: time.UnixMilli(q.CreatedAtMs).UTC(),
		LeaseTimeSeconds: command.LeaseTimeSeconds(q), RetryLimit: command.RetryLimit(q),
		DeadLetterQueue: command.DeadLettering(q), DelayedProcessing: command.DelaySeconds(q), KafkaPartitions: max(q.KafkaPartitions, 1),
		RetentionSeconds: command.RetentionMs(q, kafkaRetentionMs) / 1000, CompletedRetentionSeconds: q.CompletedRetentionMs / 1000}
	for _, p := range parts {
		info.Partitions = append(info.Partitions, PartitionInfo{Name: p.Name, StartOffset: p.StartOffset, NextOffset: p.NextOffset})
	}
	return info, nil
}
