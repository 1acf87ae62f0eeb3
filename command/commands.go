package command

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/waggle-mq/waggle/store"
)

// CommandType is the first byte of every raft entry waggle writes. Types are
// only ever appended, never renumbered or reused: old entries stay in logs
// and snapshots. A changed format gets a new type (see LogFormat).
type CommandType byte

// Command types.
const (
	CmdPush           CommandType = 1
	CmdConfigureQueue CommandType = 2
	CmdPruneDedup     CommandType = 3
	CmdRegisterNode   CommandType = 4
	CmdForgetNode     CommandType = 5
	CmdCreateTopic    CommandType = 6
	CmdProduce        CommandType = 7
	CmdAddPartitions  CommandType = 8
	CmdDeleteQueue    CommandType = 9
	CmdNewProducerID  CommandType = 10
	CmdCommitOffsets  CommandType = 11
	CmdDeleteOffsets  CommandType = 12
	CmdPop            CommandType = 13
	CmdAck            CommandType = 14
	CmdExtendLease    CommandType = 15
	CmdSeek           CommandType = 16
	// Log format 1 wrote KV, transaction, timers and tick entries as JSON
	// (see legacyJSON); they stay decodable.
	CmdKVJSON          CommandType = 17
	CmdTransactionJSON CommandType = 18
	CmdTimersJSON      CommandType = 19
	CmdTickJSON        CommandType = 20
	CmdCleanup         CommandType = 21
	CmdRetain          CommandType = 22
	// Log format 2.
	CmdKV            CommandType = 23
	CmdTransaction   CommandType = 24
	CmdTimers        CommandType = 25
	CmdTick          CommandType = 26
	CmdSetLogFormat  CommandType = 27
	CmdAlterTopic    CommandType = 28
	CmdDeleteRecords CommandType = 29
	// Kafka transactions (kafkatxn.go) and log compaction (compact.go),
	// log format 2.
	CmdInitTxnProducer CommandType = 30
	CmdAddToTxn        CommandType = 31
	CmdTxnOffsetCommit CommandType = 32
	CmdEndTxn          CommandType = 33
	CmdCompact         CommandType = 34
	CmdForgetTxns      CommandType = 35
	// Dead letters (deadletters.go), log format 2.
	CmdReplayDeadLetter  CommandType = 36
	CmdDeleteDeadLetters CommandType = 37
	// Request outcomes (requests.go), log format 2.
	CmdKeyed         CommandType = 38
	CmdPruneRequests CommandType = 39
	// Raft groups (seedids.go), log format 2.
	CmdSeedIDs      CommandType = 40
	CmdPreferLeader CommandType = 41
	// Classic consumer groups' membership (classicgroups.go), log format 6.
	CmdSaveClassicGroup CommandType = 42
	// Group configs (groupconfigs.go), log format 7.
	CmdAlterGroupConfig CommandType = 43
	// Kafka share groups (share.go), log format 7.
	CmdShareAcquire CommandType = 44
	CmdShareAck     CommandType = 45
	// Kafka transaction version 2 (kafkatxn.go), log format 9.
	CmdEndTxnBump CommandType = 46
	// Kafka ACLs (acls.go), log format 10.
	CmdAlterACLs CommandType = 47
	// Share acquisitions beside other members' leases (share.go), log
	// format 11.
	CmdShareAcquireShared CommandType = 48
	// The replica directory of data groups (seedids.go), log format 12.
	CmdSetReplicas CommandType = 49
)

// DefaultDedupWindowSeconds is the dedup window of a queue created without one.
const DefaultDedupWindowSeconds = 3600

// PushCommand appends messages, deduplicating by transactionId. The leader
// stamps NowMs and every MessageID, so every replica stores the same thing.
type PushCommand struct {
	NowMs int64
	Items []PushItem
}

// PushItem is one message to push.
type PushItem struct {
	// The JSON names are log format 1 (see legacy.go).
	Queue         string   `json:"Queue"`
	Partition     string   `json:"Partition"`
	TransactionID string   `json:"TransactionID"`
	MessageID     [16]byte `json:"MessageID"`
	Payload       []byte   `json:"Payload"`
}

// PushStatus says what happened to one pushed item.
type PushStatus byte

// Push statuses.
const (
	PushQueued    PushStatus = 1 // stored at Offset
	PushDuplicate PushStatus = 2 // nothing stored; Offset and MessageID are the original's
	PushRejected  PushStatus = 3 // nothing stored; Error says why
)

