package integration

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// groupsAnswer is the part of /health that lists a node's raft groups.
type groupsAnswer struct {
	Groups []struct {
		ID      uint32 `json:"id"`
		Role    string `json:"role"`
		Leader  *int   `json:"leader"`
		Commit  uint64 `json:"commit"`
		Applied uint64 `json:"applied"`
	} `json:"groups"`
}

// groupLeaders answers which node each raft group's member on n follows
// (0: none known).
func groupLeaders(t testing.TB, n *node) (map[uint32]int, error) {
	var h groupsAnswer
	if status := getJSON(t, n.url("/health"), &h); status != http.StatusOK {
		return nil, fmt.Errorf("node %d: health status %d", n.id, status)
	}
	out := map[uint32]int{}
	for _, g := range h.Groups {
		out[g.ID] = 0
		if g.Leader != nil {
			out[g.ID] = *g.Leader
		}
	}
	return out, nil
}

// waitGroupLeaders waits until every node in on agrees that each group is
// led by the node want names (want returns false for "any node but").
func waitGroupLeaders(t testing.TB, on []*node, groups uint32, want func(group uint32, leader int) error) {
	t.Helper()
	waitFor(t, 45*time.Second, func() error {
		for _, n := range on {
			leaders, err := groupLeaders(t, n)
			if err != nil {
				return err
			}
			if len(leaders) != int(groups) {
				return fmt.Errorf("node %d lists %d groups, want %d", n.id, len(leaders), groups)
			}
			for g := range groups {
				if err := want(g, leaders[g]); err != nil {
					return fmt.Errorf("node %d sees group %d: %w", n.id, g, err)
				}
			}
		}
		return nil
	})
}

// preferred wants group g led by node g+1, the voter it prefers while all
// are up (raftgroups.Preferred).
func preferred(g uint32, leader int) error {
	if leader != int(g)+1 {
		return fmt.Errorf("led by %d, want %d", leader, g+1)
	}
	return nil
}

