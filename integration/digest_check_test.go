package integration

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The replica comparison itself: it must report a disagreement at a shared
// index, and count only indexes every node reports in one chain.
func TestCompareDigests(t *testing.T) {
	at := func(since uint64, applied digestPoint, recent ...digestPoint) digestAnswer {
		return digestAnswer{Since: since, Applied: applied, Recent: recent}
	}
	p := func(index uint64, digest string) digestPoint { return digestPoint{index, digest} }
	agree := map[int]map[uint32]digestAnswer{
		1: {0: at(0, p(700, "c"), p(256, "a"), p(512, "b"))},
		2: {0: at(0, p(600, "x"), p(512, "b"))},
		3: {0: at(0, p(512, "b"))},
	}
	if shared, err := compareDigests(agree); err != nil || shared[0] != 1 {
		t.Fatalf("agreeing replicas: shared %v, err %v; want one index all report", shared, err)
	}
	diverged := map[int]map[uint32]digestAnswer{
		1: {0: at(0, p(700, "c"), p(512, "b")), 5: at(0, p(40, "m"))},
		2: {0: at(0, p(700, "c"), p(512, "b")), 5: at(0, p(40, "n"))},
	}
	var d errDiverged
	if _, err := compareDigests(diverged); !errors.As(err, &d) {
		t.Fatalf("replicas that differ in group 5 at index 40: err %v", err)
	}
	otherChains := map[int]map[uint32]digestAnswer{
		1: {0: at(0, p(700, "c"))},
		2: {0: at(650, p(700, "d"))}, // upgraded at 650: another chain
	}
	if shared, err := compareDigests(otherChains); err != nil || shared[0] != 0 {
		t.Fatalf("different chains: shared %v, err %v; want nothing compared", shared, err)
	}
}

// A replica that skips one entry in a hundred (a build broken on purpose,
// WAGGLE_FAULT=fsm-skip-entry) is found by its digest, though every
// client answer came from a whole replica.
func TestReplicaThatSkipsEntriesIsFound(t *testing.T) {
	c := newCluster(t, 3)
	bad := c.nodes[2]
	bad.binary, bad.extraEnv = buildFaulty(t), []string{"WAGGLE_FAULT=fsm-skip-entry"}
	c.start("--replica-watch-interval", "500ms")
	l := c.leader()
	// Before the broken node skips anything, cluster status finds the
	// members the same; after, it names the broken one and exits 5.
	status := func(want string, code int) error {
		_, err := runCLI(t, want, code, "cluster", "status", "--server", l.httpAddr)
		return err
	}
	waitFor(t, 20*time.Second, func() error { return status("replicas of raft group 0: the same state at index", 0) })
	for i := range 300 {
		if status := postJSON(t, l.url("/api/v1/push"), map[string]any{"items": []pushItem{{Queue: "d", Partition: fmt.Sprint("p", i%5), TransactionID: fmt.Sprint("t", i), Payload: i}}}, nil); status != http.StatusCreated {
			t.Fatalf("push %d: status %d", i, status)
		}
	}
	var found errDiverged
	waitFor(t, 30*time.Second, func() error {
		_, err := c.digestsShared()
		if errors.As(err, &found) {
			return nil
		}
		return fmt.Errorf("no divergence found yet: %v", err)
	}, c.diagnose)
	if !strings.Contains(string(found), fmt.Sprintf("node %d", bad.id)) {
		t.Fatalf("the divergence found does not name the broken node %d: %s", bad.id, found)
	}
	t.Logf("found: %s", found)
	waitFor(t, 20*time.Second, func() error {
		return status("DIVERGED at index ", 5)
	})
	out, _ := runWithTimeout(t, exec.Command(waggleBinary, "cluster", "status", "--server", l.httpAddr), 30*time.Second)
	named := regexp.MustCompile(`nodes (\d+) and (\d+) hold different states`).FindStringSubmatch(string(out))
	if named == nil || !slices.Contains(named[1:], fmt.Sprint(bad.id)) {
		t.Fatalf("cluster status does not name node %d:\n%s", bad.id, out)
	}
	// The leader found it on its own too: its metric and its log say so.
	waitFor(t, 20*time.Second, func() error {
		l := c.leader()
		if m := metricsText(t, l); !strings.Contains(m, "waggle_replicas_diverged 1") {
			return fmt.Errorf("leader %d: waggle_replicas_diverged is not 1", l.id)
		}
		if log, _ := os.ReadFile(l.logPath); !strings.Contains(string(log), "replicas hold different states") {
			return fmt.Errorf("leader %d has not logged the divergence", l.id)
		}
		return nil
	})
}

