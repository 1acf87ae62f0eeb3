package integration

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// `waggle push` through a follower right after the leader is killed: the
// node answers 503 no_leader (or outcome_unknown) while the election runs,
// the CLI retries with the transaction ids it minted before the first
// try, and every message is stored once. (Before, the push failed for
// about 1.3 s with no_leader and gave up.)
func TestCLIPushRetriesAcrossALeaderChange(t *testing.T) {
	c := startCluster(t, 3)
	follower := c.followers()[0]
	c.leader().kill9()
	// Without retries the push fails while the election runs (about a
	// second): this is what the retries are for.
	if out, err := runWithTimeout(t, exec.Command(waggleBinary, "push", "cli-q", `"early"`,
		"--server", follower.httpAddr, "--retry-timeout", "0"), time.Minute); err == nil || !strings.Contains(string(out), "HTTP 503") {
		t.Fatalf("a push with no retries right after the kill: %v\n%s; want HTTP 503", err, out)
	}
	push := exec.Command(waggleBinary, "push", "cli-q", `"one"`, `"two"`, `"three"`,
		"--server", follower.httpAddr, "--retry-timeout", "30s", "-o", "json")
	var stderr strings.Builder
	push.Stderr = &stderr // "created queue cli-q" goes there, the JSON answer to stdout
	out, err := push.Output()
	if err != nil {
		t.Fatalf("push during the election: %v\n%s\n%s", err, out, stderr.String())
	}
	var answers []struct {
		Status        string `json:"status"`
		TransactionID string `json:"transaction_id"`
	}
	if err := json.Unmarshal(out, &answers); err != nil || len(answers) != 3 {
		t.Fatalf("push answer: %v\n%s", err, out)
	}
	for _, a := range answers {
		if (a.Status != "queued" && a.Status != "duplicate") || len(a.TransactionID) != 36 {
			t.Fatalf("push answered %+v: want queued (or duplicate, for a retry of a stored one) with a minted id", a)
		}
	}
	count := map[string]int{}
	for _, r := range c.leader().fetchAll("cli-q", "").Entries[0].Records {
		count[string(r.Payload)]++
	}
	for _, m := range []string{`"one"`, `"two"`, `"three"`} {
		if count[m] != 1 {
			t.Fatalf("message %s stored %d times, want once (stored: %v)", m, count[m], count)
		}
	}
}

// `waggle cluster status` right after a kill -9 of the leader says the dead
// node is unreachable (with the error) instead of showing it as leader,
// and gives each live member's role, term, applied index and lag.
func TestCLIClusterStatusShowsAnUnreachableNode(t *testing.T) {
	c := startCluster(t, 3)
	victim := c.leader()
	victim.kill9()
	follower := c.followers()[0]
	type member struct {
		ID      int     `json:"id"`
		State   string  `json:"state"`
		Error   string  `json:"error"`
		Leader  bool    `json:"leader"`
		Role    string  `json:"role"`
		Term    *uint64 `json:"term"`
		Applied *uint64 `json:"applied"`
		Lag     *uint64 `json:"lag"`
		Version string  `json:"version"`
	}
	status := func() []member {
		out, err := runWithTimeout(t, exec.Command(waggleBinary, "cluster", "status", "--server", follower.httpAddr, "-o", "json"), time.Minute)
		if err != nil {
			t.Fatalf("cluster status: %v\n%s", err, out)
		}
		var cl struct{ Members []member }
		if err := json.Unmarshal(out, &cl); err != nil {
			t.Fatalf("cluster status -o json: %v\n%s", err, out)
		}
		return cl.Members
	}
	for _, m := range status() {
		if m.ID == victim.id && (m.State != "unreachable" || m.Error == "" || m.Leader) {
			t.Fatalf("the killed node is shown as %+v: want unreachable, with the error, not leader", m)
		}
	}
	waitFor(t, 30*time.Second, func() error {
		for _, m := range status() {
			if m.ID == victim.id {
				continue
			}
			if m.State != "up" || m.Term == nil || m.Applied == nil || m.Lag == nil || !strings.HasPrefix(m.Version, "dev") {
				return fmt.Errorf("live member shown as %+v", m)
			}
			if m.Role == "leader" && *m.Lag != 0 {
				return fmt.Errorf("the leader lags itself: %+v", m)
			}
		}
		return nil
	})
}
