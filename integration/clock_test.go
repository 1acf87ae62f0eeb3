package integration

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// nodeClock is what a node's /health says of clocks: the replicated
// clock it last applied, and its own wall clock beside the voters'.
type nodeClock struct {
	Raft struct {
		ClockMs int64 `json:"clockMs"`
	} `json:"raft"`
	Clock *struct {
		OffsetMs int64 `json:"offsetMs"`
		Peers    int   `json:"peers"`
	} `json:"clock"`
	Groups []struct {
		Role string `json:"role"`
	} `json:"groups"`
}

func clockOf(t testing.TB, n *node) nodeClock {
	t.Helper()
	var h nodeClock
	getJSON(t, n.url("/health"), &h)
	return h
}

// watchReplicatedClock samples every live node's replicated clock for d
// and fails the test when one is more than 3 s behind the test's own
// clock or more than 1 s ahead of it (the leader stamps about every
// second), or moves backwards on a node; it returns how far node n's
// clock moved.
func watchReplicatedClock(t *testing.T, c *cluster, d time.Duration, what string, n *node) time.Duration {
	t.Helper()
	last := map[int]int64{}
	first := clockOf(t, n).Raft.ClockMs
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		for _, m := range c.live() {
			ms := clockOf(t, m).Raft.ClockMs
			off := time.UnixMilli(ms).Sub(time.Now())
			if off > time.Second || off < -3*time.Second {
				t.Fatalf("%s: node %d's replicated clock is %v off real time", what, m.id, off.Round(time.Millisecond))
			}
			if ms < last[m.id] {
				t.Fatalf("%s: node %d's replicated clock went back %d ms", what, m.id, last[m.id]-ms)
			}
			last[m.id] = ms
		}
	}
	return time.Duration(clockOf(t, n).Raft.ClockMs-first) * time.Millisecond
}

