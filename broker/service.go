package broker

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/fsm"
	"github.com/waggle-mq/waggle/metrics"
	"github.com/waggle-mq/waggle/raftnode"
	"github.com/waggle-mq/waggle/store"
)

// Service is the broker on one node.
type Service struct {
	nodeID string
	node   *raftnode.Node
	store  *store.Store

	// ApplyTimeout bounds how long a write waits to be enqueued to raft.
	ApplyTimeout time.Duration
	// Metrics records apply latency; nil records nothing.
	Metrics *metrics.Metrics
	// RequestWindow is how long a keyed request's answer is kept
	// (DefaultRequestWindow when zero).
	RequestWindow time.Duration
	// KafkaRetentionMs is the retention of topics created over Kafka
	// without retention.ms (command.RetentionMs); set before serving.
	KafkaRetentionMs int64
	// now stamps commands on the leader; tests may replace it.
	now func() time.Time
	// startIndex is the last index of the raft log when the node started.
	startIndex uint64

	storageFull atomic.Bool // set by the node's disk watch (SetStorageFull)
	contact     contactWatch
	acls        aclCache

	retainAfter  string // the queue name the next retention pass starts after (leader only)
	compactAfter string // where the next compaction look resumes
	// txnExpiryAfter is the transactional id the next expiry look starts
	// after (leader only).
	txnExpiryAfter string

	// Raft groups (raftgroup.go): the group served, group 0's service for
	// the members' addresses (nil in group 0), the first id the group
	// mints, whether this leadership has checked the id counter, the
	// forwarding sibling, how this node reaches the group's leader, and
	// (on the sibling) that writes are sent there.
	group      uint32
	meta       *Service
	idBase     uint64
	seeded     atomic.Bool
	forwarding *Service
	remote     *peerLink
	forwards   bool

	caughtUpMu    sync.Mutex
	caughtUpTerm  uint64 // the term caughtUpIndex was taken in
	caughtUpIndex uint64 // the last log index when this node was first asked in that term
}

// SetClock sets the clock this node stamps commands with while it leads
// (time.Now until set); set it before serving.
func (s *Service) SetClock(now func() time.Time) { s.now = now }

// LeaderCaughtUp reports whether this node leads and has applied every
// entry its log held when it took the lead. A new leader's log holds every
// committed entry, but it may not have applied them yet: until then its
// high watermark can lie below offsets clients already read from the old
// leader, which must not look like offsets out of range (KIP-207's
// OFFSET_NOT_AVAILABLE is the answer meanwhile).
func (s *Service) LeaderCaughtUp() bool {
	r := s.node.Raft
	if r.State() != raft.Leader {
		return false
	}
	term := r.CurrentTerm()
	s.caughtUpMu.Lock()
	if s.caughtUpTerm != term {
		s.caughtUpTerm, s.caughtUpIndex = term, r.LastIndex()
	}
	index := s.caughtUpIndex
	s.caughtUpMu.Unlock()
	return s.node.FSM.AppliedIndex() >= index
}

// ServesReads reports whether this node has applied every entry its raft
// log held when it started. Before a restart it may have applied (and
// served) all of them; after a machine crash its store can come back far
// behind its log, and reads from it meanwhile would go back in time.
//
// A store that a restore left half replaced (fsm.FSM.Damaged) serves
// nothing either.
func (s *Service) ServesReads() bool {
	return s.node.FSM.AppliedIndex() >= s.startIndex && s.node.FSM.Damaged() == nil
}

// New returns the service over a started raft node and its store.
func New(nodeID string, node *raftnode.Node, st *store.Store) *Service {
	s := &Service{nodeID: nodeID, node: node, store: st, ApplyTimeout: 10 * time.Second, now: time.Now,
		KafkaRetentionMs: command.DefaultKafkaRetentionMs, startIndex: node.Raft.LastIndex()}
	s.watchContact()
	return s
}

// SetStorageFull marks this node's disk as below (or back above) its
// free-space reserve. While it is full, writes that add data (pushes,
// produces, KV writes, transactions that push or write KV) answer
// ErrStorageFull; everything else goes on.
func (s *Service) SetStorageFull(full bool) { s.storageFull.Store(full) }

// StorageFull reports what SetStorageFull last set.
func (s *Service) StorageFull() bool { return s.storageFull.Load() }

// admitGrowth refuses a write that adds data while storage is full. Only
// the node that proposes the entry asks: a follower with a fuller disk
// still applies what was committed (and stops at --min-free-disk-mib).
func (s *Service) admitGrowth() error {
	if s.storageFull.Load() {
		return ErrStorageFull
	}
	return nil
}

// apply commits one command through raft and returns the state machine's
// answer, typed as the command declares it (command.Answering). The answer
// exists only once the entry is committed by a majority and applied on
// this node.
func apply[R any](s *Service, cmd command.Answering[R]) (R, error) { return applyAsync(s, cmd)() }