// A follower that installs a snapshot and loses KV rows on the way (a
// build broken on purpose: WAGGLE_FAULT=restore-drop-kv drops one row in
// ten) keeps the state digest, which the snapshot carries. Only the state
// check, which hashes what each node holds, finds it.
func TestStateCheckFindsARestoreThatLostRows(t *testing.T) {
	c := newCluster(t, 3)
	bad := c.nodes[2]
	bad.binary, bad.extraEnv = buildFaulty(t), []string{"WAGGLE_FAULT=restore-drop-kv"}
	c.start("--raft-trailing-logs", "2")
	c.leader()
	check := func(want string, code int) error {
		out, err := runCLI(t, want, code, "cluster", "check", "--server", c.nodes[0].httpAddr, "--timeout", "2m")
		if err == nil {
			t.Logf("cluster check: %s", strings.TrimSpace(string(out)))
		}
		return err
	}
	// Node 1 asks the members it knows the addresses of: all of them once
	// it has applied every registration.
	waitFor(t, 30*time.Second, func() error { return check("the same state on nodes 1, 2, 3", 0) })

	bad.kill9()
	l := c.leader()
	for i := range 200 { // one entry each: more than the log keeps
		op := map[string]any{"op": "put", "ns": "rows", "key": fmt.Sprint("k", i), "value": i, "forever": true}
		if status := postJSON(t, l.url("/api/v1/kv"), map[string]any{"operations": []any{op}}, nil); status != http.StatusOK {
			t.Fatalf("KV write %d: status %d", i, status)
		}
	}
	c.snapshotAll() // the log the broken node missed is gone: it needs a snapshot
	c.rejoinThroughSnapshot(bad)
	var missing int
	for i := range 200 {
		if getJSON(t, bad.url(fmt.Sprintf("/api/v1/kv/rows/k%d", i)), nil) == http.StatusNotFound {
			missing++
		}
	}
	if missing == 0 {
		t.Fatal("the broken node holds every row: the fault did not fire")
	}
	if _, err := c.digestsShared(); err != nil {
		t.Fatalf("the digests disagree (this test needs damage they cannot see): %v", err)
	}
	t.Logf("node %d lacks %d of 200 KV rows; the state digests still agree", bad.id, missing)

	found := c.checkStates(l)
	if len(found) != 1 || found[0].State != "diverged" || !slices.Contains(found[0].Members, bad.id) {
		t.Fatalf("the state check does not name node %d: %+v", bad.id, found)
	}
	if err := check("DIVERGED", 5); err != nil {
		t.Fatal(err)
	}
}

// runCLI runs waggle with args and answers an error unless it exits with
// code and prints want.
func runCLI(t *testing.T, want string, code int, args ...string) ([]byte, error) {
	out, err := runWithTimeout(t, exec.Command(waggleBinary, args...), 3*time.Minute)
	got := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		got = exit.ExitCode()
	}
	if !strings.Contains(string(out), want) || got != code {
		return out, fmt.Errorf("waggle %s exited %d (want %d) without %q:\n%s", strings.Join(args[:2], " "), got, code, want, out)
	}
	return out, nil
}
