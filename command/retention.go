package command

import (
	"math"

	"github.com/waggle-mq/waggle/store"
)

// DefaultKafkaRetentionMs is how long a topic created over Kafka keeps its
// records when it sets no retention.ms: Kafka's default, 7 days. A node's
// flag can change it; the leader stamps the cutoff it implies into each
// retain entry.
const DefaultKafkaRetentionMs = 7 * 24 * 3600 * 1000

// RetentionMs is how long a queue keeps its messages, or 0 for ever: a
// topic created over Kafka without retention.ms has kafkaDefaultMs, any
// other queue keeps its messages unless its retention is set. A negative
// setting (Kafka's -1) is for ever.
func RetentionMs(q store.Queue, kafkaDefaultMs int64) int64 {
	switch {
	case q.RetentionMs > 0:
		return q.RetentionMs
	case q.RetentionMs == 0 && q.KafkaCreated:
		return max(kafkaDefaultMs, 0)
	}
	return 0
}

// RetentionBytes is how many bytes of a queue's stream retention keeps at
// least (0: no limit): Kafka's retention.bytes is per partition, and a
// topic's partitions share one stream, so the stream keeps that many bytes
// per partition. The oldest segments go first, whichever partitions their
// records belong to.
func RetentionBytes(q store.Queue) uint64 {
	if q.RetentionBytes <= 0 {
		return 0
	}
	per, parts := uint64(q.RetentionBytes), uint64(max(q.KafkaPartitions, 1))
	if per > math.MaxUint64/parts {
		return 0 // more than any disk holds: no limit (not a product that wrapped round)
	}
	return per * parts
}

// RetainCommand drops a queue's message data before stream position Pos,
// in whole sealed segments whose last append is before CutoffMs, or that
// the stream holds KeepBytes without, or that end at or before
// CompletedPos with their last append before CompletedCutoffMs. The leader
// proposes it from store.Tx.RetentionPoint; a proposal that no longer
// holds changes nothing. CompletedPos is the leader's reading of its
// consumer groups (store.Tx.CompletedPoint, too much work to repeat in an
// entry): a group created or moved back after it may find those messages
// gone.
type RetainCommand struct {
	NowMs    int64
	QueueID  uint64
	Pos      uint64
	CutoffMs int64
	// Added after the first release: entries that end before them read 0.
	KeepBytes         uint64
	CompletedPos      uint64
	CompletedCutoffMs int64
}

// RetainResult says whether the entry started a trim.
type RetainResult struct {
	Started bool
}

// Encode returns the raft entry for the command.
func (c *RetainCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdRetain))
	e.varint(c.NowMs)
	e.uvarint(c.QueueID)
	e.uvarint(c.Pos)
	e.varint(c.CutoffMs)
	e.uvarint(c.KeepBytes)
	e.uvarint(c.CompletedPos)
	e.varint(c.CompletedCutoffMs)
	return e.b
}

func decodeRetain(b []byte) (*RetainCommand, error) {
	d := decoder{b: b}
	c := &RetainCommand{NowMs: d.varint(), QueueID: d.uvarint(), Pos: d.uvarint(), CutoffMs: d.varint()}
	if d.more() {
		c.KeepBytes = d.uvarint()
	}
	if d.more() {
		c.CompletedPos, c.CompletedCutoffMs = d.uvarint(), d.varint()
	}
	return c, d.finish()
}