// PushResult is the state machine's answer for one item, in request order.
type PushResult struct {
	Status    PushStatus
	Offset    uint64
	MessageID [16]byte
	Error     string
}

// ConfigureQueueCommand creates a queue or updates its options. Nil options
// keep their current value (or the default, for a new queue).
type ConfigureQueueCommand struct {
	NowMs   int64
	Queue   string
	Options QueueOptions
}

// QueueOptions are a queue's settable options; nil keeps the current value.
// They travel as JSON inside the command: encoding/json writes struct
// fields in a fixed order, so the entry is the same on every replica.
type QueueOptions struct {
	DedupWindowSeconds       *int64 `json:"dedupWindowSeconds,omitempty"`
	LeaseTimeSeconds         *int64 `json:"leaseTime,omitempty"`
	RetryLimit               *int32 `json:"retryLimit,omitempty"`
	DeadLetterQueue          *bool  `json:"deadLetterQueue,omitempty"`
	DelayedProcessingSeconds *int64 `json:"delayedProcessing,omitempty"`
	// KafkaPartitions grows the partitions Kafka clients see ("0".."n-1").
	KafkaPartitions *int32 `json:"partitions,omitempty"`
	// RetentionSeconds: messages older than this are dropped; 0 keeps
	// them for ever.
	RetentionSeconds *int64 `json:"retentionSeconds,omitempty"`
	// CompletedRetentionSeconds: messages every consumer group of the
	// queue has finished are dropped once older than this; 0 keeps them.
	CompletedRetentionSeconds *int64 `json:"completedRetentionSeconds,omitempty"`
}

// Defaults for queues configured without these options.
const (
	DefaultLeaseTimeSeconds = 60
	DefaultRetryLimit       = 3
)

// ConfigureQueueResult is the queue as stored after the command.
type ConfigureQueueResult struct {
	Queue store.Queue
}

// minPushItemSize is the fewest bytes one encoded PushItem takes.
const minPushItemSize = 4 + 16

// Encode returns the raft entry for the command.
func (c *PushCommand) Encode() []byte {
	e := encoder{b: make([]byte, 0, 64+len(c.Items)*64)}
	e.byte(byte(CmdPush))
	e.varint(c.NowMs)
	e.uvarint(uint64(len(c.Items)))
	for i := range c.Items {
		e.pushItem(&c.Items[i])
	}
	return e.b
}

func (e *encoder) pushItem(it *PushItem) {
	e.string(it.Queue)
	e.string(it.Partition)
	e.string(it.TransactionID)
	e.fixed16(it.MessageID)
	e.bytes(it.Payload)
}

func (d *decoder) pushItem() PushItem {
	return PushItem{Queue: d.string(), Partition: d.string(), TransactionID: d.string(), MessageID: d.fixed16(), Payload: d.bytes()}
}

func decodePush(b []byte) (*PushCommand, error) {
	d := decoder{b: b}
	c := &PushCommand{NowMs: d.varint()}
	c.Items = make([]PushItem, d.count(minPushItemSize))
	for i := range c.Items {
		c.Items[i] = d.pushItem()
	}
	return c, d.finish()
}

// Encode returns the raft entry for the command.
func (c *ConfigureQueueCommand) Encode() []byte {
	opts, err := json.Marshal(c.Options)
	if err != nil {
		panic(fmt.Sprintf("command: encode queue options: %v", err)) // plain struct: cannot fail
	}
	e := encoder{}
	e.byte(byte(CmdConfigureQueue))
	e.varint(c.NowMs)
	e.string(c.Queue)
	e.bytes(opts)
	return e.b
}

func decodeConfigureQueue(b []byte) (*ConfigureQueueCommand, error) {
	d := decoder{b: b}
	c := &ConfigureQueueCommand{NowMs: d.varint(), Queue: d.string()}
	opts := d.bytes()
	if err := d.finish(); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(opts, &c.Options); err != nil {
		return nil, fmt.Errorf("command: queue options: %w", err)
	}
	return c, nil
}

// PruneDedupCommand forgets up to Limit dedup records whose window had
// passed at NowMs. The leader proposes it periodically: pruning inside
// every push would cost each push an index scan, and decisions never need
// it (an expired record already answers "not a duplicate").
type PruneDedupCommand struct {
	NowMs int64
	Limit int
}

