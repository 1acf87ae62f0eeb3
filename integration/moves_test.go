package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// groupReplicas is one data group in GET /api/v1/cluster/groups.
type groupReplicas struct {
	Group    uint32 `json:"group"`
	Replicas []int  `json:"replicas"`
	Leader   *int   `json:"leader"`
	Members  []int  `json:"members"`
	Moving   bool   `json:"moving"`
}

// groupsOf is every data group's replicas as node n reports them.
func (s *scaleOut) groupsOf(t testing.TB, n *node) (map[uint32]groupReplicas, error) {
	var ans struct {
		Groups []groupReplicas `json:"groups"`
	}
	if status := getJSON(t, n.url("/api/v1/cluster/groups"), &ans); status != http.StatusOK {
		return nil, fmt.Errorf("node %d: cluster groups: status %d", n.id, status)
	}
	out := map[uint32]groupReplicas{}
	for _, g := range ans.Groups {
		out[g.Group] = g
	}
	return out, nil
}

// waitMoved waits until data group g's members are exactly want (the
// replicas group 0 records for it), led by want[0], as every live node
// reports it, and each live node has the group's directory exactly when
// it replicates it.
func (s *scaleOut) waitMoved(t testing.TB, g uint32, want []int) {
	t.Helper()
	waitFor(t, 90*time.Second, func() error {
		for _, n := range s.live() {
			groups, err := s.groupsOf(t, n)
			if err != nil {
				return err
			}
			got := groups[g]
			if !slices.Equal(got.Replicas, want) || got.Moving || got.Leader == nil || *got.Leader != want[0] ||
				!slices.Equal(slices.Sorted(slices.Values(got.Members)), slices.Sorted(slices.Values(want))) {
				return fmt.Errorf("node %d: group %d is %+v, want replicas and members %v led by %d", n.id, g, got, want, want[0])
			}
			_, err = os.Stat(groupDir(n, int(g)))
			if has := err == nil; has != slices.Contains(want, n.id) {
				return fmt.Errorf("node %d has group %d's directory: %v", n.id, g, has)
			}
		}
		return nil
	})
}

