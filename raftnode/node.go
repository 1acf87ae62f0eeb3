package raftnode

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"golang.org/x/time/rate"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/fsm"
	"github.com/waggle-mq/waggle/raftmux"
	"github.com/waggle-mq/waggle/store"
	"github.com/waggle-mq/waggle/tlsconf"
)

// Peer is one voting member of a static cluster.
type Peer struct {
	ID   string
	Addr string
}

// ParsePeers reads "1=host:port,2=host:port". An empty string is no peers:
// a single node that bootstraps itself.
func ParsePeers(s string) ([]Peer, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var peers []Peer
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("peer %q: want ID=HOST:PORT", part)
		}
		if _, err := strconv.ParseUint(id, 10, 32); err != nil {
			return nil, fmt.Errorf("peer %q: node id must be a positive number", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("peer %q: %v", part, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("peer id %s listed twice", id)
		}
		seen[id] = true
		peers = append(peers, Peer{ID: id, Addr: addr})
	}
	return peers, nil
}

// NodeConfig says where a node keeps its raft state and how it reaches peers.
type NodeConfig struct {
	ID       string
	RaftAddr string // listen address of the raft transport (when Mux is nil)
	// RaftAdvertise is the address peers dial to reach this node (RaftAddr
	// when empty); it is this node's address in the cluster configuration.
	RaftAdvertise string
	// TLS, when set, makes raft traffic mutual TLS (see transport.go).
	TLS *tlsconf.Config
	// Mux is the node's raft listener shared by its groups (Listen); nil:
	// the node opens one of its own on RaftAddr and closes it on Shutdown.
	Mux *raftmux.Mux
	// Group is the raft group this node is a member of on Mux (0 when the
	// node opens its own).
	Group uint32
	Dir   string // raft log and snapshots live in Dir/raft
	Peers []Peer // empty: a single node
	// Join starts the node without bootstrapping: it waits to be added to
	// an existing cluster as a voter.
	Join bool
	// GuardVotes, with Join, treats a new directory as a wiped voter's
	// (see amnesia.go): the member of a group that has run before, added
	// by a replica move, may be a voter whose disk was replaced, so it
	// grants no vote until its log has caught up with a leader of the
	// term its Peers (the group's other replicas) report.
	GuardVotes bool
	Logger     hclog.Logger
	// SnapshotThreshold and TrailingLogs override the defaults below when
	// non-zero (tests use small values to force log compaction).
	SnapshotThreshold uint64
	TrailingLogs      uint64
	// LogHoldMiB: see logHolder.slack (0: a GiB).
	LogHoldMiB int64
	// SnapshotSend paces the snapshots this node sends its peers (a
	// replica catching up, one added by a move), shared by its groups so
	// they take a bounded share of the disk, network and the peers' CPU
	// from the writes; nil: as fast as they go.
	SnapshotSend *rate.Limiter
}

// Raft tuning. A snapshot is the whole store, so it is taken rarely and the
// log kept behind it is long: a follower that falls behind by less than
// TrailingLogs entries (about 20 s of writes at the measured peak of ~1,000
// entries/s) catches up from the log instead of a snapshot, and a follower
// installing a snapshot has that long to finish before the log it needs
// next is compacted away, so it does not loop on snapshots.
const (
	defaultSnapshotThreshold = 16384
	defaultTrailingLogs      = 20480
	snapshotInterval         = 5 * time.Second
	// Loopback and LAN clusters: a dead leader is noticed after 0.5–1 s
	// (raft randomises between one and two heartbeat timeouts).
	heartbeatTimeout = 500 * time.Millisecond
	electionTimeout  = 500 * time.Millisecond
	leaderLease      = 250 * time.Millisecond
)

// logCacheEntries is how many recent log entries raft keeps in memory for
// replication. An entry can be a produce request of a megabyte or more, so
// the cache is kept small: 1,024 entries held 630 MB of heap under a 1 KB
// produce load; followers that fall further behind read the log from disk.
const logCacheEntries = 64

// Node is a running raft member with waggle's state machine.
type Node struct {
	Raft *raft.Raft
	FSM  *fsm.FSM

	transport *heartbeatGate
	ownMux    *raftmux.Mux // the listener this node opened itself, if it did
	logs      *walLog
	guard     *voteGuard    // nil: this node votes
	stop      chan struct{} // ends watchLogBytes
}

// VotesWithheld reports whether this node grants no votes (and stands for
// no election) yet: it was repaired from its peers (repair.go), or started
// on a new data directory in a static cluster (amnesia.go), and its log has
// not caught up. Asking may lift the guard for good.
func (n *Node) VotesWithheld() bool { return n.guard != nil && n.guard.withholding() }

