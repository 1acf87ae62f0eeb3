package kafka

import (
	"context"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

// fakeBroker stands in for broker.Service in unit tests of the request
// handlers. It answers from canned state; the func fields, when set, decide
// a call's answer instead. Only the methods the tests reach are written:
// the embedded nil Broker makes any other call panic, so a handler calling
// something a test did not expect fails the test.
type fakeBroker struct {
	Broker

	mu       sync.Mutex
	nodeID   string // this node
	leaderID string // the raft leader's node id; "" when none is known
	term     uint64
	members  []broker.Member
	topics   map[string]broker.TopicInfo
	users    map[string]auth.User

	// produce answers ProduceAsync (default: TopicUnknown for a topic not
	// in topics, else offset 0 onwards); every call is kept in produced.
	produce  func(topic string, partition int32, batches []recordbatch.Batch) (command.ProduceResult, error)
	produced []producedCall

	// read answers ReadPartition; reads keeps the calls.
	read  func(topic string, partition int32, offset int64) (broker.PartitionLog, error)
	reads []string

	// Committed offsets by group; commitOutcome, when set, answers each
	// committed offset (default TopicOK) and commitErr fails the call.
	offsets       map[string][]command.OffsetCommit
	commitOutcome func(command.OffsetCommit) command.TopicOutcome
	commitErr     error
	groupsErr     error // GroupOffsets fails
	pending       map[string][]store.TxnOffset

	// behind holds the topics the leader has and this node has not
	// applied yet: CatchUp moves them into topics, or fails with
	// catchUpErr; catchUps counts its calls.
	behind     map[string]broker.TopicInfo
	catchUpErr error
	catchUps   int

	// applying is a new leader still applying the log it took the lead
	// with (LeaderCaughtUp false).
	applying bool

	// classic holds recorded classic groups; saveErr fails their saves;
	// a save waits for saveGate when it is set, after telling saving.
	classic  map[string]store.ClassicGroup
	saveErr  error
	saveGate chan struct{}
	saving   chan store.ClassicGroup

	// setReplicas keeps the SetReplicas calls; setReplicasErr fails them.
	setReplicas    []replicasCall
	setReplicasErr error
}

type replicasCall struct {
	group uint32
	nodes []string
}

type producedCall struct {
	topic      string
	partition  int32
	autoCreate int32
	batches    int
}

// newFakeBroker is node 1 leading term 5, with topic "orders" of 3
// partitions.
func newFakeBroker() *fakeBroker {
	return &fakeBroker{
		nodeID: "1", leaderID: "1", term: 5,
		members: []broker.Member{
			{NodeAddrs: broker.NodeAddrs{ID: "1", KafkaAddr: "10.0.0.1:9092"}},
			{NodeAddrs: broker.NodeAddrs{ID: "2", KafkaAddr: "10.0.0.2:9092"}},
		},
		topics:  map[string]broker.TopicInfo{"orders": {ID: 7, Name: "orders", Partitions: 3}},
		offsets: map[string][]command.OffsetCommit{},
		pending: map[string][]store.TxnOffset{},
	}
}

func (f *fakeBroker) IsLeader() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leaderID != "" && f.leaderID == f.nodeID
}

func (f *fakeBroker) LeaderTerm() (uint64, bool) {
	leading := f.IsLeader()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !leading {
		return 0, false
	}
	return f.term, true
}

func (f *fakeBroker) LeaderEpoch() int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int32(f.term)
}

func (f *fakeBroker) LeaderWithID() (addr, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return "", f.leaderID
}

func (f *fakeBroker) InSync() []string { return []string{f.NodeID()} }

func (f *fakeBroker) ACLSet() *auth.ACLSet { return nil }

func (f *fakeBroker) LogFormat() command.LogFormat { return command.MaxLogFormat }

func (f *fakeBroker) LeaderCaughtUp() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.applying
}

func (f *fakeBroker) ClassicGroup(name string) (store.ClassicGroup, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, found := f.classic[name]
	return g, found, nil
}

func (f *fakeBroker) SaveClassicGroup(g store.ClassicGroup) error {
	if f.saveGate != nil {
		f.saving <- g
		<-f.saveGate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.saveErr != nil {
		return f.saveErr
	}
	if old, found := f.classic[g.Name]; found && old.Generation > g.Generation {
		return nil
	}
	if f.classic == nil {
		f.classic = map[string]store.ClassicGroup{}
	}
	if len(g.Members) == 0 {
		delete(f.classic, g.Name)
	} else {
		f.classic[g.Name] = g
	}
	return nil
}

func (f *fakeBroker) TopicDefaults() broker.TopicInfo { return broker.TopicInfo{} }
func (f *fakeBroker) Now() time.Time                  { return time.UnixMilli(1_700_000_000_000) }

func (f *fakeBroker) CatchUp(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.catchUps++
	if f.catchUpErr != nil {
		return f.catchUpErr
	}
	for name, t := range f.behind {
		f.topics[name] = t
		delete(f.behind, name)
	}
	return nil
}
func (f *fakeBroker) NodeID() string { return f.nodeID }

func (f *fakeBroker) Members() ([]broker.Member, error) { return f.members, nil }

func (f *fakeBroker) User(name string) (auth.User, bool, error) {
	u, ok := f.users[name]
	return u, ok, nil
}

func (f *fakeBroker) TopicNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.topics))
}

