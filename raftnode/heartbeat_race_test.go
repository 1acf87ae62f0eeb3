package raftnode

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// The race the heartbeat gate closes, provoked: three raft nodes on real
// network transports over loopback. The leader, A, has a long lease. It
// is cut off (its own messages fail; the others send it nothing but
// heartbeats), the others elect a leader of the next term, and A, still
// leading, hears of that term from a heartbeat alone; then A is asked to
// apply an entry. Healed, A follows the new leader. Raft's log matching
// rule must hold after every round: two logs with an entry of the same
// index and term hold the same entry. Without the gate
// (WAGGLE_TEST_UNGATED=1) the heartbeat raises A's term beside its main
// loop, A stamps the entry with the new term at the index of the new
// leader's no-op, keeps it, and the rule breaks in the first round (3 of
// 3 runs).
func TestLogsMatchWhenANewLeadersHeartbeatMeetsTheOldLeader(t *testing.T) {
	gated := os.Getenv("WAGGLE_TEST_UNGATED") == ""
	rounds := 3
	if testing.Short() {
		rounds = 1
	}
	c := newRaceCluster(t, gated)
	for round := range rounds {
		c.provoke(t)
		if bad := c.mismatches(); len(bad) > 0 {
			t.Fatalf("round %d (gated %v): logs break the log matching rule at %d indexes, first %s", round, gated, len(bad), bad[0])
		}
	}
	t.Logf("gated %v: %d rounds, logs match; %d entries", gated, rounds, c.nodes[0].logs.lastIndex())
}

type raceCluster struct {
	nodes [3]*raceNode // nodes[0] is A, the long-lease leader
	addr  [3]raft.ServerAddress
}

type raceNode struct {
	id    raft.ServerID
	raft  *raft.Raft
	logs  *raceLogs
	trans *cuttableTransport
}

// cuttableTransport fails every RPC its node sends while cut, and all
// but heartbeats to heartbeatsOnlyTo. It offers no pipeline, so every
// append goes through AppendEntries.
type cuttableTransport struct {
	raft.Transport
	cut              atomic.Bool
	heartbeatsOnlyTo atomic.Pointer[raft.ServerAddress]
}

func (c *cuttableTransport) cutTo(target raft.ServerAddress) bool {
	to := c.heartbeatsOnlyTo.Load()
	return c.cut.Load() || to != nil && *to == target
}

// isHeartbeat is how raft's network transport tells a heartbeat.
func isHeartbeat(a *raft.AppendEntriesRequest) bool {
	return a.PrevLogEntry == 0 && a.PrevLogTerm == 0 && len(a.Entries) == 0 && a.LeaderCommitIndex == 0
}

var errCut = errors.New("cut")

func (c *cuttableTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

func (c *cuttableTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if c.cutTo(target) && !(isHeartbeat(args) && !c.cut.Load()) {
		return errCut
	}
	return c.Transport.AppendEntries(id, target, args, resp)
}

func (c *cuttableTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if c.cutTo(target) {
		return errCut
	}
	return c.Transport.RequestVote(id, target, args, resp)
}

func (c *cuttableTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if c.cutTo(target) {
		return errCut
	}
	return c.Transport.(raft.WithPreVote).RequestPreVote(id, target, args, resp)
}

func (c *cuttableTransport) Close() error { return c.Transport.(raft.WithClose).Close() }

// raceLogs is an in-memory log whose entries the test reads back.
type raceLogs struct{ *raft.InmemStore }

func (l *raceLogs) lastIndex() uint64 { i, _ := l.LastIndex(); return i }

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, errors.New("no snapshots") }
func (nopFSM) Restore(io.ReadCloser) error         { return errors.New("no snapshots") }

func newRaceCluster(t *testing.T, gated bool) *raceCluster {
	c := &raceCluster{}
	var servers []raft.Server
	for i := range c.nodes {
		tcp, err := raft.NewTCPTransport("127.0.0.1:0", nil, 4, 2*time.Second, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var tr raft.Transport = tcp
		if gated {
			tr = newHeartbeatGate(tcp)
		}
		n := &raceNode{id: raft.ServerID(fmt.Sprint(i + 1)), logs: &raceLogs{raft.NewInmemStore()}, trans: &cuttableTransport{Transport: tr}}
		c.nodes[i], c.addr[i] = n, tcp.LocalAddr()
		servers = append(servers, raft.Server{ID: n.id, Address: tcp.LocalAddr()})
	}
	for i, n := range c.nodes {
		rc := raft.DefaultConfig()
		rc.LocalID = n.id
		rc.Logger = hclog.NewNullLogger()
		rc.SnapshotThreshold, rc.SnapshotInterval = 1<<40, time.Hour
		if i == 0 { // A: first to stand, and slow to notice it lost the others
			rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 2*time.Second, 2*time.Second, 2*time.Second
		} else { // quick, once A leads (see provoke)
			rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 10*time.Second, 10*time.Second, 100*time.Millisecond
		}
		snaps := raft.NewInmemSnapshotStore()
		if err := raft.BootstrapCluster(rc, n.logs, n.logs, snaps, n.trans, raft.Configuration{Servers: servers}); err != nil {
			t.Fatal(err)
		}
		r, err := raft.NewRaft(rc, nopFSM{}, n.logs, n.logs, snaps, n.trans)
		if err != nil {
			t.Fatal(err)
		}
		if g, ok := n.trans.Transport.(*heartbeatGate); ok {
			g.watch(r)
		}
		n.raft = r
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			n.raft.Shutdown().Error()
			n.trans.Close()
		}
	})
	return c
}

