package raftfsm

import (
	"errors"
	"strconv"

	"github.com/waggle-mq/waggle/store"
)

// OffsetCommit is one partition's position in a CommitOffsetsCommand or a
// DeleteOffsetsCommand (where only Topic and Partition matter).
type OffsetCommit struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// CommitOffsetsCommand stores a consumer group's committed offsets.
type CommitOffsetsCommand struct {
	NowMs   int64
	Group   string
	Offsets []OffsetCommit
}

// DeleteOffsetsCommand forgets a group's committed offsets: the listed
// ones, or the whole group (cursors, leases, subscriptions) when All is set.
type DeleteOffsetsCommand struct {
	Group   string
	All     bool
	Offsets []OffsetCommit
}

// minOffsetCommitSize is the fewest bytes one encoded OffsetCommit takes.
const minOffsetCommitSize = 5

func encodeOffsets(e *encoder, offsets []OffsetCommit) {
	e.uvarint(uint64(len(offsets)))
	for _, o := range offsets {
		e.string(o.Topic)
		e.varint(int64(o.Partition))
		e.varint(o.Offset)
		e.varint(int64(o.LeaderEpoch))
		e.string(o.Metadata)
	}
}

func decodeOffsets(d *decoder) []OffsetCommit {
	out := make([]OffsetCommit, d.count(minOffsetCommitSize))
	for i := range out {
		out[i] = OffsetCommit{Topic: d.string(), Partition: int32(d.varint()), Offset: d.varint(),
			LeaderEpoch: int32(d.varint()), Metadata: d.string()}
	}
	return out
}

// Encode returns the raft entry for the command.
func (c *CommitOffsetsCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdCommitOffsets))
	e.varint(c.NowMs)
	e.string(c.Group)
	encodeOffsets(&e, c.Offsets)
	return e.b
}

func decodeCommitOffsets(b []byte) (*CommitOffsetsCommand, error) {
	d := decoder{b: b}
	c := &CommitOffsetsCommand{NowMs: d.varint(), Group: d.string()}
	c.Offsets = decodeOffsets(&d)
	return c, d.finish()
}

// Encode returns the raft entry for the command.
func (c *DeleteOffsetsCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdDeleteOffsets))
	e.string(c.Group)
	if c.All {
		e.byte(1)
	} else {
		e.byte(0)
	}
	encodeOffsets(&e, c.Offsets)
	return e.b
}

func decodeDeleteOffsets(b []byte) (*DeleteOffsetsCommand, error) {
	d := decoder{b: b}
	c := &DeleteOffsetsCommand{Group: d.string(), All: d.byte() == 1}
	c.Offsets = decodeOffsets(&d)
	return c, d.finish()
}

// commitOffsets answers one outcome per offset: TopicUnknown or
// TopicUnknownPartition for a partition that does not exist. A Kafka commit
// sets the cursor's offset and keeps whatever else the cursor holds.
func (p *Processor) commitOffsets(tx *store.Tx, meta *store.Meta, c *CommitOffsetsCommand) []TopicOutcome {
	out := make([]TopicOutcome, len(c.Offsets))
	for i, o := range c.Offsets {
		q, err := tx.Queue(o.Topic)
		if errors.Is(err, store.ErrNotFound) {
			out[i] = TopicUnknown
			continue
		}
		must(err)
		if o.Partition < 0 || o.Partition >= max(q.KafkaPartitions, 1) {
			out[i] = TopicUnknownPartition
			continue
		}
		name := strconv.Itoa(int(o.Partition))
		part, err := tx.Partition(q.ID, name)
		if errors.Is(err, store.ErrNotFound) {
			part, err = store.Partition{QueueID: q.ID, Name: name}, nil
		}
		must(err)
		view, err := tx.GroupView(c.Group, q.ID)
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
func (p *Processor) deleteOffsets(tx *store.Tx, meta *store.Meta, c *DeleteOffsetsCommand) int {
	n := 0
	if c.All {
		existed, err := tx.DeleteGroup(c.Group, meta.NextID)
		must(err)
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
		view, err := tx.GroupView(c.Group, q.ID)
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
