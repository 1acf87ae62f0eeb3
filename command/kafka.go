package command

import (
	"errors"

	"github.com/waggle-mq/waggle/recordbatch"
)

// TopicOutcome is the state machine's answer to a topic command.
type TopicOutcome byte

// Topic outcomes; the kafka package maps them to error codes.
const (
	TopicOK TopicOutcome = iota
	TopicExists
	TopicUnknown
	TopicUnknownPartition
	TopicInvalidPartitions
	// SequenceOutOfOrder and ProducerFenced refuse an idempotent batch
	// (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH).
	SequenceOutOfOrder
	ProducerFenced
	// TopicInvalidConfig refuses an AlterTopicCommand naming an unknown
	// config.
	TopicInvalidConfig
	// OffsetOutOfRange refuses a DeleteRecords offset past the high
	// watermark.
	OffsetOutOfRange
)

// CreateTopicCommand creates a queue from Kafka: dedup window 0 (Kafka
// records carry no transactionId), Partitions Kafka partitions.
type CreateTopicCommand struct {
	NowMs           int64
	Name            string
	Partitions      int32
	RetentionMs     int64
	MaxMessageBytes int32
	// Added after the first release: entries that end before them read 0.
	SegmentBytes int64
	SegmentMs    int64
	// Added later still.
	RetentionBytes int64
	// Settings are further topic configs (ApplyTopicSettings), written
	// only when there are some: an entry with them needs log format 2.
	Settings []TopicSetting
}

// since: a topic created with Settings needs format 2 (or the format of
// the newest config among them); without, format 1 reads it.
func (c *CreateTopicCommand) since() LogFormat {
	if len(c.Settings) > 0 {
		return settingsSince(c.Settings, LogFormat2)
	}
	return LogFormat1
}

// Encode returns the raft entry for the command.
func (c *CreateTopicCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdCreateTopic))
	e.varint(c.NowMs)
	e.string(c.Name)
	e.varint(int64(c.Partitions))
	e.varint(c.RetentionMs)
	e.varint(int64(c.MaxMessageBytes))
	e.varint(c.SegmentBytes)
	e.varint(c.SegmentMs)
	e.varint(c.RetentionBytes)
	if len(c.Settings) > 0 {
		e.uvarint(uint64(len(c.Settings)))
		for _, s := range c.Settings {
			e.string(s.Name)
			e.varint(s.Value)
		}
	}
	return e.b
}

func decodeCreateTopic(b []byte) (*CreateTopicCommand, error) {
	d := decoder{b: b}
	c := &CreateTopicCommand{NowMs: d.varint(), Name: d.string(), Partitions: int32(d.varint()),
		RetentionMs: d.varint(), MaxMessageBytes: int32(d.varint())}
	if d.more() {
		c.SegmentBytes, c.SegmentMs = d.varint(), d.varint()
	}
	if d.more() {
		c.RetentionBytes = d.varint()
	}
	if d.more() {
		if n := d.count(2); n > 0 {
			c.Settings = make([]TopicSetting, n)
			for i := range c.Settings {
				c.Settings[i] = TopicSetting{Name: d.string(), Value: d.varint()}
			}
		}
	}
	return c, d.finish()
}

// AddPartitionsCommand raises a topic's Kafka partition count.
type AddPartitionsCommand struct {
	Name  string
	Count int32
}

// Encode returns the raft entry for the command.
func (c *AddPartitionsCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdAddPartitions))
	e.string(c.Name)
	e.varint(int64(c.Count))
	return e.b
}

func decodeAddPartitions(b []byte) (*AddPartitionsCommand, error) {
	d := decoder{b: b}
	c := &AddPartitionsCommand{Name: d.string(), Count: int32(d.varint())}
	return c, d.finish()
}

// DeleteQueueCommand deletes a queue (a topic) with its partitions. The
// queue disappears at once; its data is removed by cleanup entries.
type DeleteQueueCommand struct {
	Name string
}

// Encode returns the raft entry for the command.
func (c *DeleteQueueCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdDeleteQueue))
	e.string(c.Name)
	return e.b
}

func decodeDeleteQueue(b []byte) (*DeleteQueueCommand, error) {
	d := decoder{b: b}
	c := &DeleteQueueCommand{Name: d.string()}
	return c, d.finish()
}

// ProduceCommand appends validated Kafka record batches to one partition
// of a topic. With AutoCreatePartitions > 0 a missing topic is created
// (dedup window 0) with that many partitions first.
type ProduceCommand struct {
	NowMs                int64
	Topic                string
	Partition            int32
	AutoCreatePartitions int32
	Batches              []ProduceBatch
}

// ProduceBatch is one record batch as the producer sent it, with the header
// fields the state machine needs lifted out by the leader.
type ProduceBatch struct {
	NumRecords   int32
	MaxTimestamp int64
	// ProducerID < 0: not an idempotent batch.
	ProducerID    int64
	ProducerEpoch int16
	FirstSequence int32
	Raw           []byte
}

// lastSequence is the sequence of the batch's last record; they wrap at 2^31-1.
func (b ProduceBatch) LastSequence() int32 {
	return int32((int64(b.FirstSequence) + int64(b.NumRecords) - 1) % (1 << 31))
}

// ProduceResult answers a ProduceCommand: the first offset given to its
// first batch, or why nothing was appended.
type ProduceResult struct {
	Outcome      TopicOutcome
	BaseOffset   int64
	LogStart     int64
	AppendTimeMs int64
}

// minProduceBatchSize is the fewest bytes one encoded batch takes.
const minProduceBatchSize = 3

// Encode returns the raft entry for the command.
func (c *ProduceCommand) Encode() []byte {
	size := 32 + len(c.Topic)
	for _, b := range c.Batches {
		size += len(b.Raw) + 16
	}
	e := encoder{b: make([]byte, 0, size)}
	e.byte(byte(CmdProduce))
	e.varint(c.NowMs)
	e.string(c.Topic)
	e.varint(int64(c.Partition))
	e.varint(int64(c.AutoCreatePartitions))
	e.uvarint(uint64(len(c.Batches)))
	for _, b := range c.Batches {
		e.varint(int64(b.NumRecords))
		e.varint(b.MaxTimestamp)
		e.varint(b.ProducerID)
		e.varint(int64(b.ProducerEpoch))
		e.varint(int64(b.FirstSequence))
		e.bytes(b.Raw)
	}
	return e.b
}

func decodeProduce(b []byte) (*ProduceCommand, error) {
	d := decoder{b: b}
	c := &ProduceCommand{NowMs: d.varint(), Topic: d.string(), Partition: int32(d.varint()), AutoCreatePartitions: int32(d.varint())}
	c.Batches = make([]ProduceBatch, d.count(minProduceBatchSize))
	for i := range c.Batches {
		c.Batches[i] = ProduceBatch{NumRecords: int32(d.varint()), MaxTimestamp: d.varint(), ProducerID: d.varint(),
			ProducerEpoch: int16(d.varint()), FirstSequence: int32(d.varint()), Raw: d.bytes()}
	}
	if d.err == nil {
		for _, b := range c.Batches {
			if b.NumRecords <= 0 || len(b.Raw) < recordbatch.HeaderSize {
				return nil, errors.New("command: produce batch without records")
			}
		}
	}
	return c, d.finish()
}