// PruneDedupResult says how many expired records were forgotten; Limit
// means there may be more.
type PruneDedupResult struct {
	Removed int
}

// Encode returns the raft entry for the command.
func (c *PruneDedupCommand) Encode() []byte { return encodePrune(CmdPruneDedup, c.NowMs, c.Limit) }

func decodePruneDedup(b []byte) (*PruneDedupCommand, error) {
	now, limit, err := decodePrune(b)
	return &PruneDedupCommand{NowMs: now, Limit: limit}, err
}

// encodePrune writes a prune entry: the leader's time and how many
// expired records it may forget.
func encodePrune(t CommandType, nowMs int64, limit int) []byte {
	e := encoder{}
	e.byte(byte(t))
	e.varint(nowMs)
	e.uvarint(uint64(limit))
	return e.b
}

func decodePrune(b []byte) (nowMs int64, limit int, err error) {
	d := decoder{b: b}
	nowMs = d.varint()
	n := d.uvarint()
	if n > MaxPruneLimit {
		return 0, 0, fmt.Errorf("command: prune limit %d over %d", n, MaxPruneLimit)
	}
	return nowMs, int(n), d.finish()
}

// MaxPruneLimit bounds one prune entry: each record pruned is two deletes,
// and an entry must stay well inside one badger transaction.
const MaxPruneLimit = 10_000

// RegisterNodeCommand records a member's advertised addresses.
type RegisterNodeCommand struct {
	Node store.Node
}

// Encode returns the raft entry for the command.
func (c *RegisterNodeCommand) Encode() []byte {
	e := encoder{b: c.encodeAs(LogFormat1)}
	e.uvarint(uint64(c.Node.LogFormat)) // since log format 2
	return e.b
}

// encodeAs writes the entry without the node's log format, which format 1
// decoders refuse as trailing bytes.
func (c *RegisterNodeCommand) encodeAs(LogFormat) []byte {
	e := encoder{}
	e.byte(byte(CmdRegisterNode))
	e.string(c.Node.ID)
	e.string(c.Node.HTTPAddr)
	e.string(c.Node.KafkaAddr)
	return e.b
}

func decodeRegisterNode(b []byte) (*RegisterNodeCommand, error) {
	d := decoder{b: b}
	c := &RegisterNodeCommand{Node: store.Node{ID: d.string(), HTTPAddr: d.string(), KafkaAddr: d.string()}}
	if d.more() {
		c.Node.LogFormat = uint32(d.uvarint())
	}
	return c, d.finish()
}

// ForgetNodeCommand drops a removed member's addresses.
type ForgetNodeCommand struct {
	ID string
}

// Encode returns the raft entry for the command.
func (c *ForgetNodeCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdForgetNode))
	e.string(c.ID)
	return e.b
}

func decodeForgetNode(b []byte) (*ForgetNodeCommand, error) {
	d := decoder{b: b}
	c := &ForgetNodeCommand{ID: d.string()}
	return c, d.finish()
}

// NewProducerIDCommand allocates a Kafka producer id, unique for the life
// of the cluster whichever node leads (it comes from the replicated id
// counter). The answer is the id, an int64.
type NewProducerIDCommand struct{}

// Encode returns the raft entry for the command.
func (c *NewProducerIDCommand) Encode() []byte { return []byte{byte(CmdNewProducerID)} }

func decodeNewProducerID(b []byte) (*NewProducerIDCommand, error) {
	if len(b) != 0 {
		return nil, errors.New("command: trailing bytes after command")
	}
	return &NewProducerIDCommand{}, nil
}

// CleanupCommand removes what deleted queues and groups left behind,
// oldest tombstone first, at most MaxWrites keys (capped at
// MaxCleanupWrites). The leader proposes it while tombstones remain.
type CleanupCommand struct {
	MaxWrites int
}

// CleanupResult says what a cleanup entry removed and whether more is left.
type CleanupResult = store.CleanupResult

// Encode returns the raft entry for the command.
func (c *CleanupCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdCleanup))
	e.uvarint(uint64(c.MaxWrites))
	return e.b
}

func decodeCleanup(b []byte) (*CleanupCommand, error) {
	d := decoder{b: b}
	c := &CleanupCommand{MaxWrites: int(min(d.uvarint(), MaxCleanupWrites))}
	return c, d.finish()
}
