package integration

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waggle-mq/waggle/router"
)

// nameIn returns a name starting with prefix that placement puts in group g
// of groups.
func nameIn(t testing.TB, prefix string, g uint32, groups int) string {
	for i := range 1000 {
		if name := fmt.Sprintf("%s%d", prefix, i); router.Group(name, groups) == g {
			return name
		}
	}
	t.Fatalf("no name %s… in group %d", prefix, g)
	return ""
}

// With three raft groups, queues live in the group their name places them
// in, each group led by another node. Any node takes any request and
// forwards it to the leader of the queue's group; what a group minted
// (partition ids, leases) names its group. A transaction within a group
// commits; one across groups is refused and writes nothing. kill -9 of a
// group's leader loses nothing acknowledged in any group.
func TestDataGroupsPlaceQueuesAndRouteRequests(t *testing.T) {
	c := startCluster(t, 3, "--data-groups", "3")
	waitGroupLeaders(t, c.nodes, 3, preferred)
	queues := make([]string, 3)
	for g := range uint32(3) {
		queues[g] = nameIn(t, "orders-", g, 3)
	}
	// Every node pushes to every queue: two of three go through a forward.
	acked := map[string]map[string]bool{} // queue → transaction ids
	for _, q := range queues {
		acked[q] = map[string]bool{}
		for i, n := range c.nodes {
			id := fmt.Sprintf("%s-via-%d", q, i)
			requireStatus(t, n.push(pushItem{Queue: q, TransactionID: id, Payload: id})[0], "queued", uint64(i))
			acked[q][id] = true
		}
		// A retry through another node is a duplicate in the same group.
		requireStatus(t, c.nodes[2].push(pushItem{Queue: q, TransactionID: q + "-via-0", Payload: "again"})[0], "duplicate", 0)
	}
	for g, q := range queues {
		// A pop through node 1 is served by the group's leader; the lease
		// and partition ids name the group, and an ack through node 3 finds it.
		status, popped := c.nodes[0].pop(t, q, map[string]string{"consumerGroup": "billing", "batch": "10"})
		if status != http.StatusOK || len(popped.Messages) != 3 {
			t.Fatalf("pop of %s (group %d): status %d, %d messages", q, g, status, len(popped.Messages))
		}
		m := popped.Messages[0]
		pid, err := strconv.ParseUint(m.PartitionID, 10, 64)
		if err != nil || router.GroupOfID(pid) != uint32(g) {
			t.Fatalf("partition id %q of a queue in group %d", m.PartitionID, g)
		}
		if g > 0 && !strings.HasSuffix(m.LeaseID, fmt.Sprintf("@%d", g)) {
			t.Fatalf("lease %q of a queue in group %d", m.LeaseID, g)
		}
		code, results := c.nodes[2].ackAll(t, "billing", popped.Messages, "completed")
		if code != http.StatusOK {
			t.Fatalf("ack of %s through node 3: status %d", q, code)
		}
		requireAcked(t, results, 3)
	}
	// The consumer group's positions in all three groups are listed
	// together (read from the node's own copies, which follow the acks).
	waitFor(t, 10*time.Second, func() error {
		cur := groupCursors(t, c.nodes[1], "billing")
		for _, q := range queues {
			if cur[q+"/Default"] != 3 {
				return fmt.Errorf("billing has positions %v, want 3 in each of %v", cur, queues)
			}
		}
		return nil
	})

	// A group that read one queue only is deleted too: the raft groups
	// that never knew it are no reason to refuse.
	if status, popped := c.nodes[1].pop(t, queues[1], map[string]string{"consumerGroup": "audit", "batch": "1"}); status != http.StatusOK || len(popped.Messages) != 1 {
		t.Fatalf("audit's pop: status %d, %d messages", status, len(popped.Messages))
	}
	if status := do(t, http.MethodDelete, c.nodes[0].url("/api/v1/consumer-groups/audit"), nil, nil); status != http.StatusOK {
		t.Fatalf("delete audit, which has positions in one raft group: status %d", status)
	}
	if status := do(t, http.MethodDelete, c.nodes[0].url("/api/v1/consumer-groups/nobody"), nil, nil); status != http.StatusNotFound {
		t.Fatalf("delete a group no raft group knows: status %d, want 404", status)
	}
	// A queue's dead letters are listed from its group.
	for _, q := range queues {
		var dl struct{ Messages []any }
		if status := getJSON(t, c.nodes[2].url("/api/v1/dlq?queue="+q), &dl); status != http.StatusOK {
			t.Fatalf("dead letters of %s: status %d", q, status)
		}
	}

	// Deleting the consumer group through node 3 deletes its positions in
	// each group, wherever the group's leader is (a write forwarded to it).
	if status := do(t, http.MethodDelete, c.nodes[2].url("/api/v1/consumer-groups/billing"), nil, nil); status != http.StatusOK {
		t.Fatalf("delete billing: status %d", status)
	}
	for _, n := range c.nodes {
		var list struct {
			Groups []struct {
				Name string `json:"name"`
			} `json:"groups"`
		}
		waitFor(t, 10*time.Second, func() error {
			if status := getJSON(t, n.url("/api/v1/consumer-groups"), &list); status != http.StatusOK || len(list.Groups) != 0 {
				return fmt.Errorf("node %d lists groups %+v (status %d) after the delete", n.id, list.Groups, status)
			}
			return nil
		})
	}

	// One transaction within a group: "billing.in" and the KV namespace
	// "billing" share the key "billing".
	txn := map[string]any{
		"operations": []map[string]any{{"type": "push", "items": []pushItem{{Queue: "billing.in", TransactionID: "t-1", Payload: 1}}}},
		"kv":         []map[string]any{{"op": "put", "ns": "billing", "key": "last", "value": "t-1", "forever": true}},
	}
	var res struct {
		Success bool `json:"success"`
	}
	if status := postJSON(t, c.nodes[2].url("/api/v1/transaction"), txn, &res); status != http.StatusOK || !res.Success {
		t.Fatalf("a transaction within one group: status %d, %+v", status, res)
	}
	// Across groups: refused, nothing written.
	cross := map[string]any{"operations": []map[string]any{{"type": "push", "items": []pushItem{
		{Queue: queues[0], TransactionID: "cross-1", Payload: 1}, {Queue: queues[1], TransactionID: "cross-2", Payload: 2}}}}}
	var refusal struct {
		Code  string `json:"code"`
		Error string `json:"error"`
	}
	if status := postJSON(t, c.nodes[0].url("/api/v1/transaction"), cross, &refusal); status != http.StatusBadRequest || refusal.Code != "cross_group" {
		t.Fatalf("a transaction across groups: status %d, %+v", status, refusal)
	}
	t.Logf("refused: %s", refusal.Error)
	for _, q := range queues[:2] {
		if recs := c.nodes[1].fetchAll(q, "Default").Entries[0].Records; len(recs) != 3 {
			t.Fatalf("%s holds %d records after the refused transaction, want 3", q, len(recs))
		}
	}

	// kill -9 of node 2, group 1's leader: pushes to every queue go on
	// through the survivors, and every acknowledged one is stored once.
	c.nodes[1].kill9()
	start := time.Now()
	for round := range 5 {
		for _, q := range queues {
			id := fmt.Sprintf("%s-after-%d", q, round)
			c.pushUntilAccepted(30*time.Second, pushItem{Queue: q, TransactionID: id, Payload: id})
			acked[q][id] = true
		}
	}
	t.Logf("15 pushes to the three groups acknowledged %v after the kill", time.Since(start).Round(time.Millisecond))
	// Node 3 reads its own copies, which follow each group's leader.
	waitFor(t, 10*time.Second, func() error {
		for _, q := range queues {
			stored := map[string]bool{}
			for _, r := range c.nodes[2].fetchAll(q, "Default").Entries[0].Records {
				if stored[r.TransactionID] {
					t.Fatalf("%s stored %s twice", q, r.TransactionID)
				}
				stored[r.TransactionID] = true
			}
			for id := range acked[q] {
				if !stored[id] {
					return fmt.Errorf("%s does not hold acknowledged %s", q, id)
				}
			}
			if len(stored) != len(acked[q]) {
				t.Fatalf("%s stores %d ids, %d acknowledged", q, len(stored), len(acked[q]))
			}
		}
		return nil
	})
}

