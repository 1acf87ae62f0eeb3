package integration

import (
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
		ID     uint32 `json:"id"`
		Role   string `json:"role"`
		Leader *int   `json:"leader"`
	} `json:"groups"`
}

// groupLeaders answers which node each raft group's member on n follows
// (0: none known).
func groupLeaders(t *testing.T, n *node) (map[uint32]int, error) {
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
func waitGroupLeaders(t *testing.T, on []*node, groups uint32, want func(group uint32, leader int) error) {
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

// A 3-node cluster with three raft groups spreads their leadership, one
// group per node (group g on the node at position g of the voters). A
// node killed with kill -9 has its group led by a survivor within an
// election; once it is back, its group's leadership returns to it.
func TestDataGroupsSpreadLeadershipAndFailOver(t *testing.T) {
	c := startCluster(t, 3, "--data-groups", "3")
	preferred := func(g uint32, leader int) error {
		if leader != int(g)+1 {
			return fmt.Errorf("led by %d, want %d", leader, g+1)
		}
		return nil
	}
	start := time.Now()
	waitGroupLeaders(t, c.nodes, 3, preferred)
	t.Logf("leadership spread %v after the cluster formed", time.Since(start).Round(time.Millisecond))
	// waggle cluster status prints each group's leader and members.
	out, err := runWithTimeout(t, exec.Command(waggleBinary, "cluster", "status", "--server", c.nodes[2].httpAddr), 30*time.Second)
	if err != nil {
		t.Fatalf("cluster status: %v\n%s", err, out)
	}
	for g := range 3 {
		want := regexp.MustCompile(fmt.Sprintf(`(?m)^%d +%d +`, g, g+1))
		if !want.Match(out) || !strings.Contains(string(out), fmt.Sprintf("%d:leader", g+1)) {
			t.Fatalf("cluster status does not show group %d led by node %d:\n%s", g, g+1, out)
		}
	}

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
}

// A data directory keeps the group count it was created with: a node
// started on it with another --data-groups refuses to start and says why.
// Each data group has its raft log in a directory of its own.
func TestDataGroupsCountIsFixed(t *testing.T) {
	n := withArgs(newNode(t, 1), []string{"--data-groups", "2"})
	n.start()
	n.waitLeader()
	n.stop()
	cmd := exec.Command(waggleBinary, "serve", "--node-id", "1", "--data-dir", n.dataDir,
		"--http-addr", n.httpAddr, "--kafka-addr", n.kafkaAddr, "--raft-addr", n.raftAddr, "--data-groups", "3")
	out, err := runWithTimeout(t, cmd, 30*time.Second)
	if err == nil || !strings.Contains(string(out), "created with 2 raft groups, not 3") {
		t.Fatalf("a node with another group count: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(n.dataDir, "groups", "1", "raft")); err != nil {
		t.Fatalf("data group 1 has no raft directory of its own: %v", err)
	}
}
