package kafka

import (
	"context"
	"time"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

// Broker is what the listener needs of the broker: exactly the methods of
// *broker.Service this package calls, and nothing else. `waggle serve`
// passes the service; unit tests pass a fake (broker_fake_test.go), so
// request handling (validation order, error codes, authorization) is tested
// without raft or storage. The meaning of each method is documented on
// broker.Service.
type Broker interface {
	// Cluster and leadership.
	IsLeader() bool
	LeaderTerm() (term uint64, leading bool)
	LeaderEpoch() int32
	LeaderWithID() (addr, id string)
	LeaderCaughtUp() bool
	InSync() []string
	CatchUp(ctx context.Context) error
	NodeID() string
	Members() ([]broker.Member, error)
	LogFormat() command.LogFormat
	Now() time.Time

	// Authentication (SASL) and authorization (Kafka ACLs, in group 0).
	User(name string) (auth.User, bool, error)
	ACLSet() *auth.ACLSet
	ACLs() ([]auth.ACL, error)
	AlterACLs(create, del []auth.ACL) (command.AlterACLsResult, error)

	// Replica moves, recorded in group 0 (with a replication factor).
	SetReplicas(group uint32, nodes []string) error

	// Topics.
	Topics(names []string) ([]broker.TopicInfo, error)
	TopicNames() []string // every topic's name in order; shared, not to be changed
	TopicByID(id [16]byte) (t broker.TopicInfo, found bool, err error)
	TopicDefaults() broker.TopicInfo
	CreateTopic(name string, partitions int32, settings []command.TopicSetting) (command.TopicOutcome, error)
	AlterTopic(name string, settings []command.TopicSetting) (command.TopicOutcome, error)
	AddPartitions(name string, count int32) (command.TopicOutcome, error)
	DeleteTopic(ctx context.Context, name string) (command.TopicOutcome, error)
	DeleteRecords(topic string, before []command.RecordsBefore) ([]command.DeleteRecordsResult, error)
	PartitionSizes(topic broker.TopicInfo) ([]int64, error)

	// Records.
	ProduceAsync(topic string, partition, autoCreate int32, batches []recordbatch.Batch) func() (command.ProduceResult, error)
	ReadPartition(topic string, partition int32, offset int64, maxBytes int, readCommitted bool) (broker.PartitionLog, error)
	OffsetForTime(topic string, partition int32, timestampMs int64) (offset, foundTimestamp int64, outcome command.TopicOutcome, err error)
	NewProducerID() (int64, error)
	PartitionProducers(topic string, partition int32) (out []broker.ActiveProducer, outcome command.TopicOutcome, complete bool, err error)

	// Committed offsets of consumer groups.
	CommitOffsets(group string, offsets []command.OffsetCommit) ([]command.TopicOutcome, error)
	GroupOffsets(group string) ([]command.OffsetCommit, error)
	DeleteOffsets(group string, all bool, offsets []command.OffsetCommit) (int, error)
	OffsetGroups() ([]string, error)

	// Classic consumer groups' recorded membership (classic_record.go).
	ClassicGroup(name string) (store.ClassicGroup, bool, error)
	SaveClassicGroup(g store.ClassicGroup) error
	GroupConfig(group string) (map[string]string, error)
	ShareAcquire(group, holder, topic string, partitions []int32, batch int, terms broker.ShareTerms) ([]command.PopResult, error)
	ShareAck(group string, acks []command.ShareAck) ([]command.ShareAckResult, error)
	ShareAcquirable(group, topic string, partitions []int32, maxLocks int) (worth []int32, subscribed bool, appended <-chan struct{}, err error)
	AlterGroupConfig(group string, replace bool, changes []command.GroupConfigChange) error

	// Transactions (KIP-98).
	InitTxnProducer(id string, timeoutMs int32, producerID int64, epoch int16) (command.TxnProducerResult, error)
	AddToTxn(id string, producerID int64, epoch int16, parts []store.TxnPartition, groups []string) (command.AddToTxnResult, error)
	TxnOffsetCommit(id string, producerID int64, epoch int16, group string, offsets []command.OffsetCommit) ([]command.TopicOutcome, error)
	EndTxn(id string, producerID int64, epoch int16, commit bool) (command.TopicOutcome, error)
	EndTxnBump(id string, producerID int64, epoch int16, commit bool) (command.TxnProducerResult, error)
	Txn(id string) (st store.TxnState, found bool, err error)
	EachTxn(fn func(store.TxnState)) error
	PendingTxnOffsets(group string) ([]store.TxnOffset, error)
}

var _ Broker = (*broker.Service)(nil)
