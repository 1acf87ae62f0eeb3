package command

import (
	"errors"

	"github.com/waggle-mq/waggle/store"
)

// Kafka transactions (KIP-98). The coordinator's state for a transactional
// id is replicated state (store.TxnState), so a transaction in progress
// survives a leader change and the new leader can end it. Ending one is a
// single entry: the markers on every partition it wrote to, the consumer
// offsets it staged, and its new state commit together, so there is no
// "prepare" phase to recover from.

// Transaction limits: one transaction touches at most MaxTxnPartitions
// partitions and MaxTxnGroups consumer groups, and stages at most
// MaxOffsetsPerEntry offsets, so the entry that ends it stays bounded.
const (
	MaxTxnPartitions = 1000
	MaxTxnGroups     = 100
	// MaxTxnTimeoutMs is Kafka's transaction.max.timeout.ms default.
	MaxTxnTimeoutMs = 900_000
)

// Transaction outcomes beyond the topic ones; the kafka package maps them.
const (
	// TxnInvalidState: the call does not fit where the transaction stands
	// (INVALID_TXN_STATE), e.g. a transactional write to a partition not
	// added to the transaction, or EndTxn with none in progress.
	TxnInvalidState TopicOutcome = iota + 64
	// TxnUnknownProducer: the producer id is not the transactional id's
	// (INVALID_PRODUCER_ID_MAPPING).
	TxnUnknownProducer
	// TxnInvalidTimeout: a timeout outside 1..MaxTxnTimeoutMs
	// (INVALID_TRANSACTION_TIMEOUT).
	TxnInvalidTimeout
	// TxnTooLarge: past MaxTxnPartitions, MaxTxnGroups or the staged
	// offsets' bound.
	TxnTooLarge
	// TxnNotAttempted: another partition of the same call was refused
	// (OPERATION_NOT_ATTEMPTED).
	TxnNotAttempted
)

// InitTxnProducerCommand gives a transactional id its producer id and a new
// epoch, fencing every earlier incarnation (KIP-98); a transaction the
// previous incarnation left open is aborted first. ProducerID and Epoch
// are the caller's current ones (KIP-360), or -1.
type InitTxnProducerCommand struct {
	NowMs           int64
	TransactionalID string
	TimeoutMs       int32
	ProducerID      int64
	Epoch           int16
}

// TxnProducerResult answers InitTxnProducerCommand.
type TxnProducerResult struct {
	Outcome    TopicOutcome
	ProducerID int64
	Epoch      int16
}

func (c *InitTxnProducerCommand) since() LogFormat { return LogFormat2 }

// Encode returns the raft entry for the command.
func (c *InitTxnProducerCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdInitTxnProducer))
	e.varint(c.NowMs)
	e.string(c.TransactionalID)
	e.varint(int64(c.TimeoutMs))
	e.varint(c.ProducerID)
	e.varint(int64(c.Epoch))
	return e.b
}

func decodeInitTxnProducer(b []byte) (*InitTxnProducerCommand, error) {
	d := decoder{b: b}
	c := &InitTxnProducerCommand{NowMs: d.varint(), TransactionalID: d.string(), TimeoutMs: int32(d.varint()),
		ProducerID: d.varint(), Epoch: int16(d.varint())}
	return c, d.finish()
}

// AddToTxnCommand adds partitions (AddPartitionsToTxn) or consumer groups
// (AddOffsetsToTxn) to a producer's transaction, starting it if none is in
// progress.
type AddToTxnCommand struct {
	NowMs           int64
	TransactionalID string
	ProducerID      int64
	Epoch           int16
	Partitions      []store.TxnPartition
	Groups          []string
}

// AddToTxnResult answers AddToTxnCommand: Outcome for the whole call, and
// one outcome per partition, in order.
type AddToTxnResult struct {
	Outcome    TopicOutcome
	Partitions []TopicOutcome
}

func (c *AddToTxnCommand) since() LogFormat { return LogFormat2 }

// Encode returns the raft entry for the command.
func (c *AddToTxnCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdAddToTxn))
	e.txnProducer(c.NowMs, c.TransactionalID, c.ProducerID, c.Epoch)
	e.uvarint(uint64(len(c.Partitions)))
	for _, tp := range c.Partitions {
		e.string(tp.Topic)
		e.varint(int64(tp.Partition))
	}
	e.uvarint(uint64(len(c.Groups)))
	for _, g := range c.Groups {
		e.string(g)
	}
	return e.b
}

// txnProducer writes the fields every call of a transaction starts with.
func (e *encoder) txnProducer(nowMs int64, id string, producerID int64, epoch int16) {
	e.varint(nowMs)
	e.string(id)
	e.varint(producerID)
	e.varint(int64(epoch))
}

func (d *decoder) txnProducer() (nowMs int64, id string, producerID int64, epoch int16) {
	return d.varint(), d.string(), d.varint(), int16(d.varint())
}

func decodeAddToTxn(b []byte) (*AddToTxnCommand, error) {
	d := decoder{b: b}
	c := &AddToTxnCommand{}
	c.NowMs, c.TransactionalID, c.ProducerID, c.Epoch = d.txnProducer()
	if n := d.count(2); n > 0 {
		c.Partitions = make([]store.TxnPartition, n)
		for i := range c.Partitions {
			c.Partitions[i] = store.TxnPartition{Topic: d.string(), Partition: int32(d.varint())}
		}
	}
	if n := d.count(1); n > 0 {
		c.Groups = make([]string, n)
		for i := range c.Groups {
			c.Groups[i] = d.string()
		}
	}
	return c, d.finish()
}

