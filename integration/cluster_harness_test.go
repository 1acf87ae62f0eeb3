package integration

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// cluster is a static cluster of real waggle processes on loopback.
type cluster struct {
	t     testing.TB
	nodes []*node

	mu    sync.Mutex
	wipes map[int]int // data directories lost, per node id
}

// startCluster starts size nodes that bootstrap one cluster, with extra
// serve flags for all, and waits until every node knows the leader's
// HTTP address (every node has registered).
func startCluster(t testing.TB, size int, extra ...string) *cluster {
	t.Helper()
	c := newCluster(t, size)
	c.start(extra...)
	return c
}

// newCluster prepares size nodes without starting them, so a test can
// change one (its data directory, its raft addresses) first.
func newCluster(t testing.TB, size int) *cluster {
	c := &cluster{t: t}
	for i := 1; i <= size; i++ {
		c.nodes = append(c.nodes, newNode(t, i))
	}
	return c
}

// start starts every node with the same --peers list and extra serve
// flags, and waits until all have registered.
func (c *cluster) start(extra ...string) {
	c.t.Helper()
	var peers []string
	for _, n := range c.nodes {
		peers = append(peers, fmt.Sprintf("%d=%s", n.id, cmp.Or(n.raftAdvertise, n.raftAddr)))
	}
	for _, n := range c.nodes {
		n.args = append(append([]string{"--peers", strings.Join(peers, ",")}, extra...), n.ownArgs...)
		n.start()
	}
	c.waitRegistered(len(c.nodes))
}

// kafkaAddrs lists every node's Kafka address, for a client's seed brokers.
func (c *cluster) kafkaAddrs() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.kafkaAddr)
	}
	return out
}

// waitRegistered waits until the leader lists want members, each with a
// registered HTTP address, and every live node knows the leader.
func (c *cluster) waitRegistered(want int) {
	c.t.Helper()
	waitFor(c.t, 20*time.Second, func() error {
		cl, err := c.members()
		if err != nil {
			return err
		}
		if len(cl.Members) != want {
			return fmt.Errorf("%d members, want %d", len(cl.Members), want)
		}
		for _, m := range cl.Members {
			if m.HTTPAddr == "" {
				return fmt.Errorf("node %d has not registered", m.ID)
			}
		}
		for _, n := range c.live() {
			var h healthAnswer
			if getJSON(c.t, n.url("/health"), &h) != http.StatusOK || h.Raft.LeaderHTTP == "" {
				return fmt.Errorf("node %d does not know the leader's address yet", n.id)
			}
		}
		return nil
	})
}

// live lists the nodes whose process is running.
func (c *cluster) live() []*node {
	var out []*node
	for _, n := range c.nodes {
		select {
		case <-n.done():
		default:
			out = append(out, n)
		}
	}
	return out
}

// findLeader returns the live node that reports itself leader; during a
// partition a deposed leader may still think it leads for a moment, so the
// one with the highest term wins.
func (c *cluster) findLeader() (*node, error) {
	var leader *node
	var term uint64
	for _, n := range c.live() {
		var h healthAnswer
		if getJSON(c.t, n.url("/health"), &h) == http.StatusOK && h.Raft.Role == "leader" && h.Raft.Term >= term {
			leader, term = n, h.Raft.Term
		}
	}
	if leader == nil {
		return nil, errors.New("no live node is leader")
	}
	return leader, nil
}

// leader waits for a leader among the live nodes.
func (c *cluster) leader() *node {
	c.t.Helper()
	var l *node
	waitFor(c.t, 20*time.Second, func() (err error) {
		l, err = c.findLeader()
		return err
	})
	return l
}

// followers lists the live nodes other than the current leader.
func (c *cluster) followers() []*node {
	l := c.leader()
	var out []*node
	for _, n := range c.live() {
		if n != l {
			out = append(out, n)
		}
	}
	return out
}

