package integration

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A leader cut off from both followers loses its majority: the other two
// elect a new leader and take writes, the old one stops accepting them,
// and after the partition heals it follows and holds every write.
func TestPartitionedLeaderIsReplacedAndCatchesUp(t *testing.T) {
	c, links := startPartitionableCluster(t, 3)
	old := c.leader()
	c.pushUntilAccepted(10*time.Second, pushItem{Queue: "part", TransactionID: "before", Payload: "x"})

	links.isolate(c, old.id)
	var newLeader *node
	waitFor(t, 15*time.Second, func() error {
		l, err := c.findLeader()
		if err != nil || l == old {
			return fmt.Errorf("no new leader yet (%v)", err)
		}
		newLeader = l
		return nil
	})
	for i := range 20 {
		var out []pushAnswer
		if status := postJSON(t, newLeader.url("/api/v1/push"), map[string]any{"items": []pushItem{{Queue: "part", TransactionID: fmt.Sprint("during-", i), Payload: "x"}}}, &out); status != http.StatusCreated {
			t.Fatalf("push to the majority's leader: status %d", status)
		}
	}
	// The isolated node steps down once its leader lease runs out and can
	// take no write: it has no leader to forward to.
	waitFor(t, 10*time.Second, func() error {
		var h healthAnswer
		getJSON(t, old.url("/health"), &h)
		if h.Raft.Role == "leader" {
			return fmt.Errorf("isolated node %d still leads", old.id)
		}
		return nil
	})
	if status := postJSON(t, old.url("/api/v1/push"), map[string]any{"items": []pushItem{{Queue: "part", TransactionID: "minority", Payload: "x"}}}, nil); status == http.StatusCreated {
		t.Fatalf("the isolated minority accepted a write")
	}

	links.heal()
	c.waitCaughtUp(old)
	got := idSet(old.fetchAll("part", "Default"))
	if len(got) != 21 || !got["before"] || !got["during-19"] || got["minority"] {
		t.Fatalf("after healing, node %d holds %d ids: %v", old.id, len(got), got)
	}
}

// Regression (found while writing the register checker): a follower whose
// forward to the leader broke off after the request was sent answered 503
// no_leader, "nothing was written", though the leader may have applied
// it. It must answer outcome_unknown; no_leader is kept for a forward
// that never connected.
func TestForwardBrokenOffAfterSendingAnswersOutcomeUnknown(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader()
	f := c.followers()[0]
	l.cmd.Process.Signal(syscall.SIGSTOP)
	answered := make(chan errorAnswer, 1)
	status := make(chan int, 1)
	go func() {
		var out errorAnswer
		status <- postJSON(t, f.url("/api/v1/kv"), map[string]any{"operations": []map[string]any{{"op": "incr", "ns": "fwd", "key": "n", "forever": true}}}, &out)
		answered <- out
	}()
	// The paused leader's kernel still accepts the connection; wait until
	// the forwarded request's bytes sit in its receive queue, then kill it.
	waitFor(t, 10*time.Second, func() error {
		if !receiveQueued(t, l.httpAddr) {
			return fmt.Errorf("the forwarded request has not reached node %d yet", l.id)
		}
		return nil
	})
	l.kill9()
	if got, out := <-status, <-answered; got != http.StatusServiceUnavailable || out.Code != "outcome_unknown" {
		t.Fatalf("forward broken off mid-request: status %d code %q, want 503 outcome_unknown", got, out.Code)
	}
}

// receiveQueued reports whether a TCP socket bound to addr holds unread
// bytes, from /proc/net/tcp (local address, then tx_queue:rx_queue).
func receiveQueued(t *testing.T, addr string) bool {
	_, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skip("no /proc/net/tcp here:", err)
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		fields := strings.Fields(line)
		if len(fields) < 5 || !strings.HasSuffix(fields[1], fmt.Sprintf(":%04X", p)) {
			continue
		}
		queues := strings.SplitN(fields[4], ":", 2)
		if len(queues) == 2 && strings.Trim(queues[1], "0") != "" {
			return true
		}
	}
	return false
}
