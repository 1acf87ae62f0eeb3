package kafka

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

// Remote is a raft group that this broker does not replicate, in a cluster
// with a replication factor: as Kafka's brokers do for partitions they do
// not host, this broker answers requests for its partitions
// NOT_LEADER_OR_FOLLOWER (so the client goes to the leader Metadata
// names), and reads the group's catalog and writes to it through one of
// its replicas (broker.RemoteGroup). What concerns the whole cluster
// (members, users, ACLs, the log format, producer ids) is group 0's on
// this node.
type Remote struct {
	*broker.RemoteGroup
	meta Broker // group 0 on this node

	mu         sync.Mutex
	catalog    []broker.TopicInfo // the group's topics, as read at catalogAt
	names      []string           // their names in order
	catalogAt  time.Time
	refreshing bool // a read of the catalog is under way
}

// NewRemote is group rg as this broker serves it, beside meta (group 0).
func NewRemote(rg *broker.RemoteGroup, meta Broker) *Remote {
	return &Remote{RemoteGroup: rg, meta: meta}
}

// notReplica is the error of a call only a replica can serve.
func (r *Remote) notReplica() error {
	return fmt.Errorf("%w: this broker does not replicate raft group %d", broker.ErrNotLeader, r.ID())
}

// Leadership: the group's leader as a replica reports it.

func (r *Remote) IsLeader() bool                            { return false }
func (r *Remote) LeaderTerm() (uint64, bool)                { return 0, false }
func (r *Remote) LeaderEpoch() int32                        { return r.Leader().Epoch }
func (r *Remote) LeaderWithID() (addr, id string)           { return "", r.Leader().ID }
func (r *Remote) LeaderCaughtUp() bool                      { return false }
func (r *Remote) InSync() []string                          { return r.Leader().InSync }
func (r *Remote) CatchUp(ctx context.Context) error         { return nil } // reads ask a replica that caught up
func (r *Remote) NodeID() string                            { return r.meta.NodeID() }
func (r *Remote) Members() ([]broker.Member, error)         { return r.meta.Members() }
func (r *Remote) LogFormat() command.LogFormat              { return r.meta.LogFormat() }
func (r *Remote) Now() time.Time                            { return r.meta.Now() }
func (r *Remote) User(name string) (auth.User, bool, error) { return r.meta.User(name) }
func (r *Remote) ACLSet() *auth.ACLSet                      { return r.meta.ACLSet() }
func (r *Remote) ACLs() ([]auth.ACL, error)                 { return r.meta.ACLs() }
func (r *Remote) TopicDefaults() broker.TopicInfo           { return r.meta.TopicDefaults() }
func (r *Remote) NewProducerID() (int64, error)             { return r.meta.NewProducerID() }

// AlterACLs changes the cluster's ACLs, kept in group 0.
func (r *Remote) AlterACLs(create, del []auth.ACL) (command.AlterACLsResult, error) {
	return r.meta.AlterACLs(create, del)
}

// SetReplicas refuses: where a data group's replicas should be is group
// 0's record, written by group 0's service, never through a data group's.
func (r *Remote) SetReplicas(uint32, []string) error {
	return fmt.Errorf("the replicas of raft groups are recorded in group 0, not through data group %d", r.ID())
}

// catalogFresh is how long a Remote keeps the group's topics it read.
const catalogFresh = time.Second

// readCatalog answers the group's topics and their names in order, read
// from a replica at most once every catalogFresh, by one caller at a time
// (the others get the last list read). When a replica does not answer,
// the last list read stays.
func (r *Remote) readCatalog() ([]broker.TopicInfo, []string) {
	r.mu.Lock()
	if r.refreshing || time.Since(r.catalogAt) < catalogFresh {
		defer r.mu.Unlock()
		return r.catalog, r.names
	}
	r.refreshing = true
	r.mu.Unlock()
	ts, err := r.RemoteGroup.Topics(nil)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refreshing, r.catalogAt = false, time.Now()
	if err == nil {
		names := make([]string, 0, len(ts))
		for _, t := range ts {
			names = append(names, t.Name)
		}
		slices.SortFunc(names, strings.Compare)
		r.catalog = ts
		if !slices.Equal(names, r.names) {
			r.names = names // a new slice only when it changed: callers compare them
		}
	}
	return r.catalog, r.names
}