// A data group's replicas move while clients write to it: group 1's
// replica on node 1 (its leader) moves to node 4, then node 2 is
// decommissioned, which moves each of its replicas to the node with the
// fewest, and is removed, and node 7 joins and gets 3 replicas by a
// rebalance. Throughout, a franz-go producer writes to a
// topic of group 1 through every broker, and HTTP pushes retried after
// each move answer duplicate with their first id and offset. At the end
// every acknowledged record is read back once, and node 2 holds no group.
func TestReplicaMovesWhileClientsWrite(t *testing.T) {
	s := startScaleOut(t, 6, 7, 3)
	s.waitPlaced(t, func(g uint32) int { return s.replicas(g)[0] })

	q, topic := s.nameIn(t, "mv-q", 1), s.nameIn(t, "mv-t", 1)
	first := map[string]pushAnswer{}
	for i := range 20 {
		tx := fmt.Sprintf("mv-%d", i)
		a := s.nodes[5].push(pushItem{Queue: q, TransactionID: tx, Payload: map[string]any{"i": i}})[0]
		requireStatus(t, a, "queued", uint64(i))
		first[tx] = a
	}
	requireDuplicates := func(via *node) {
		t.Helper()
		for tx, a := range first {
			again := via.push(pushItem{Queue: q, TransactionID: tx, Payload: map[string]any{"again": true}})[0]
			if again.Status != "duplicate" || *again.MessageID != *a.MessageID || *again.Offset != *a.Offset {
				t.Fatalf("retry of %s through node %d: %+v, want duplicate of %+v", tx, via.id, again, a)
			}
		}
	}

	cl := kafkaClient(t, s.kafkaAddrs(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgoLogger(t, "mover"))
	createTopic(t, cl, topic, 2, nil)
	var (
		mu    sync.Mutex
		acked []string
		stop  = make(chan struct{})
		done  = make(chan error, 1)
	)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			v := "r" + strconv.Itoa(i)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(v)}).FirstErr()
			cancel()
			if err != nil {
				done <- fmt.Errorf("record %s: %w", v, err)
				return
			}
			mu.Lock()
			acked = append(acked, v)
			mu.Unlock()
		}
	}()
	ackedNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	waitFor(t, 20*time.Second, func() error {
		if n := ackedNow(); n < 50 {
			return fmt.Errorf("%d records acknowledged before the move", n)
		}
		return nil
	})

	// Move group 1's replica on node 1, its leader, to node 4.
	before := ackedNow()
	moveStart := time.Now()
	if out, err := exec.Command(waggleBinary, "cluster", "move", "1", "4,2,3", "--server", s.nodes[2].url("")).CombinedOutput(); err != nil {
		t.Fatalf("waggle cluster move 1 4,2,3: %v\n%s", err, out)
	}
	s.waitMoved(t, 1, []int{4, 2, 3})
	out, err := exec.Command(waggleBinary, "cluster", "groups", "--server", s.nodes[0].url("")).CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^1\s+4,2,3\s+4\s+\S+\s+no$`).Match(out) {
		t.Fatalf("waggle cluster groups after the move (%v):\n%s", err, out)
	}
	t.Logf("group 1 moved from node 1 to node 4 in %v; %d records acknowledged meanwhile", time.Since(moveStart).Round(time.Millisecond), ackedNow()-before)
	requireDuplicates(s.nodes[0]) // node 1 relays now

	// Bad moves are refused.
	for body, want := range map[string]int{
		`{"replicas":[4,4,3]}`: http.StatusBadRequest, // a node twice
		`{"replicas":[9,2,3]}`: http.StatusBadRequest, // not a member
		`{"replicas":[]}`:      http.StatusBadRequest,
	} {
		if status := do(t, http.MethodPut, s.nodes[0].url("/api/v1/cluster/groups/1/replicas"), []byte(body), nil); status != want {
			t.Fatalf("move %s: status %d, want %d", body, status, want)
		}
	}
	if status := do(t, http.MethodPut, s.nodes[0].url("/api/v1/cluster/groups/7/replicas"), []byte(`{"replicas":[1,2,3]}`), nil); status != http.StatusNotFound {
		t.Fatalf("move of group 7, which does not exist: status %d, want 404", status)
	}

	// Decommission node 2: every group it replicates moves away.
	var plan struct {
		Groups []groupReplicas `json:"groups"`
	}
	if status := postJSON(t, s.nodes[4].url("/api/v1/cluster/decommission"), map[string]any{"node": 2}, &plan); status != http.StatusOK || len(plan.Groups) == 0 {
		t.Fatalf("decommission node 2: status %d, plan %+v", status, plan)
	}
	for _, g := range plan.Groups {
		if slices.Contains(g.Replicas, 2) {
			t.Fatalf("the plan keeps node 2 in group %d: %v", g.Group, g.Replicas)
		}
		s.waitMoved(t, g.Group, g.Replicas)
	}
	s.removeNode(2)
	s.nodes[1].stop()
	requireDuplicates(s.nodes[5])

	// A new node joins (given the peers the cluster was made with, which
	// place the groups) and a rebalance gives it its share: 18 replicas
	// on 6 voters, 3 each.
	added := newNode(t, 7)
	added.args = append([]string{"--join"}, s.nodes[0].args...)
	added.start()
	s.addVoter(added)
	s.nodes = append(s.nodes, added)
	out, err = exec.Command(waggleBinary, "cluster", "rebalance", "--server", s.nodes[3].url(""), "-o", "json").CombinedOutput()
	var rebalanced struct {
		Groups []groupReplicas `json:"groups"`
	}
	if err != nil || json.Unmarshal(out, &rebalanced) != nil || len(rebalanced.Groups) != 3 {
		t.Fatalf("waggle cluster rebalance (%v), want 3 groups moved to node 7:\n%s", err, out)
	}
	for _, g := range rebalanced.Groups {
		if !slices.Contains(g.Replicas, 7) {
			t.Fatalf("the rebalance moves group %d to %v, without node 7", g.Group, g.Replicas)
		}
		s.waitMoved(t, g.Group, g.Replicas)
	}
	requireDuplicates(added)

	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("the producer failed during the moves: %v", err)
	}
	got := consumeN(t, []string{s.nodes[0].kafkaAddr, s.nodes[5].kafkaAddr}, topic, len(acked))
	seen := map[string]int{}
	for _, r := range got {
		seen[string(r.Value)]++
	}
	for _, v := range acked {
		if seen[v] != 1 {
			t.Fatalf("record %s, acknowledged, read %d times", v, seen[v])
		}
	}
	t.Logf("%d records produced across the moves, each read once", len(acked))
	if _, err := os.Stat(groupDir(s.nodes[1], 1)); err == nil {
		t.Fatalf("node 2 still has group 1's directory after its decommission")
	}
}
