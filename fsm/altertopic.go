package fsm

import (
	"errors"
	"strconv"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

func (p *Processor) alterTopic(tx *store.Tx, _ *store.Meta, c *command.AlterTopicCommand) command.TopicOutcome {
	q, err := tx.Queue(c.Name)
	if errors.Is(err, store.ErrNotFound) {
		return command.TopicUnknown
	}
	must(err)
	if !command.ApplyTopicSettings(&q, c.Settings) {
		return command.TopicInvalidConfig
	}
	must(tx.PutQueue(q))
	return command.TopicOK
}

func (p *Processor) deleteRecords(tx *store.Tx, _ *store.Meta, c *command.DeleteRecordsCommand) []command.DeleteRecordsResult {
	out := make([]command.DeleteRecordsResult, len(c.Partitions))
	q, err := tx.Queue(c.Topic)
	if errors.Is(err, store.ErrNotFound) {
		for i := range out {
			out[i].Outcome = command.TopicUnknown
		}
		return out
	}
	must(err)
	for i, rb := range c.Partitions {
		if rb.Partition < 0 || rb.Partition >= max(q.KafkaPartitions, 1) {
			out[i].Outcome = command.TopicUnknownPartition
			continue
		}
		part, err := tx.Partition(q.ID, strconv.Itoa(int(rb.Partition)))
		if errors.Is(err, store.ErrNotFound) {
			part, err = store.Partition{}, nil // never written to: empty
		}
		must(err)
		to := rb.Offset
		if to == -1 {
			to = int64(part.NextOffset)
		}
		switch {
		case to < 0 || to > int64(part.NextOffset):
			out[i].Outcome = command.OffsetOutOfRange
			continue
		case uint64(to) > part.StartOffset:
			part.StartOffset = uint64(to)
			must(tx.PutPartition(part))
		}
		out[i].LowWatermark = int64(part.StartOffset)
	}
	return out
}