// applyAsync hands one command to raft and returns a function that waits
// for its answer. Commands handed over one after another from the same
// goroutine are appended to the log in that order, which lets a caller
// pipeline writes whose order matters.
func applyAsync[R any](s *Service, cmd command.Answering[R]) func() (R, error) {
	wait := s.propose(cmd)
	return func() (R, error) {
		var zero R
		answer, err := wait()
		if err != nil {
			return zero, err
		}
		// raft hands the answer over as any. The state machine's apply
		// function returns R (register checks that at compile time),
		// so only a nil interface answer (R itself an interface) or a
		// broken registration is not an R here.
		r, ok := answer.(R)
		if !ok && answer != nil {
			return zero, fmt.Errorf("broker: %T answered %T, want %T", cmd, answer, zero)
		}
		return r, nil
	}
}

// propose appends cmd to the raft log and returns a function that waits
// for the state machine's untyped answer.
func (s *Service) propose(cmd command.Command) func() (any, error) {
	if s.node.Raft.State() != raft.Leader {
		if s.forwards {
			return func() (any, error) { return s.proposeRemote(cmd) }
		}
		return func() (any, error) { return nil, ErrNotLeader }
	}
	return s.proposeLeading(cmd)
}

// proposeLeading proposes cmd on the group's leader, this node: after the
// group's SeedIDs entry when it still needs one.
func (s *Service) proposeLeading(cmd command.Command) func() (any, error) {
	if err := s.seedIDs(); err != nil {
		return func() (any, error) { return nil, err }
	}
	return s.proposeNow(cmd)
}

// proposeNow appends cmd to the raft log, in the cluster's log format,
// which every member reads (see command.LogFormat).
func (s *Service) proposeNow(cmd command.Command) func() (any, error) {
	entry, err := command.EncodeAs(cmd, s.node.FSM.LogFormat())
	if err != nil {
		return func() (any, error) { return nil, fmt.Errorf("%w: %w", ErrUpgradeInProgress, err) }
	}
	f := s.proposeEntry(entry)
	return func() (any, error) {
		answer, _, err := f()
		return answer, err
	}
}

// proposeEntry appends an encoded command and returns a function that
// waits for its answer and the raft index it took.
func (s *Service) proposeEntry(entry []byte) func() (any, uint64, error) {
	start := time.Now()
	f := s.node.Raft.Apply(command.Seal(entry), s.ApplyTimeout)
	return func() (any, uint64, error) {
		err := f.Error()
		s.Metrics.Applied(time.Since(start).Seconds())
		if err != nil {
			switch {
			case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrEnqueueTimeout),
				errors.Is(err, raft.ErrLeadershipTransferInProgress):
				return nil, 0, fmt.Errorf("%w: %v", ErrNotLeader, err) // rejected before it was appended
			default:
				return nil, 0, fmt.Errorf("%w: %v", ErrOutcomeUnknown, err)
			}
		}
		return f.Response(), f.Index(), nil
	}
}

// Health is a node's view of the cluster.
type Health struct {
	Group      uint32 // the raft group
	NodeID     string
	Role       string // leader, follower, candidate or shutdown
	LeaderID   string
	LeaderRaft string // the leader's raft address
	LeaderHTTP string // the leader's registered HTTP address, if known
	Term       uint64
	Commit     uint64
	Applied    uint64
	// LastSnapshotIndex is the raft index of this node's newest snapshot.
	LastSnapshotIndex uint64
	// ClockMs is the replicated clock as of the last applied entry.
	ClockMs int64
	// VotesWithheld: the node grants no votes until its log catches up
	// (repaired from its peers, or on a new data directory).
	VotesWithheld bool
	// Digest is the state digest, by which replicas are compared.
	Digest fsm.StateDigest
	// Check is how this node's state checks stand (RequestStateCheck).
	Check fsm.StateCheck
	// Moving: this node leads the group and its raft members are not yet
	// the replicas group 0 records (set by the node, which moves them).
	Moving bool
}

// Health reports this node's raft state.
func (s *Service) Health() Health {
	r := s.node.Raft
	addr, id := r.LeaderWithID()
	h := Health{
		Group:         s.group,
		NodeID:        s.nodeID,
		Role:          roleName(r.State()),
		LeaderID:      string(id),
		LeaderRaft:    string(addr),
		Term:          r.CurrentTerm(),
		Commit:        r.CommitIndex(),
		Applied:       s.node.FSM.AppliedIndex(),
		ClockMs:       s.node.FSM.ClockMs(),
		VotesWithheld: s.node.VotesWithheld(),
		Digest:        s.node.FSM.StateDigest(),
		Check:         s.node.FSM.StateCheck(),
	}
	h.LastSnapshotIndex, _ = strconv.ParseUint(r.Stats()["last_snapshot_index"], 10, 64)
	if id != "" {
		if n, err := s.registeredNode(string(id)); err == nil {
			h.LeaderHTTP = n.HTTPAddr
		}
	}
	return h
}

// RequestStateCheck asks this node to hash its whole state once it has
// applied the entry at index (fsm.FSM.RequestCheck); fsm.ErrCheckPassed
// when it is past it.
func (s *Service) RequestStateCheck(index uint64) error { return s.node.FSM.RequestCheck(index) }

func roleName(st raft.RaftState) string {
	switch st {
	case raft.Leader:
		return "leader"
	case raft.Follower:
		return "follower"
	case raft.Candidate:
		return "candidate"
	default:
		return "shutdown"
	}
}