// pushUntilAccepted sends one push to the live nodes in turn until one
// answers 201, as a client with a list of bootstrap servers would.
func (c *cluster) pushUntilAccepted(timeout time.Duration, items ...pushItem) []pushAnswer {
	c.t.Helper()
	var out []pushAnswer
	deadline := time.Now().Add(timeout)
	for i := 0; ; i++ {
		live := c.live()
		n := live[i%len(live)]
		out = nil
		if postJSON(c.t, n.url("/api/v1/push"), map[string]any{"items": items}, &out) == http.StatusCreated && len(out) == len(items) {
			return out
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no node accepted the push within %v", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitCaughtUp waits until n has applied at least the leader's commit
// index, in every raft group the cluster runs.
func (c *cluster) waitCaughtUp(n *node) {
	c.t.Helper()
	waitFor(c.t, 30*time.Second, func() error {
		var lh, nh healthAnswer
		l, err := c.findLeader()
		if err != nil {
			return err
		}
		getJSON(c.t, l.url("/health"), &lh)
		getJSON(c.t, n.url("/health"), &nh)
		if err := appliedLeadersCommit(n, lh, nh); err != nil {
			return err
		}
		// A restarted node answers reads 503 catching_up until it has
		// applied the last index its log held at start; an uncommitted
		// tail there waits for the leader's next entry (a maintenance tick).
		if status := getJSON(c.t, n.url("/api/v1/queues"), nil); status == 0 || status == http.StatusServiceUnavailable {
			return fmt.Errorf("node %d does not serve reads yet (status %d)", n.id, status)
		}
		return c.groupsCaughtUp(n)
	}, n.logTail)
	c.noDivergence(c.live()...)
}

// appliedLeadersCommit reports whether node n (health nh) has applied the
// commit index of the leader (health lh). A leader just elected knows its
// commit index only once an entry of its term is committed (before that
// raft reports what it last learned, 0 after a restart), so until then
// its commit index is not the cluster's and nothing is caught up.
func appliedLeadersCommit(n *node, lh, nh healthAnswer) error {
	if lh.Raft.Commit < lh.Raft.Applied {
		return fmt.Errorf("the leader has not committed an entry of its term yet (commit %d, applied %d)", lh.Raft.Commit, lh.Raft.Applied)
	}
	if nh.Raft.Applied < lh.Raft.Commit {
		return fmt.Errorf("node %d applied %d, leader committed %d", n.id, nh.Raft.Applied, lh.Raft.Commit)
	}
	return nil
}

// groupsCaughtUp reports whether n has applied, in each data group, what
// the group's leader has committed.
func (c *cluster) groupsCaughtUp(n *node) error {
	var mine groupsAnswer
	getJSON(c.t, n.url("/health"), &mine)
	committed := map[uint32]uint64{}
	for _, m := range c.live() {
		var h groupsAnswer
		getJSON(c.t, m.url("/health"), &h)
		for _, g := range h.Groups {
			if g.Role != "leader" {
				continue
			}
			if g.Commit < g.Applied { // see appliedLeadersCommit
				return fmt.Errorf("raft group %d: its leader, node %d, has not committed an entry of its term yet", g.ID, m.id)
			}
			committed[g.ID] = g.Commit
		}
	}
	for _, g := range mine.Groups {
		if g.Applied < committed[g.ID] {
			return fmt.Errorf("node %d applied %d of raft group %d, its leader committed %d", n.id, g.Applied, g.ID, committed[g.ID])
		}
	}
	return nil
}

// snapshotAll forces a snapshot on every live node.
func (c *cluster) snapshotAll() {
	c.t.Helper()
	for _, n := range c.live() {
		var out struct{ Index uint64 }
		if status := postJSON(c.t, n.url("/api/v1/cluster/snapshot"), struct{}{}, &out); status != http.StatusOK || out.Index == 0 {
			c.t.Fatalf("snapshot on node %d: status %d index %d", n.id, status, out.Index)
		}
	}
}

// rejoinThroughSnapshot starts n, a node that was down while the log moved
// past what the others keep (--raft-trailing-logs), waits until it has
// caught up and requires that it did so by installing a snapshot.
func (c *cluster) rejoinThroughSnapshot(n *node) {
	c.t.Helper()
	n.start()
	c.waitCaughtUp(n)
	var h healthAnswer
	getJSON(c.t, n.url("/health"), &h)
	if h.Raft.LastSnapshotIndex == 0 {
		c.t.Fatalf("node %d rejoined without a snapshot: it cannot have caught up from a compacted log\n%s", n.id, n.logTail())
	}
}

type clusterAnswer struct {
	Leader  *int `json:"leader"`
	Members []struct {
		ID       int     `json:"id"`
		RaftAddr string  `json:"raftAddr"`
		HTTPAddr string  `json:"httpAddr"`
		Voter    bool    `json:"voter"`
		Role     string  `json:"role"`
		Applied  *uint64 `json:"applied"`
	} `json:"members"`
}

// diagnose describes every node for a log: its health and its log's end.
func (c *cluster) diagnose() string {
	var b strings.Builder
	for _, n := range c.nodes {
		var h healthAnswer
		status := getJSON(c.t, n.url("/health"), &h)
		fmt.Fprintf(&b, "node %d: status %d %+v\n", n.id, status, h.Raft)
		tail := n.logTail()
		if i := strings.LastIndex(tail[:max(0, len(tail)-1500)], "\n"); i >= 0 {
			tail = tail[i+1:]
		}
		b.WriteString(tail)
	}
	return b.String()
}

// wipe stops n and empties its data directory (a lost disk), and counts
// it: a checker that follows one node's local view starts over after it.
func (c *cluster) wipe(n *node) {
	c.t.Helper()
	n.wipe()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wipes == nil {
		c.wipes = map[int]int{}
	}
	c.wipes[n.id]++
}

// wipesOf is how many times node id's data directory was wiped.
func (c *cluster) wipesOf(id int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wipes[id]
}

// healed says what is still broken after a fault: a node not running, a
// raft link still cut.
func (c *cluster) healed(l *links) error {
	var down []int
	for _, n := range c.nodes {
		if n.hasExited() {
			down = append(down, n.id)
		}
	}
	if len(down) > 0 {
		return fmt.Errorf("nodes %v are not running", down)
	}
	if cut := l.cutNow(); len(cut) > 0 {
		return fmt.Errorf("raft links %v are still cut", cut)
	}
	return nil
}

// joinArgs are n's serve flags with --join in place of --peers: started
// empty, it waits to be added (POST /api/v1/cluster/nodes).
func joinArgs(n *node) []string {
	out := []string{"--join"}
	for i := 0; i < len(n.args); i++ {
		if n.args[i] == "--peers" {
			i++ // and its value
			continue
		}
		out = append(out, n.args[i])
	}
	return out
}

// members is the cluster as the current leader lists it.
func (c *cluster) members() (clusterAnswer, error) {
	var cl clusterAnswer
	l, err := c.findLeader()
	if err != nil {
		return cl, err
	}
	status := 0
	if slices.Contains(l.args, "--auth") {
		status = authDo(c.t, http.MethodGet, l.url("/api/v1/cluster"), bootstrapToken, nil, &cl)
	} else {
		status = getJSON(c.t, l.url("/api/v1/cluster"), &cl)
	}
	if status != http.StatusOK {
		return cl, fmt.Errorf("cluster listing on node %d: status %d", l.id, status)
	}
	return cl, nil
}

// removeNode removes node id from the raft configuration (DELETE
// /api/v1/cluster/nodes/{id}, as `waggle cluster remove`), asking whichever
// node leads again until the leader's listing no longer names it. Node id
// may be the leader: it hands over and steps down.
func (c *cluster) removeNode(id int) {
	c.t.Helper()
	waitFor(c.t, 60*time.Second, func() error {
		l, err := c.findLeader()
		if err != nil {
			return err
		}
		switch status := do(c.t, http.MethodDelete, l.url(fmt.Sprintf("/api/v1/cluster/nodes/%d", id)), nil, nil); status {
		case http.StatusOK, http.StatusNotFound: // removed, now or by an earlier try whose answer was lost
		default:
			return fmt.Errorf("remove node %d through node %d: status %d", id, l.id, status)
		}
		cl, err := c.members()
		if err != nil {
			return err
		}
		for _, m := range cl.Members {
			if m.ID == id {
				return fmt.Errorf("node %d is still listed", id)
			}
		}
		return nil
	})
}

// addVoter adds n, started with --join, as a voter (POST
// /api/v1/cluster/nodes, as `waggle cluster add`) through whichever node
// leads, until the leader lists it as a voter.
func (c *cluster) addVoter(n *node) {
	c.t.Helper()
	waitFor(c.t, 90*time.Second, func() error {
		cl, err := c.members()
		if err != nil {
			return err
		}
		for _, m := range cl.Members {
			if m.ID == n.id && m.Voter {
				return nil
			}
		}
		l, err := c.findLeader()
		if err != nil {
			return err
		}
		var e errorAnswer
		status := postJSON(c.t, l.url("/api/v1/cluster/nodes"), map[string]any{"id": n.id, "raftAddr": cmp.Or(n.raftAdvertise, n.raftAddr)}, &e)
		return fmt.Errorf("add node %d through node %d: status %d %s", n.id, l.id, status, e.Code)
	}, n.logTail)
}
