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
	"strings"
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
// replica on node 1 (its leader) moves to node 4, two of group 2's
// replicas move at once, then node 2 is
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

	p := startProducing(t, s.kafkaAddrs(), topic)
	p.waitAcked(t, 50)
	// kcat writes to another topic of group 1 through node 1, its leader.
	kcat, kt := requireKcat(t), s.nameIn(t, "mv-kcat", 1)
	createTopic(t, kafkaClient(t, s.kafkaAddrs()), kt, 1, nil)
	kcatProduce := func(via *node, lines string) {
		t.Helper()
		cmd := exec.Command(kcat, "-b", via.kafkaAddr, "-P", "-t", kt, "-p", "0")
		cmd.Stdin = strings.NewReader(lines)
		if out, err := runWithTimeout(t, cmd, 30*time.Second); err != nil {
			t.Fatalf("kcat -P through node %d: %v\n%s", via.id, err, out)
		}
	}
	kcatProduce(s.nodes[0], "before-1\nbefore-2\n")
	// Move group 1's replica on node 1, its leader, to node 4.
	before := p.acked()
	moveStart := time.Now()
	if out, err := exec.Command(waggleBinary, "cluster", "move", "1", "4,2,3", "--server", s.nodes[2].url("")).CombinedOutput(); err != nil {
		t.Fatalf("waggle cluster move 1 4,2,3: %v\n%s", err, out)
	}
	s.waitMoved(t, 1, []int{4, 2, 3})
	out, err := exec.Command(waggleBinary, "cluster", "groups", "--server", s.nodes[0].url("")).CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^1\s+4,2,3\s+4\s+\S+\s+no$`).Match(out) {
		t.Fatalf("waggle cluster groups after the move (%v):\n%s", err, out)
	}
	t.Logf("group 1 moved from node 1 to node 4 in %v; %d records acknowledged meanwhile", time.Since(moveStart).Round(time.Millisecond), p.acked()-before)
	requireDuplicates(s.nodes[0]) // node 1 relays now
	// kcat follows the partition's leader from node 1, which no longer
	// hosts it, to node 4, both ways.
	kcatProduce(s.nodes[0], "after-1\nafter-2\n")
	if out, err := runWithTimeout(t, exec.Command(kcat, "-b", s.nodes[0].kafkaAddr, "-C", "-t", kt, "-p", "0", "-o", "beginning", "-e", "-q"), 30*time.Second); err != nil ||
		string(out) != "before-1\nbefore-2\nafter-1\nafter-2\n" {
		t.Fatalf("kcat -C through node 1 after the move (%v):\n%s", err, out)
	}
	// The dashboard shows the group's new replicas, led by node 4.
	waitFor(t, 30*time.Second, func() error {
		page, err := renderPage(t, s.nodes[0].url("/"))
		if err != nil {
			return err
		}
		if row := rowOf(page, `data-raft-group="1"`); !strings.Contains(row, `data-leader="4"`) || !strings.Contains(row, `data-moving="false"`) || !strings.Contains(row, "<td>4, 2, 3</td>") {
			return fmt.Errorf("the dashboard's row of group 1: %q", row)
		}
		return nil
	})

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

	// Two replicas at once: group 2 from nodes 2, 3, 4 to 5, 6, 4 (one
	// catches up while the other waits).
	if status := do(t, http.MethodPut, s.nodes[1].url("/api/v1/cluster/groups/2/replicas"), []byte(`{"replicas":[5,6,4]}`), nil); status != http.StatusOK {
		t.Fatalf("move group 2 to nodes 5, 6, 4: status %d", status)
	}
	s.waitMoved(t, 2, []int{5, 6, 4})

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

	p.stopAndReadBack(t, []string{s.nodes[0].kafkaAddr, s.nodes[5].kafkaAddr})
	if _, err := os.Stat(groupDir(s.nodes[1], 1)); err == nil {
		t.Fatalf("node 2 still has group 1's directory after its decommission")
	}
}

// producing is a franz-go producer writing to a topic's two partitions,
// one record at a time, until stopped; it keeps what was acknowledged.
type producing struct {
	mu    sync.Mutex
	done  []string
	stop  chan struct{}
	ended chan error
	topic string
}

func startProducing(t *testing.T, brokers []string, topic string) *producing {
	cl := kafkaClient(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgoLogger(t, "producing"))
	createTopic(t, cl, topic, 2, nil)
	p := &producing{stop: make(chan struct{}), ended: make(chan error, 1), topic: topic}
	go func() {
		for i := 0; ; i++ {
			select {
			case <-p.stop:
				p.ended <- nil
				return
			default:
			}
			v := "r" + strconv.Itoa(i)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(v)}).FirstErr()
			cancel()
			if err != nil {
				p.ended <- fmt.Errorf("record %s: %w", v, err)
				return
			}
			p.mu.Lock()
			p.done = append(p.done, v)
			p.mu.Unlock()
		}
	}()
	return p
}

// acked is how many records were acknowledged so far.
func (p *producing) acked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.done)
}

// waitAcked waits until n records were acknowledged.
func (p *producing) waitAcked(t *testing.T, n int) {
	t.Helper()
	waitFor(t, 30*time.Second, func() error {
		if got := p.acked(); got < n {
			return fmt.Errorf("%d records acknowledged, want %d", got, n)
		}
		return nil
	})
}

// stopAndReadBack stops the producer, fails the test if a record failed,
// and reads the topic back through brokers: every acknowledged record
// exactly once.
func (p *producing) stopAndReadBack(t *testing.T, brokers []string) {
	t.Helper()
	close(p.stop)
	if err := <-p.ended; err != nil {
		t.Fatalf("the producer failed: %v", err)
	}
	got := consumeN(t, brokers, p.topic, len(p.done))
	seen := map[string]int{}
	for _, r := range got {
		seen[string(r.Value)]++
	}
	for _, v := range p.done {
		if seen[v] != 1 {
			t.Fatalf("record %s, acknowledged, read %d times", v, seen[v])
		}
	}
	t.Logf("%d records produced, each read once", len(p.done))
}

// With --replace-dead-after, a node that stays down loses its replicas
// to the live nodes, while clients write: on 5 nodes, kill -9 of node 3
// moves each of its groups' replicas elsewhere within seconds, and the
// groups keep 3 voting replicas. When node 3 comes back it deletes the
// groups it no longer replicates, and a rebalance gives it its share.
func TestDeadNodesReplicasMove(t *testing.T) {
	s := startScaleOut(t, 5, 6, 3, "--replace-dead-after", "3s")
	s.waitPlaced(t, func(g uint32) int { return s.replicas(g)[0] })
	dead := s.nodes[2]
	var hit []uint32
	for g := uint32(1); g < 6; g++ {
		if slices.Contains(s.replicas(g), dead.id) {
			hit = append(hit, g)
		}
	}
	q, topic := s.nameIn(t, "dd-q", hit[0]), s.nameIn(t, "dd-t", hit[0])
	a := s.nodes[0].push(pushItem{Queue: q, TransactionID: "dd-1", Payload: "first"})[0]
	requireStatus(t, a, "queued", 0)
	p := startProducing(t, []string{s.nodes[0].kafkaAddr, s.nodes[4].kafkaAddr}, topic)
	p.waitAcked(t, 50)

	dead.kill9()
	killed := time.Now()
	for _, g := range hit {
		var moved []int
		waitFor(t, 90*time.Second, func() error {
			groups, err := s.groupsOf(t, s.nodes[0])
			if err != nil {
				return err
			}
			if r := groups[g].Replicas; slices.Contains(r, dead.id) || len(r) != 3 {
				return fmt.Errorf("group %d's replicas: %v", g, r)
			}
			moved = groups[g].Replicas
			return nil
		})
		s.waitMoved(t, g, moved)
	}
	t.Logf("groups %v moved off node %d %v after its kill -9", hit, dead.id, time.Since(killed).Round(100*time.Millisecond))
	again := s.nodes[1].push(pushItem{Queue: q, TransactionID: "dd-1", Payload: "again"})[0]
	if again.Status != "duplicate" || *again.MessageID != *a.MessageID || *again.Offset != *a.Offset {
		t.Fatalf("retry after the move: %+v, want duplicate of %+v", again, a)
	}

	// Node 3 returns: it drops what it no longer replicates, then a
	// rebalance gives it replicas again.
	dead.start()
	waitFor(t, 60*time.Second, func() error {
		for _, g := range hit {
			if _, err := os.Stat(groupDir(dead, int(g))); err == nil {
				return fmt.Errorf("node %d still has group %d's directory", dead.id, g)
			}
		}
		return nil
	})
	var rebalanced struct {
		Groups []groupReplicas `json:"groups"`
	}
	if status := postJSON(t, s.nodes[1].url("/api/v1/cluster/rebalance"), map[string]any{}, &rebalanced); status != http.StatusOK || len(rebalanced.Groups) == 0 {
		t.Fatalf("rebalance after node %d's return: status %d, %+v", dead.id, status, rebalanced)
	}
	for _, g := range rebalanced.Groups {
		s.waitMoved(t, g.Group, g.Replicas)
	}
	p.stopAndReadBack(t, []string{s.nodes[0].kafkaAddr, s.nodes[1].kafkaAddr})
}
