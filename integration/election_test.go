package integration

import (
	"cmp"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Regression: on a fresh 3-node cluster the first push through a follower
// right after the election answered 503 {"code":"no_leader", "error":
// "... leader 3 has not registered its address"}: the follower knew the
// leader but not yet its HTTP address, which the leader writes to the
// replicated registry some time after it wins. A cluster that has a leader
// must take writes through any node. The cluster is started a few times to
// make the race likely to show.
func TestFirstPushThroughFollowerRightAfterElection(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprint("round ", round), func(t *testing.T) {
			c := newCluster(t, 3)
			c.startNoWait()
			follower := c.firstFollowerToSeeALeader(20 * time.Second)
			var out []pushAnswer
			var e errorAnswer
			status := postJSON(t, follower.url("/api/v1/push"), map[string]any{"items": []pushItem{{Queue: "elect", TransactionID: "first", Payload: round}}}, &out)
			if status != http.StatusCreated {
				// Decode the refusal for the message.
				postJSON(t, follower.url("/api/v1/push"), map[string]any{"items": []pushItem{{Queue: "elect", TransactionID: "first", Payload: round}}}, &e)
				t.Fatalf("first push through follower %d right after the election: status %d, want 201 (a retry said %q %q)", follower.id, status, e.Code, e.Error)
			}
			if len(out) != 1 || out[0].Status == "error" {
				t.Fatalf("first push through follower %d: %+v", follower.id, out)
			}
		})
	}
}

// startNoWait starts every node with the same --peers list and returns at
// once, without waiting for an election or registrations.
func (c *cluster) startNoWait() {
	var peers []string
	for _, n := range c.nodes {
		peers = append(peers, fmt.Sprintf("%d=%s", n.id, cmp.Or(n.raftAdvertise, n.raftAddr)))
	}
	for _, n := range c.nodes {
		n.args = append([]string{"--peers", strings.Join(peers, ",")}, n.ownArgs...)
		n.start()
	}
}

// firstFollowerToSeeALeader polls every node's /health as tightly as it
// can and returns the first follower that names a leader.
func (c *cluster) firstFollowerToSeeALeader(timeout time.Duration) *node {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, n := range c.nodes {
			var h healthAnswer
			getJSON(c.t, n.url("/health"), &h)
			if h.Raft.Role == "follower" && h.Raft.Leader != nil {
				return n
			}
		}
	}
	c.t.Fatalf("no follower named a leader within %v", timeout)
	return nil
}