// TxnOffsetCommitCommand stages consumer group offsets in a transaction:
// they are committed when it commits and dropped when it aborts.
type TxnOffsetCommitCommand struct {
	NowMs           int64
	TransactionalID string
	ProducerID      int64
	Epoch           int16
	Group           string
	Offsets         []OffsetCommit
}

func (c *TxnOffsetCommitCommand) since() LogFormat { return LogFormat2 }

// Encode returns the raft entry for the command.
func (c *TxnOffsetCommitCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdTxnOffsetCommit))
	e.txnProducer(c.NowMs, c.TransactionalID, c.ProducerID, c.Epoch)
	e.string(c.Group)
	encodeOffsets(&e, c.Offsets)
	return e.b
}

func decodeTxnOffsetCommit(b []byte) (*TxnOffsetCommitCommand, error) {
	d := decoder{b: b}
	c := &TxnOffsetCommitCommand{}
	c.NowMs, c.TransactionalID, c.ProducerID, c.Epoch = d.txnProducer()
	c.Group = d.string()
	c.Offsets = decodeOffsets(&d)
	return c, d.finish()
}

// EndTxnCommand commits or aborts a producer's transaction. The leader
// also proposes it, with TimedOut set, to abort a transaction that has
// outlived its timeout; that abort bumps the epoch, fencing the producer
// (its later calls answer PRODUCER_FENCED), as Kafka does.
type EndTxnCommand struct {
	NowMs           int64
	TransactionalID string
	ProducerID      int64
	Epoch           int16
	Commit          bool
	TimedOut        bool
}

func (c *EndTxnCommand) since() LogFormat { return LogFormat2 }

// Encode returns the raft entry for the command.
func (c *EndTxnCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdEndTxn))
	e.txnProducer(c.NowMs, c.TransactionalID, c.ProducerID, c.Epoch)
	var flags byte
	if c.Commit {
		flags |= 1
	}
	if c.TimedOut {
		flags |= 2
	}
	e.byte(flags)
	return e.b
}

func decodeEndTxn(b []byte) (*EndTxnCommand, error) {
	d := decoder{b: b}
	c := &EndTxnCommand{}
	c.NowMs, c.TransactionalID, c.ProducerID, c.Epoch = d.txnProducer()
	flags := d.byte()
	c.Commit, c.TimedOut = flags&1 != 0, flags&2 != 0
	return c, d.finish()
}

// EndTxnBumpCommand commits or aborts a producer's transaction and moves
// the transactional id to its next epoch (Kafka's transaction version 2,
// KIP-890 part 2: EndTxn v5+), answering the producer id and epoch the
// next transaction uses. An abort with no transaction in progress only
// moves the epoch. A retry from the epoch before, after the call it
// repeats went through, is answered again with the current pair.
type EndTxnBumpCommand struct {
	NowMs           int64
	TransactionalID string
	ProducerID      int64
	Epoch           int16
	Commit          bool
}

func (c *EndTxnBumpCommand) since() LogFormat { return LogFormat9 }

// Encode returns the raft entry for the command.
func (c *EndTxnBumpCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdEndTxnBump))
	e.txnProducer(c.NowMs, c.TransactionalID, c.ProducerID, c.Epoch)
	e.bool(c.Commit)
	return e.b
}

func decodeEndTxnBump(b []byte) (*EndTxnBumpCommand, error) {
	d := decoder{b: b}
	c := &EndTxnBumpCommand{}
	c.NowMs, c.TransactionalID, c.ProducerID, c.Epoch = d.txnProducer()
	c.Commit = d.byte() == 1
	return c, d.finish()
}

// TxnIDExpirationMs is how long a transactional id without a transaction
// in progress is kept after its last use, in replicated time (Kafka's
// transactional.id.expiration.ms default, 7 days).
const TxnIDExpirationMs = 7 * 24 * 3600 * 1000

// MaxForgetTxns bounds the ids one ForgetTxnsCommand names.
const MaxForgetTxns = 1000

// ForgetTxnsCommand forgets transactional ids unused for
// TxnIDExpirationMs; the leader proposes it for the ids it found expired,
// and the state machine checks each again by the replicated clock. A
// producer that comes back later starts afresh with a new producer id.
type ForgetTxnsCommand struct {
	NowMs int64
	IDs   []string
}

func (c *ForgetTxnsCommand) since() LogFormat { return LogFormat2 }

// Encode returns the raft entry for the command.
func (c *ForgetTxnsCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdForgetTxns))
	e.varint(c.NowMs)
	e.uvarint(uint64(len(c.IDs)))
	for _, id := range c.IDs {
		e.string(id)
	}
	return e.b
}

func decodeForgetTxns(b []byte) (*ForgetTxnsCommand, error) {
	d := decoder{b: b}
	c := &ForgetTxnsCommand{NowMs: d.varint()}
	n := d.count(1)
	if n > MaxForgetTxns {
		return nil, errors.New("command: too many transactional ids in one forget entry")
	}
	if n > 0 {
		c.IDs = make([]string, n)
		for i := range c.IDs {
			c.IDs[i] = d.string()
		}
	}
	return c, d.finish()
}

// TxnExpired reports whether a transactional id may be forgotten at nowMs.
func TxnExpired(st store.TxnState, nowMs int64) bool {
	return st.Status != store.TxnOngoing && nowMs-st.UpdatedMs >= TxnIDExpirationMs
}