// RaftAddr is the address this node's peers dial: the advertised one, with
// the port bound when it was configured as 0.
func (n *Node) RaftAddr() string { return string(n.transport.LocalAddr()) }

// StartNode opens the raft log and snapshots under cfg.Dir, catches the
// store up to the newest snapshot if it fell behind, and starts raft. A node
// with no raft state bootstraps the configured cluster (itself alone when
// there are no peers); every node of a static cluster bootstraps the same
// configuration, which raft allows.
func StartNode(cfg NodeConfig, st *store.Store) (*Node, error) {
	if cfg.RaftAdvertise == "" {
		cfg.RaftAdvertise = cfg.RaftAddr
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn})
	}
	dir := filepath.Join(cfg.Dir, "raft")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logs, err := openLogStore(dir, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("open raft log: %w", err)
	}
	n := &Node{logs: logs}
	ok := false
	defer func() {
		if !ok {
			n.close()
		}
	}()
	cached, err := raft.NewLogCache(logCacheEntries, logs)
	if err != nil {
		return nil, err
	}
	snaps, err := newSnapshotStore(dir, 2, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("open snapshots: %w", err)
	}
	snaps.log = entryReader{logs: logs, recent: cached, walDir: filepath.Join(dir, walDir), stateDir: st.Dir()}
	st.SetRaftLog(snaps.log)
	logs.holder = &logHolder{store: st, snaps: snaps, walDir: filepath.Join(dir, walDir), logger: cfg.Logger, slack: cmp.Or(cfg.LogHoldMiB<<20, defaultLogHoldSlack)}
	sm, err := fsm.NewFSM(st)
	if err != nil {
		return nil, err
	}
	sm.LinkSnapshotFiles(snaps.openedFiles)
	if err := catchUpFromSnapshot(sm, snaps); err != nil {
		return nil, err
	}
	sm.EntryWrites = func(t command.CommandType, writes int) {
		if writes > command.MaxEntryWrites {
			cfg.Logger.Error("a raft entry wrote more keys than the bound (a bug: please report it)", "type", t, "writes", writes, "bound", command.MaxEntryWrites)
		}
	}
	sm.Anomaly = func(msg string, args ...any) {
		cfg.Logger.Error("state anomaly: "+msg+" (a bug: please report it)", args...)
	}
	sm.Digested = func(p fsm.DigestPoint) {
		cfg.Logger.Info("state digest", "index", p.Index, "digest", fmt.Sprintf("%016x", p.Digest))
	}
	n.FSM = sm

	if cfg.Mux == nil {
		if cfg.Mux, err = Listen(cfg.RaftAddr, cfg.RaftAdvertise, cfg.TLS, cfg.Logger); err != nil {
			return nil, err
		}
		n.ownMux = cfg.Mux
	}
	var layer *raftmux.Layer
	if n.transport, layer, err = newTransport(cfg.Mux, cfg.Group, cfg.Logger, cfg.SnapshotSend); err != nil {
		return nil, err
	}
	layer.AnswerProbes(func() (uint64, bool) {
		term, err := logs.GetUint64(keyCurrentTerm)
		return term, err == nil // a term it cannot read is no answer (0 would say "a new cluster")
	})
	cfg.RaftAdvertise = n.RaftAddr() // with port 0, the port the system picked

	rc := raftConfig(cfg)
	exists, err := raft.HasExistingState(cached, logs, snaps)
	if err != nil {
		return nil, err
	}
	// A new data directory in a static cluster may be a wiped voter's: it
	// is marked before anything else is written, so that a restart before
	// the guard lifts takes the same path.
	if !exists && (!cfg.Join || cfg.GuardVotes) && len(cfg.Peers) > 1 {
		if err := logs.SetUint64(keyNewDirectory, 1); err != nil {
			return nil, err
		}
	}
	if !exists && !cfg.Join {
		if err := raft.BootstrapCluster(rc, cached, logs, snaps, n.transport, clusterConfig(cfg)); err != nil {
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
	}
	newDir, _ := logs.GetUint64(keyNewDirectory)
	var transport raft.Transport = n.transport
	if through, _ := logs.GetUint64(keyNoVoteThroughTerm); through > 0 || newDir == 1 {
		n.guard = newVoteGuard(n.transport, raft.ServerID(cfg.ID), logs, through, newDir == 1, cfg.Logger)
		transport = n.guard
		if newDir != 1 {
			cfg.Logger.Warn("withholding votes until the log holds an entry past term", "term", through)
		}
	}
	n.Raft, err = raft.NewRaft(rc, sm, cached, logs, snaps, transport)
	if err != nil {
		return nil, fmt.Errorf("start raft: %w", err)
	}
	n.transport.watch(n.Raft)
	if n.guard != nil {
		n.guard.raft.Store(n.Raft)
	}
	n.stop = make(chan struct{})
	if newDir == 1 {
		go n.guard.askPeers(layer, cfg, n.stop)
	}
	go n.watchLogBytes(*rc, n.stop)
	ok = true
	return n, nil
}

