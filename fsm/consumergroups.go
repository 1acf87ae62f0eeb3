package fsm

import (
	"errors"
	"strconv"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// commitOffsets answers one outcome per offset: TopicUnknown or
// TopicUnknownPartition for a partition that does not exist. A Kafka commit
// sets the cursor's offset and keeps whatever else the cursor holds.
func (p *Processor) commitOffsets(tx *store.Tx, meta *store.Meta, c *command.CommitOffsetsCommand) []command.TopicOutcome {
	out := make([]command.TopicOutcome, len(c.Offsets))
	for i, o := range c.Offsets {
		q, err := tx.Queue(o.Topic)
		if errors.Is(err, store.ErrNotFound) {
			out[i] = command.TopicUnknown
			continue
		}
		must(err)
		if o.Partition < 0 || o.Partition >= max(q.KafkaPartitions, 1) {
			out[i] = command.TopicUnknownPartition
			continue
		}
		name := strconv.Itoa(int(o.Partition))
		part, err := tx.Partition(q.ID, name)
		if errors.Is(err, store.ErrNotFound) {
			part, err = store.Partition{QueueID: q.ID, Name: name}, nil
		}
		must(err)
		view, err := tx.ConsumerGroupView(c.Group, q.ID)
		must(err)
		cur, _, err := tx.Position(view, part)
		must(err)
		cur.Offset, cur.LeaderEpoch, cur.Metadata, cur.UpdatedMs = o.Offset, o.LeaderEpoch, o.Metadata, meta.ClockMs
		must(tx.PutCursor(c.Group, cur, meta.NextID))
	}
	return out
}

// deleteOffsets answers how many positions it removed; deleting a whole
// group answers 1 if the group had any. A whole group goes at once through
// a group record and a tombstone; cleanup entries remove its records.
func (p *Processor) deleteOffsets(tx *store.Tx, meta *store.Meta, c *command.DeleteOffsetsCommand) int {
	n := 0
	if c.All {
		existed, err := tx.DeleteGroup(c.Group, meta.NextID)
		must(err)
		must(tx.DeleteClassicGroup(c.Group))                               // from log format 6; none before
		if cfg, err := tx.GroupConfig(c.Group); err != nil || cfg != nil { // from log format 7; none before
			must(err)
			must(tx.PutGroupConfig(c.Group, nil))
		}
		meta.NextID++
		if existed {
			n = 1
		}
		return n
	}
	for _, o := range c.Offsets {
		q, err := tx.Queue(o.Topic)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		must(err)
		view, err := tx.ConsumerGroupView(c.Group, q.ID)
		must(err)
		name := strconv.Itoa(int(o.Partition))
		if view.Subscribed && view.Sub.Reset != nil {
			// Without a cursor the reset would still place the group:
			// store one that says "no position" instead.
			must(tx.PutCursor(c.Group, store.Cursor{QueueID: q.ID, Partition: name, Offset: store.NoPosition}, meta.NextID))
		} else {
			must(tx.DeleteCursor(c.Group, q.ID, name))
		}
		n++
	}
	return n
}

// saveClassicGroup records a classic Kafka group's generation, or removes
// the record of an emptied group (store.Tx.SaveClassicGroup keeps the
// newest generation).
func (p *Processor) saveClassicGroup(tx *store.Tx, _ *store.Meta, c *command.SaveClassicGroupCommand) any {
	must(tx.SaveClassicGroup(c.Group))
	return nil
}

// alterGroupConfig applies a group's config changes in order. Past
// command.MaxGroupConfigs configs a set is dropped (the broker refuses
// such a request before it is proposed).
func (p *Processor) alterGroupConfig(tx *store.Tx, _ *store.Meta, c *command.AlterGroupConfigCommand) any {
	cfg, err := tx.GroupConfig(c.Group)
	must(err)
	if cfg == nil || c.Replace {
		cfg = map[string]string{}
	}
	for _, ch := range c.Changes {
		_, had := cfg[ch.Name]
		switch {
		case ch.Remove:
			delete(cfg, ch.Name)
		case had || len(cfg) < command.MaxGroupConfigs:
			cfg[ch.Name] = ch.Value
		}
	}
	must(tx.PutGroupConfig(c.Group, cfg))
	return nil
}
