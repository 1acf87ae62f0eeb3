package httpapi

import (
	"context"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/fsm"
	"github.com/waggle-mq/waggle/store"
)

// Broker is what the HTTP API asks of the broker: exactly the methods of
// *broker.Service it calls, so that its handlers can be tested against a
// fake. The methods keep broker.Service's meaning (see there); their
// errors are the broker's (broker.ErrNotFound, ...), which writeBrokerError
// maps to statuses. The answers are the broker's plain data types.
type Broker interface {
	// Leadership, membership and the node (cluster.go, backup.go).
	IsLeader() bool
	// ServesReads is false while the node re-applies the log it held at
	// start (reads would go back in time).
	ServesReads() bool
	// LeaderCaughtUp is false on a new leader still applying the log it
	// took the lead with (its store may lag what the old leader served).
	LeaderCaughtUp() bool
	AwaitLeaderHTTPAddr(ctx context.Context) (addr string, local bool, err error)
	NodeID() string
	Health() broker.Health
	RequestStateCheck(index uint64) error // statecheck.go
	LogFormat() command.LogFormat
	StorageFull() bool
	Members() ([]broker.Member, error)
	AddVoter(id, raftAddr string) error
	AddNonvoter(id, raftAddr string) error
	RemoveNode(id string) error
	RegisterNode(a broker.NodeAddrs) error
	Snapshot() (uint64, error)
	Backup() (*fsm.Backup, error)
	ApplyEntry(entry []byte) (broker.AppliedEntry, error)                      // placement.go
	LeaderCommitIndex() (uint64, error)                                        // placement.go
	ServeGroupCall(ctx context.Context, call string, args []byte) (any, error) // placement.go
	PreferLeader(group uint32, node string) error
	LeaderPreference(group uint32) (string, error)
	SetReplicas(group uint32, nodes []string) error

	// Messages (messages.go).
	Push(ctx context.Context, items []broker.PushItem) ([]broker.PushResult, error)
	KeyedWrites() bool
	Fetch(reqs []broker.FetchRequest) ([]broker.FetchResult, error)

	// Queues and topics (queues.go).
	Configure(ctx context.Context, queue string, opts command.QueueOptions) (broker.QueueInfo, error)
	Queue(name string) (broker.QueueInfo, error)
	CatchUp(ctx context.Context) error
	Queues() ([]broker.QueueInfo, error)
	DeleteTopic(ctx context.Context, name string) (command.TopicOutcome, error)

	// Consuming: pop, ack, leases, seek, dead letters (consume.go).
	Pop(ctx context.Context, r broker.PopRequest) ([]broker.PoppedMessage, error)
	Ack(ctx context.Context, group string, acks []broker.AckRequest) ([]command.AckResult, error)
	ExtendLease(leaseID string, seconds int64) (command.ExtendLeaseResult, error)
	LeaseOwner(leaseID string) (group, queue string, found bool, err error)
	Seek(ctx context.Context, group, queue string, r broker.SeekRequest) error
	DeleteGroup(ctx context.Context, group string) error
	DeadLetter(id string) (broker.DeadLetter, error)
	DeadLetters(queue string) ([]broker.DeadLetter, error)
	ReplayDeadLetter(id string) (broker.PushResult, error)
	DeleteDeadLetter(id string) error
	PurgeDeadLetters(queue string) (int, error)

	// Consumer groups (consumergroups.go).
	GroupPartitions(group string) ([]broker.Cursor, error)
	OffsetGroups() ([]string, error)

	// Transactions, KV and timers (transaction.go, kv.go).
	Transaction(ctx context.Context, r broker.TransactionRequest) (broker.TransactionResult, error)
	KV(ctx context.Context, ops []command.KVOp) (command.KVCallResult, error)
	KVGet(ns, key string) (command.KVResult, error)
	Once(ctx context.Context, ns, key string, ttlSeconds int64, forever bool) (bool, error)
	Timers(ctx context.Context, ops []command.TimerOp) ([]command.TimerResult, error)
	ListTimers(queue string) ([]store.Timer, error)

	// Users and tokens (users.go, authn.go).
	TokenPrincipal(token string) (auth.Principal, bool, error)
	Users() ([]auth.Principal, error)
	ACLSet() *auth.ACLSet
	PutUser(p auth.Principal, password string) error
	DeleteUser(name string) (bool, error)
	Tokens() ([]auth.Principal, error)
	CreateToken(p auth.Principal) (string, error)
	DeleteToken(name string) (bool, error)
}

var _ Broker = (*broker.Service)(nil)