// provoke makes A the leader with its log on every node, then cuts it
// off: its own messages fail, and the others send it nothing but
// heartbeats, so it hears of the next term from those alone.
// Once it has, it is asked to apply one entry. Healed, A follows the new
// leader and catches up.
func (c *raceCluster) provoke(t *testing.T) {
	t.Helper()
	a := c.nodes[0]
	slow := raft.ReloadableConfig{HeartbeatTimeout: 10 * time.Second, ElectionTimeout: 10 * time.Second, TrailingLogs: 10240, SnapshotInterval: time.Hour, SnapshotThreshold: 1 << 40}
	quick := slow
	quick.HeartbeatTimeout, quick.ElectionTimeout = 150*time.Millisecond, 150*time.Millisecond
	c.reload(t, slow)
	waitFor(t, 20*time.Second, "A to lead", func() bool {
		if a.raft.State() == raft.Leader {
			return true
		}
		if l := c.leader(); l != nil {
			l.raft.LeadershipTransferToServer(a.id, c.addr[0])
			time.Sleep(50 * time.Millisecond)
		}
		return false
	})
	var fs []raft.ApplyFuture
	for i := range 200 {
		fs = append(fs, a.raft.Apply(fmt.Appendf(nil, "term %d entry %d", a.raft.CurrentTerm(), i), 5*time.Second))
	}
	for _, f := range fs {
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "every node to hold A's log", func() bool {
		return c.nodes[1].logs.lastIndex() == a.logs.lastIndex() && c.nodes[2].logs.lastIndex() == a.logs.lastIndex()
	})
	term := a.raft.CurrentTerm()

	a.trans.cut.Store(true)
	for _, n := range c.nodes[1:] {
		n.trans.heartbeatsOnlyTo.Store(&c.addr[0])
	}
	c.reload(t, quick)
	waitFor(t, 10*time.Second, "another node to lead a newer term, and A to hear of it", func() bool {
		l := c.leader()
		return l != nil && l != a && l.raft.CurrentTerm() > term && a.raft.CurrentTerm() > term
	})
	// A cannot commit it; the question is under which term it lands.
	a.raft.Apply([]byte("applied on A after it heard of a newer term"), 500*time.Millisecond).Error()

	a.trans.cut.Store(false)
	for _, n := range c.nodes[1:] {
		n.trans.heartbeatsOnlyTo.Store(nil)
	}
	var target uint64
	waitFor(t, 20*time.Second, "a leader to commit its log", func() bool {
		l := c.leader()
		if l == nil || l == a || l.raft.Barrier(time.Second).Error() != nil {
			return false
		}
		target = l.raft.AppliedIndex()
		return true
	})
	waitFor(t, 20*time.Second, "A to catch up", func() bool { return a.raft.AppliedIndex() >= target })
}

func (c *raceCluster) reload(t *testing.T, rc raft.ReloadableConfig) {
	t.Helper()
	for _, n := range c.nodes[1:] {
		if err := n.raft.ReloadConfig(rc); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *raceCluster) leader() *raceNode {
	for _, n := range c.nodes {
		if n.raft.State() == raft.Leader {
			return n
		}
	}
	return nil
}

// mismatches lists the indexes where two nodes hold entries of the same
// term that differ.
func (c *raceCluster) mismatches() []string {
	var out []string
	last := c.nodes[0].logs.lastIndex()
	for _, n := range c.nodes[1:] {
		last = min(last, n.logs.lastIndex())
	}
	for i := uint64(1); i <= last; i++ {
		var first raft.Log
		if err := c.nodes[0].logs.GetLog(i, &first); err != nil {
			continue
		}
		for _, n := range c.nodes[1:] {
			var l raft.Log
			if err := n.logs.GetLog(i, &l); err != nil {
				continue
			}
			if l.Term == first.Term && (l.Type != first.Type || !bytes.Equal(l.Data, first.Data)) {
				out = append(out, fmt.Sprintf("index %d term %d: node 1 %q, node %s %q", i, l.Term, first.Data, n.id, l.Data))
			}
		}
	}
	return out
}

func waitFor(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