// A 3-node cluster with three raft groups spreads their leadership, one
// group per node (group g on the node at position g of the voters). A
// node killed with kill -9 has its group led by a survivor within an
// election; once it is back, its group's leadership returns to it.
func TestDataGroupsSpreadLeadershipAndFailOver(t *testing.T) {
	c := startCluster(t, 3, "--data-groups", "3")
	start := time.Now()
	waitGroupLeaders(t, c.nodes, 3, preferred)
	t.Logf("leadership spread %v after the cluster formed", time.Since(start).Round(time.Millisecond))
	// waggle cluster status prints each group's leader and members. It is
	// asked through node 3, which may not yet have applied every node's
	// address registration, so it is asked until it has.
	waitFor(t, 15*time.Second, func() error {
		out, err := runWithTimeout(t, exec.Command(waggleBinary, "cluster", "status", "--server", c.nodes[2].httpAddr), 30*time.Second)
		if err != nil {
			return fmt.Errorf("cluster status: %v\n%s", err, out)
		}
		for g := range 3 {
			want := regexp.MustCompile(fmt.Sprintf(`(?m)^%d +%d +`, g, g+1))
			if !want.Match(out) || !strings.Contains(string(out), fmt.Sprintf("%d:leader", g+1)) {
				return fmt.Errorf("cluster status does not show group %d led by node %d:\n%s", g, g+1, out)
			}
		}
		return nil
	})

	victim := c.nodes[1] // leads group 1
	victim.kill9()
	start = time.Now()
	survivors := []*node{c.nodes[0], c.nodes[2]}
	waitGroupLeaders(t, survivors, 3, func(g uint32, leader int) error {
		if g == 1 {
			if leader == 0 || leader == victim.id {
				return fmt.Errorf("led by %d, want a survivor", leader)
			}
			return nil
		}
		return preferred(g, leader)
	})
	t.Logf("group 1 failed over %v after the kill", time.Since(start).Round(time.Millisecond))

	victim.start()
	start = time.Now()
	waitGroupLeaders(t, c.nodes, 3, preferred)
	t.Logf("group 1 back on node 2 %v after its restart", time.Since(start).Round(time.Millisecond))

	// An operator moves group 1's leadership to node 3, then gives it back.
	lead := func(args ...string) string {
		out, err := runWithTimeout(t, exec.Command(waggleBinary, append([]string{"cluster", "lead", "--server", c.nodes[0].httpAddr}, args...)...), 30*time.Second)
		if err != nil {
			t.Fatalf("cluster lead %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out, err := runWithTimeout(t, exec.Command(waggleBinary, "cluster", "lead", "--server", c.nodes[0].httpAddr, "1", "9"), 30*time.Second); err == nil {
		t.Fatalf("choosing node 9, no voter, succeeded:\n%s", out)
	}
	lead("1", "3")
	start = time.Now()
	waitGroupLeaders(t, c.nodes, 3, func(g uint32, leader int) error {
		if g == 1 && leader != 3 {
			return fmt.Errorf("led by %d, want node 3 as chosen", leader)
		}
		if g == 1 {
			return nil
		}
		return preferred(g, leader)
	})
	t.Logf("group 1 moved to node 3 %v after the choice", time.Since(start).Round(time.Millisecond))
	out, err := runWithTimeout(t, exec.Command(waggleBinary, "cluster", "status", "--server", c.nodes[1].httpAddr), 30*time.Second)
	if err != nil || !regexp.MustCompile(`(?m)^1 +3 +3 +`).Match(out) {
		t.Fatalf("cluster status does not show group 1 led by its chosen node 3: %v\n%s", err, out)
	}
	lead("1", "--clear")
	waitGroupLeaders(t, c.nodes, 3, preferred)
	c.replicasAgree()
}

// A data directory keeps the group count it was created with: a node
// started on it with another --data-groups refuses to start and says why.
// Each data group has its raft log in a directory of its own.
func TestDataGroupsCountIsFixed(t *testing.T) {
	n := withArgs(newNode(t, 1), []string{"--data-groups", "2"})
	n.start()
	n.waitLeader()
	n.stop()
	// waggle verify checks each group's store and raft log.
	out, err := runWithTimeout(t, exec.Command(waggleBinary, "verify", "--data-dir", n.dataDir), 30*time.Second)
	if err != nil || !strings.Contains(string(out), "(2 raft groups)") {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	cmd := exec.Command(waggleBinary, "serve", "--node-id", "1", "--data-dir", n.dataDir,
		"--http-addr", n.httpAddr, "--kafka-addr", n.kafkaAddr, "--raft-addr", n.raftAddr, "--data-groups", "3")
	out, err = runWithTimeout(t, cmd, 30*time.Second)
	if err == nil || !strings.Contains(string(out), "created with 2 raft groups, not 3") {
		t.Fatalf("a node with another group count: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(n.dataDir, "groups", "1", "raft")); err != nil {
		t.Fatalf("data group 1 has no raft directory of its own: %v", err)
	}
}

// Damage in one data group's files (a snapshot cut short) is found when
// the node starts and repaired from the peers for that group alone: its
// files go aside within the group's directory, group 0 keeps its data,
// and the node's copy of the group catches up with the group's leader.
func TestDamagedDataGroupIsRepairedAlone(t *testing.T) {
	c := startCluster(t, 3, "--data-groups", "2", "--raft-snapshot-threshold", "16", "--raft-trailing-logs", "16")
	c.pushUntilAccepted(20*time.Second, pushItem{Queue: "kept", TransactionID: "k-1", Payload: "k-1"})
	victim := c.nodes[2] // a follower of group 1, which node 2 leads
	waitGroupLeaders(t, c.nodes, 2, preferred)
	// The leader's maintenance entries fill group 1's log until the victim
	// has a snapshot of its own.
	snapshots := filepath.Join(groupDir(victim, 1), "raft", "snapshots")
	waitFor(t, 60*time.Second, func() error {
		if files, _ := filepath.Glob(filepath.Join(snapshots, "*", "state.bin")); len(files) == 0 {
			return fmt.Errorf("no snapshot of group 1 on node %d yet", victim.id)
		}
		return nil
	})
	victim.stop()
	truncateHalf(t, largestFile(t, snapshots, "state.bin"))

	victim.start()
	waitFor(t, 30*time.Second, func() error {
		leader, err := groupApplied(t, c.nodes[1], 1)
		if err != nil {
			return err
		}
		mine, err := groupApplied(t, victim, 1)
		if err != nil {
			return err
		}
		if mine < leader {
			return fmt.Errorf("node %d applied %d of group 1, its leader %d", victim.id, mine, leader)
		}
		return nil
	})
	log, _ := os.ReadFile(victim.logPath)
	if !strings.Contains(string(log), "the data directory is damaged") || !strings.Contains(string(log), "group=1") {
		t.Fatalf("node %d did not report group 1's damage:\n%s", victim.id, victim.logTail())
	}
	if aside, _ := filepath.Glob(filepath.Join(groupDir(victim, 1), "damaged-*")); len(aside) != 1 {
		t.Fatalf("group 1's damaged files not moved aside within its directory: %v", aside)
	}
	if aside, _ := filepath.Glob(filepath.Join(victim.dataDir, "damaged-*")); len(aside) != 0 {
		t.Fatalf("group 0's files were moved aside too: %v", aside)
	}
	if got := idSet(victim.fetchAll("kept", "Default")); len(got) != 1 {
		t.Fatalf("node %d holds %d of group 0's messages, want 1", victim.id, len(got))
	}
}

// groupDir is data group id's directory on n.
func groupDir(n *node, id int) string { return filepath.Join(n.dataDir, "groups", fmt.Sprint(id)) }

// groupApplied is the index n has applied in raft group id.
func groupApplied(t *testing.T, n *node, id uint32) (uint64, error) {
	var h groupsAnswer
	if status := getJSON(t, n.url("/health"), &h); status != http.StatusOK {
		return 0, fmt.Errorf("node %d: health status %d", n.id, status)
	}
	for _, g := range h.Groups {
		if g.ID == id {
			return g.Applied, nil
		}
	}
	return 0, fmt.Errorf("node %d lists no group %d", n.id, id)
}

// A node added to a cluster of three raft groups runs every group: it
// catches up on each, from snapshots, and holds each group's queue. A node
// started without the cluster's --data-groups (it would place queues in
// other groups) is refused by the add and removed again.
func TestDataGroupsNodeAddedRunsEveryGroup(t *testing.T) {
	c := startCluster(t, 3, "--data-groups", "3")
	waitGroupLeaders(t, c.nodes, 3, preferred)
	// Below log format 2 an add makes the node a voter at once, unchecked
	// (a cluster that old may have members that report nothing): the
	// checks this test is about start once the leader has raised it.
	waitLogFormat(t, c.leader(), 2)
	queues := make([]string, 3)
	for g := range uint32(3) {
		queues[g] = nameIn(t, "grow", g, 3)
		for i := range 10 {
			requireStatus(t, c.nodes[0].push(pushItem{Queue: queues[g], TransactionID: fmt.Sprint("m-", i), Payload: i})[0], "queued", uint64(i))
		}
	}
	c.snapshotAll()
	add := func(n *node, out any) int {
		return postJSON(t, c.leader().url("/api/v1/cluster/nodes"), map[string]any{"id": n.id, "raftAddr": n.raftAddr}, out)
	}

	odd := withArgs(newNode(t, 4), []string{"--join"}) // one group, the default
	odd.start()
	var e errorAnswer
	if status := add(odd, &e); status != http.StatusConflict || e.Code != "data_groups_differ" || !strings.Contains(e.Error, "node 4 runs 1 raft groups; the cluster runs 3") {
		t.Fatalf("adding a node of 1 group to a cluster of 3: status %d %+v, want 409 data_groups_differ", status, e)
	}
	var cl clusterAnswer
	getJSON(t, c.leader().url("/api/v1/cluster"), &cl)
	for _, m := range cl.Members {
		if m.ID == 4 {
			t.Fatalf("node 4 is still a member after the refusal: %+v", cl.Members)
		}
	}

	added := withArgs(newNode(t, 5), []string{"--join", "--data-groups", "3"})
	added.start()
	c.nodes = append(c.nodes, added)
	if status := add(added, nil); status != http.StatusOK {
		t.Fatalf("adding node 5: status %d", status)
	}
	c.waitRegistered(4)
	c.waitCaughtUp(added)
	leaders, err := groupLeaders(t, added)
	if err != nil || len(leaders) != 3 {
		t.Fatalf("node 5 runs groups %v (%v), want 3", leaders, err)
	}
	for g, q := range queues {
		if recs := added.fetchAll(q, "Default").Entries[0].Records; len(recs) != 10 {
			t.Fatalf("node 5 holds %d messages of group %d's queue %s, want 10", len(recs), g, q)
		}
		requireStatus(t, added.push(pushItem{Queue: q, TransactionID: "m-7", Payload: 0})[0], "duplicate", 7)
	}
	waitFor(t, 20*time.Second, func() error {
		if log, _ := os.ReadFile(added.logPath); !strings.Contains(string(log), "the other members run as many raft groups") {
			return errors.New("node 5 has not compared its group count with the others yet")
		}
		return nil
	})
	select {
	case <-added.done():
		t.Fatalf("node 5, running the cluster's 3 groups, stopped:\n%s", added.logTail())
	default:
	}
}

// A static peer started with another --data-groups than the others stops
// itself, saying why; the two that agree go on serving every group.
func TestDataGroupsPeerWithAnotherCountStops(t *testing.T) {
	c := newCluster(t, 3)
	c.nodes[2].ownArgs = []string{"--data-groups", "1"}
	var peers []string
	for _, n := range c.nodes {
		peers = append(peers, fmt.Sprintf("%d=%s", n.id, n.raftAddr))
	}
	for _, n := range c.nodes {
		n.args = append([]string{"--peers", strings.Join(peers, ","), "--data-groups", "3"}, n.ownArgs...)
		n.start()
	}
	odd := c.nodes[2]
	select {
	case <-odd.done():
	case <-time.After(30 * time.Second):
		t.Fatalf("node 3, running 1 group beside two nodes of 3, still runs:\n%s", odd.logTail())
	}
	if log, _ := os.ReadFile(odd.logPath); !strings.Contains(string(log), "this node runs 1 raft groups but nodes 1, 2 run 3") {
		t.Fatalf("node 3 stopped without naming the counts:\n%s", odd.logTail())
	}
	for g := range uint32(3) {
		q := nameIn(t, "static", g, 3)
		waitFor(t, 20*time.Second, func() error {
			var out []pushAnswer
			if status := postJSON(t, c.nodes[0].url("/api/v1/push"), map[string]any{"items": []pushItem{{Queue: q, TransactionID: "a", Payload: 1}}}, &out); status != http.StatusCreated {
				return fmt.Errorf("push to group %d's queue: status %d", g, status)
			}
			return nil
		})
	}
}