// TestSkewedLeaderClockEndsNothingEarly makes a node whose wall clock is
// 10 minutes ahead the leader of every raft group, steps that running
// leader's clock 10 minutes back and ahead again, and takes one of its
// two peers away. The replicated clock must follow real time throughout
// (the leader stamps the lower median of the voters' clocks), so a
// 5-minute dedup window, timer, key lifetime and lease all still hold.
// Without the median, the first stamp of the skewed leader moves the
// never-backwards replicated clock 10 minutes on for good.
func TestSkewedLeaderClockEndsNothingEarly(t *testing.T) {
	binary := buildFaulty(t)
	offsetFile := filepath.Join(t.TempDir(), "clock-offset")
	setOffset := func(d string) {
		if err := os.WriteFile(offsetFile, []byte(d), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setOffset("0s")
	c := newCluster(t, 3)
	for _, n := range c.nodes {
		n.binary = binary
	}
	skewed := c.nodes[2]
	skewed.extraEnv = []string{"WAGGLE_CLOCK_OFFSET_FILE=" + offsetFile}
	c.start("--data-groups", "2")
	l := c.leader()
	waitLogFormat(t, l, 2) // leader preferences are format 2 entries

	// Five minutes of everything that ends by the replicated clock.
	const five = 300
	if status := postJSON(t, l.url("/api/v1/configure"), map[string]any{"queue": "clk", "options": map[string]any{"dedupWindowSeconds": five}}, nil); status != http.StatusOK {
		t.Fatalf("configure: %d", status)
	}
	requireStatus(t, c.pushUntilAccepted(10*time.Second, pushItem{Queue: "clk", TransactionID: "once-1", Payload: 1})[0], "queued", 0)
	postJSON(t, l.url("/api/v1/timers"), map[string]any{"operations": []map[string]any{{"op": "schedule", "queue": "clk-timers", "timerKey": "t1",
		"delayMs": five * 1000, "txn": "fire-t1", "payload": base64.StdEncoding.EncodeToString([]byte(`{}`))}}}, nil)
	postJSON(t, l.url("/api/v1/kv"), map[string]any{"operations": []map[string]any{{"op": "put", "ns": "clk", "key": "k", "value": 1, "ttlSeconds": five}}}, nil)
	status, popped := l.pop(t, "clk", map[string]string{"consumerGroup": "g", "leaseSeconds": fmt.Sprint(five)})
	if status != http.StatusOK || len(popped.Messages) != 1 {
		t.Fatalf("pop: %d %+v", status, popped)
	}

	setOffset("10m")
	waitFor(t, 15*time.Second, func() error {
		h := clockOf(t, skewed)
		if h.Clock == nil || h.Clock.Peers != 2 || h.Clock.OffsetMs < 9*60*1000 {
			return fmt.Errorf("node 3's /health clock: %+v", h.Clock)
		}
		return nil
	})
	// The operator sees it: the metric, and node 3's CLOCK in cluster status.
	m := regexp.MustCompile(`\nwaggle_clock_offset_seconds (\S+)\n`).FindStringSubmatch(metricsText(t, skewed))
	if m == nil {
		t.Fatal("node 3 has no waggle_clock_offset_seconds")
	}
	if secs, err := strconv.ParseFloat(m[1], 64); err != nil || secs < 9*60 {
		t.Fatalf("node 3's waggle_clock_offset_seconds is %s", m[1])
	}
	// Asked of node 3 itself (its own row) and of a peer (from its /health).
	for _, via := range []*node{skewed, c.nodes[0]} {
		out, err := runWithTimeout(t, exec.Command(waggleBinary, "cluster", "status", "--server", via.httpAddr), 30*time.Second)
		if err != nil || !regexp.MustCompile(`(?m)^3 .* \+(599|600)\.\ds `).Match(out) {
			t.Fatalf("cluster status through node %d does not show node 3's clock 10 minutes ahead: %v\n%s", via.id, err, out)
		}
	}
	for _, g := range []string{"0", "1"} {
		var out map[string]any
		if status := do(t, http.MethodPut, l.url("/api/v1/cluster/groups/"+g+"/leader"), []byte(`{"node":3}`), &out); status != http.StatusOK {
			t.Fatalf("prefer node 3 for group %s: %d %v", g, status, out)
		}
	}
	waitFor(t, 30*time.Second, func() error {
		h := clockOf(t, skewed)
		for i, g := range h.Groups {
			if g.Role != "leader" {
				return fmt.Errorf("node 3 is %s of group %d", g.Role, i)
			}
		}
		if len(h.Groups) != 2 {
			return fmt.Errorf("node 3 lists %d groups", len(h.Groups))
		}
		return nil
	})

	watchReplicatedClock(t, c, 3*time.Second, "leader 10 min ahead", skewed)
	setOffset("-10m")
	if moved := watchReplicatedClock(t, c, 3*time.Second, "running leader stepped 10 min back", skewed); moved < 2*time.Second {
		t.Fatalf("the replicated clock moved %v in 3 s while the leader's clock was behind", moved)
	}
	setOffset("10m")
	watchReplicatedClock(t, c, 3*time.Second, "running leader stepped 10 min ahead", skewed)
	c.nodes[0].kill9() // one peer left: the earlier of its clock and the leader's
	watchReplicatedClock(t, c, 12*time.Second, "leader 10 min ahead with one peer", skewed)

	var retried []pushAnswer
	postJSON(t, skewed.url("/api/v1/push"), map[string]any{"items": []pushItem{{Queue: "clk", TransactionID: "once-1", Payload: 1}}}, &retried)
	if len(retried) != 1 {
		t.Fatalf("retried push answered %+v", retried)
	}
	requireStatus(t, retried[0], "duplicate", 0)
	var timers struct{ Timers []map[string]any }
	getJSON(t, skewed.url("/api/v1/timers/clk-timers"), &timers)
	if len(timers.Timers) != 1 {
		t.Fatalf("the 5-minute timer is gone (fired early?): %+v", timers)
	}
	if status := getJSON(t, skewed.url("/api/v1/kv/clk/k"), nil); status != http.StatusOK {
		t.Fatalf("the 5-minute key answered %d (expired early?)", status)
	}
	if code, acks := skewed.ackAll(t, "g", popped.Messages, "completed"); code != http.StatusOK || len(acks) != 1 || !acks[0].Success {
		t.Fatalf("ack under the 5-minute lease: %d %+v (the lease ended early?)", code, acks)
	}
}