func (f *fakeBroker) Topics(names []string) ([]broker.TopicInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []broker.TopicInfo
	for name, t := range f.topics {
		if names == nil || slices.Contains(names, name) {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *fakeBroker) TopicByID(id [16]byte) (broker.TopicInfo, bool, error) {
	all, _ := f.Topics(nil)
	for _, t := range all {
		if topicID(t) == id {
			return t, true, nil
		}
	}
	return broker.TopicInfo{}, false, nil
}

func (f *fakeBroker) ProduceAsync(topic string, partition, autoCreate int32, batches []recordbatch.Batch) func() (command.ProduceResult, error) {
	f.mu.Lock()
	f.produced = append(f.produced, producedCall{topic, partition, autoCreate, len(batches)})
	_, known := f.topics[topic]
	answer := f.produce
	f.mu.Unlock()
	return func() (command.ProduceResult, error) {
		if answer != nil {
			return answer(topic, partition, batches)
		}
		if !known {
			return command.ProduceResult{Outcome: command.TopicUnknown}, nil
		}
		return command.ProduceResult{}, nil
	}
}

func (f *fakeBroker) ReadPartition(topic string, partition int32, offset int64, maxBytes int, readCommitted bool) (broker.PartitionLog, error) {
	f.mu.Lock()
	f.reads = append(f.reads, topic)
	f.mu.Unlock()
	if f.read == nil {
		panic("fakeBroker: ReadPartition called by a test that set no read")
	}
	return f.read(topic, partition, offset)
}

// OffsetForTime answers the first offset at or after timestampMs, with
// one record a millisecond from offset 0 at time 1000.
func (f *fakeBroker) OffsetForTime(topic string, partition int32, timestampMs int64) (int64, int64, command.TopicOutcome, error) {
	if _, ok := f.topics[topic]; !ok {
		return -1, -1, command.TopicUnknown, nil
	}
	return max(timestampMs-1000, 0), max(timestampMs, 1000), command.TopicOK, nil
}

// CreateTopic creates a topic in topics (auto-creation from Metadata).
func (f *fakeBroker) CreateTopic(name string, partitions int32, settings []command.TopicSetting) (command.TopicOutcome, error) {
	if !f.IsLeader() {
		return 0, broker.ErrNotLeader
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.topics[name]; ok {
		return command.TopicExists, nil
	}
	f.topics[name] = broker.TopicInfo{ID: uint64(100 + len(f.topics)), Name: name, Partitions: partitions}
	return command.TopicOK, nil
}

func (f *fakeBroker) CommitOffsets(group string, offsets []command.OffsetCommit) ([]command.TopicOutcome, error) {
	if f.commitErr != nil {
		return nil, f.commitErr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]command.TopicOutcome, len(offsets))
	for i, o := range offsets {
		if f.commitOutcome != nil {
			out[i] = f.commitOutcome(o)
		}
		if out[i] == command.TopicOK {
			f.offsets[group] = append(f.offsets[group], o)
		}
	}
	return out, nil
}

func (f *fakeBroker) GroupOffsets(group string) ([]command.OffsetCommit, error) {
	if f.groupsErr != nil {
		return nil, f.groupsErr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.offsets[group]), nil
}

func (f *fakeBroker) PendingTxnOffsets(group string) ([]store.TxnOffset, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pending[group], nil
}

func (f *fakeBroker) SetReplicas(group uint32, nodes []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.setReplicasErr != nil {
		return f.setReplicasErr
	}
	f.setReplicas = append(f.setReplicas, replicasCall{group, slices.Clone(nodes)})
	return nil
}

// newTestServer serves fb with cfg; nothing listens.
func newTestServer(t *testing.T, fb *fakeBroker, cfg Config) *Server {
	t.Helper()
	s := New(fb, cfg, slog.New(slog.DiscardHandler))
	t.Cleanup(s.Close)
	return s
}

// newTestConn is a connection to s as principal (nil: unauthenticated).
// Its network side is a closed pipe: the handlers under test never write
// to it (the answers come back from roundTrip).
func newTestConn(t *testing.T, s *Server, principal *auth.Principal) *conn {
	t.Helper()
	a, b := net.Pipe()
	a.Close()
	b.Close()
	return &conn{s: s, nc: a, principal: principal}
}

// roundTrip encodes req as a client would, hands the frame to the
// connection's dispatch (conn.handle: header, authentication, group and
// topic authorization, then the API's handler) and waits for the answer.
// The answer is encoded and decoded again at the request's version, so a
// response that would not go over the wire fails the test. A nil answer
// (acks=0) comes back nil.
func roundTrip(t *testing.T, c *conn, req kmsg.Request) kmsg.Response {
	t.Helper()
	p, err := c.handle(requestBody(req))
	if err != nil {
		t.Fatalf("%s v%d: connection closed: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	resp, err := p.wait()
	if err != nil {
		t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if resp == nil {
		return nil
	}
	again := req.ResponseKind()
	again.SetVersion(req.GetVersion())
	if err := again.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatalf("%s v%d: the answer does not decode: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return again
}