func raftConfig(cfg NodeConfig) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = cfg.Logger
	// The store keeps its own applied index, so a restart need not reload
	// the newest snapshot; catchUpFromSnapshot covers a store left behind it.
	rc.NoSnapshotRestoreOnStart = true
	// Queue many concurrent Applys so one append and one fsync carry them.
	rc.BatchApplyCh = true
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = heartbeatTimeout, electionTimeout, leaderLease
	rc.SnapshotThreshold, rc.TrailingLogs = defaultSnapshotThreshold, defaultTrailingLogs
	// Look for a due snapshot often (the look is cheap): with raft's 120 s
	// default a node restarted more often than that never compacts its log.
	rc.SnapshotInterval = snapshotInterval
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
	}
	if cfg.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.TrailingLogs
	}
	return rc
}

func clusterConfig(cfg NodeConfig) raft.Configuration {
	peers := cfg.Peers
	if len(peers) == 0 {
		peers = []Peer{{ID: cfg.ID, Addr: cfg.RaftAdvertise}}
	}
	var c raft.Configuration
	for _, p := range peers {
		c.Servers = append(c.Servers, raft.Server{
			Suffrage: raft.Voter,
			ID:       raft.ServerID(p.ID),
			Address:  raft.ServerAddress(p.Addr),
		})
	}
	sort.Slice(c.Servers, func(i, j int) bool { return c.Servers[i].ID < c.Servers[j].ID })
	return c
}

// catchUpFromSnapshot restores the newest snapshot into the store when the
// store is older than it. Badger does not fsync, so after a machine crash
// the store can lag entries that raft already compacted away behind a
// snapshot; with NoSnapshotRestoreOnStart raft would not notice. Segment
// files are not fsynced per entry either: when a crash left one shorter
// than the index says (store.DataBehind), the newest snapshot (whose data
// was fsynced when it was taken) is restored, or with no snapshot the
// store starts empty, and raft re-applies the log from there.
//
// The comparison uses the applied index recorded inside the snapshot, not
// the snapshot's raft index: raft's index also counts entries the FSM never
// sees (a new leader's no-op), so it is often ahead of a store that is in
// fact complete.
func catchUpFromSnapshot(sm *fsm.FSM, snaps raft.SnapshotStore) error {
	behind := sm.Store().DataBehind()
	list, err := snaps.List()
	if err != nil {
		return err
	}
	if len(list) == 0 {
		if behind != nil {
			return sm.Reset()
		}
		return nil
	}
	if behind == nil && sm.AppliedIndex() >= list[0].Index {
		return nil
	}
	newest := list[0]
	open := func() (io.ReadCloser, error) {
		_, rc, err := snaps.Open(newest.ID)
		if err != nil {
			return nil, fmt.Errorf("open snapshot %s: %w", newest.ID, err)
		}
		return rc, nil
	}
	if behind == nil {
		rc, err := open()
		if err != nil {
			return err
		}
		inSnapshot, err := store.SnapshotAppliedIndex(rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("read snapshot %s: %w", newest.ID, err)
		}
		if sm.AppliedIndex() >= inSnapshot {
			return nil
		}
	}
	rc, err := open()
	if err != nil {
		return err
	}
	if err := sm.Restore(rc); err != nil {
		return fmt.Errorf("restore snapshot %s: %w", newest.ID, err)
	}
	return nil
}

// Shutdown stops raft and closes the transport and the log.
func (n *Node) Shutdown() error {
	if n.stop != nil {
		close(n.stop)
	}
	n.transport.stopPacing() // a paced snapshot send ends now, not at its pace
	err := n.Raft.Shutdown().Error()
	if n.FSM != nil {
		n.FSM.StopCheck() // it reads the store, which closes next
	}
	return errors.Join(err, n.close())
}

func (n *Node) close() error {
	var errs []error
	if n.transport != nil {
		errs = append(errs, n.transport.Close())
	}
	if n.ownMux != nil {
		errs = append(errs, n.ownMux.Close())
	}
	if n.logs != nil {
		errs = append(errs, n.logs.Close())
	}
	return errors.Join(errs...)
}