// A node running three raft groups is backed up with one file per group
// (a backup without ?group= is refused, never partial) and restored into
// a new data directory: every group's queue is there, and the restored
// node places and serves them as before.
func TestDataGroupsBackupAndRestore(t *testing.T) {
	n := withArgs(newNode(t, 1), []string{"--data-groups", "3"})
	n.start()
	n.waitLeader()
	queues := make([]string, 3)
	for g := range uint32(3) {
		queues[g] = nameIn(t, "kept-", g, 3)
		var items []pushItem
		for i := range 20 {
			items = append(items, pushItem{Queue: queues[g], TransactionID: fmt.Sprintf("%s-%d", queues[g], i), Payload: i})
		}
		waitFor(t, 20*time.Second, func() error {
			var out []pushAnswer
			if status := postJSON(t, n.url("/api/v1/push"), map[string]any{"items": items}, &out); status != http.StatusCreated {
				return fmt.Errorf("push to %s: status %d", queues[g], status)
			}
			return nil
		})
	}
	var refusal struct{ Code string }
	if status := getJSON(t, n.url("/api/v1/cluster/backup"), &refusal); status != http.StatusConflict || refusal.Code != "several_groups" {
		t.Fatalf("a backup without ?group=: status %d %+v, want 409 several_groups", status, refusal)
	}

	file := filepath.Join(t.TempDir(), "b.bak")
	out, err := runWithTimeout(t, exec.Command(waggleBinary, "backup", "--server", n.httpAddr, "--out", file), 60*time.Second)
	if err != nil || !strings.Contains(string(out), "3 raft groups backed up") {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	for g := 1; g < 3; g++ {
		if _, err := os.Stat(fmt.Sprintf("%s.group%d-of-3", file, g)); err != nil {
			t.Fatalf("no file for group %d: %v", g, err)
		}
	}
	n.stop()

	restored := withArgs(newNode(t, 1), []string{"--data-groups", "3"})
	out, err = runWithTimeout(t, exec.Command(waggleBinary, "restore", "--in", file, "--data-dir", restored.dataDir,
		"--node-id", "1", "--raft-addr", restored.raftAddr), 60*time.Second)
	if err != nil || !strings.Contains(string(out), "--data-groups 3") {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	restored.start()
	restored.waitLeader()
	for _, q := range queues {
		waitFor(t, 20*time.Second, func() error {
			if recs := restored.fetchAll(q, "Default").Entries[0].Records; len(recs) != 20 {
				return fmt.Errorf("%s holds %d records after the restore, want 20", q, len(recs))
			}
			return nil
		})
		// A retry of a stored push is still a duplicate: its dedup record came back too.
		requireStatus(t, restored.push(pushItem{Queue: q, TransactionID: q + "-7", Payload: "again"})[0], "duplicate", 7)
	}
}
