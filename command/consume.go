package command

import (
	"fmt"
	"strconv"
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
		return nil, fmt.Errorf("command: pop batch %d", c.Batch)
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