// TopicNames lists the group's topics in name order (readCatalog).
func (r *Remote) TopicNames() []string {
	_, names := r.readCatalog()
	return names
}

// Topics answers the named topics from a replica, or every topic of the
// group (nil) as readCatalog last read them: a listing of all topics is
// not failed for one group whose replicas do not answer.
func (r *Remote) Topics(names []string) ([]broker.TopicInfo, error) {
	if names == nil {
		catalog, _ := r.readCatalog()
		return slices.Clone(catalog), nil
	}
	return r.RemoteGroup.Topics(names)
}

// TopicByID finds a topic of the group by its id in the topics read
// last, and asks a replica when they do not have it (a topic created a
// moment ago).
func (r *Remote) TopicByID(id [16]byte) (broker.TopicInfo, bool, error) {
	catalog, _ := r.readCatalog()
	for _, t := range catalog {
		if topicID(t) == id {
			return t, true, nil
		}
	}
	return r.RemoteGroup.TopicByID(id)
}

// Partition data lives on the group's replicas: this broker has none.

func (r *Remote) DeleteRecords(string, []command.RecordsBefore) ([]command.DeleteRecordsResult, error) {
	return nil, r.notReplica()
}
func (r *Remote) PartitionSizes(broker.TopicInfo) ([]int64, error) { return nil, r.notReplica() }
func (r *Remote) ProduceAsync(string, int32, int32, []recordbatch.Batch) func() (command.ProduceResult, error) {
	return func() (command.ProduceResult, error) { return command.ProduceResult{}, r.notReplica() }
}
func (r *Remote) ReadPartition(string, int32, int64, int, bool) (broker.PartitionLog, error) {
	return broker.PartitionLog{}, r.notReplica()
}
func (r *Remote) OffsetForTime(string, int32, int64) (int64, int64, command.TopicOutcome, error) {
	return 0, 0, 0, r.notReplica()
}
func (r *Remote) PartitionProducers(string, int32) ([]broker.ActiveProducer, command.TopicOutcome, bool, error) {
	return nil, 0, false, r.notReplica()
}

// Consumer groups, share groups and transactions are coordinated by the
// leader of their raft group, which this broker is not.

func (r *Remote) ClassicGroup(string) (store.ClassicGroup, bool, error) {
	return store.ClassicGroup{}, false, r.notReplica()
}
func (r *Remote) SaveClassicGroup(store.ClassicGroup) error { return r.notReplica() }
func (r *Remote) ShareAcquire(string, string, string, []int32, int, broker.ShareTerms) ([]command.PopResult, error) {
	return nil, r.notReplica()
}
func (r *Remote) ShareAck(string, []command.ShareAck) ([]command.ShareAckResult, error) {
	return nil, r.notReplica()
}
func (r *Remote) ShareAcquirable(string, string, []int32, int) ([]int32, bool, <-chan struct{}, error) {
	return nil, false, nil, r.notReplica()
}
func (r *Remote) InitTxnProducer(string, int32, int64, int16) (command.TxnProducerResult, error) {
	return command.TxnProducerResult{}, r.notReplica()
}
func (r *Remote) AddToTxn(string, int64, int16, []store.TxnPartition, []string) (command.AddToTxnResult, error) {
	return command.AddToTxnResult{}, r.notReplica()
}
func (r *Remote) TxnOffsetCommit(string, int64, int16, string, []command.OffsetCommit) ([]command.TopicOutcome, error) {
	return nil, r.notReplica()
}
func (r *Remote) EndTxn(string, int64, int16, bool) (command.TopicOutcome, error) {
	return 0, r.notReplica()
}
func (r *Remote) EndTxnBump(string, int64, int16, bool) (command.TxnProducerResult, error) {
	return command.TxnProducerResult{}, r.notReplica()
}
func (r *Remote) Txn(string) (store.TxnState, bool, error) {
	return store.TxnState{}, false, r.notReplica()
}

var _ Broker = (*Remote)(nil)
