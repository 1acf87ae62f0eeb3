package integration

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// TestChaosOnFiveNodes runs the chaos workload and every checker of
// TestChaos on five nodes (issue 33) under the partitions Jepsen uses and
// membership changes during faults: the leader in a minority of two, a
// ring, a bridge, kill -9 of the leader and a follower together, SIGSTOP of
// the leader, and replacing a partitioned follower and the leader (removed
// from the cluster, killed, wiped, started again with --join, added back as
// a voter and caught up). Every fault is healed, and the cluster is back to
// five voters, before the next.
//
// The default (60 s of faults, each fault at least once) is the CI run;
// WAGGLE_CHAOS_SECONDS=600 is a long one. WAGGLE_CHAOS_SEED repeats the
// nemesis' choices (which follower, which ring order; the timing differs).
func TestChaosOnFiveNodes(t *testing.T) {
	rng := nemesisRand(t)
	runChaosOn(t, chaosRun{
		nodes:   5,
		seconds: 60,
		prepare: logsOutsideDataDirs(t),
		nemesis: func(c *cluster, links *links, pushed *atomic.Int64) []chaosFault {
			return fiveNodeFaults(t, rng, c, links, pushed)
		},
		// Generous for a busy 2-core machine: a majority is always left
		// connected and alive, so writes stall only for an election or two.
		maxUnavailable: 30 * time.Second,
	})
}

// logsOutsideDataDirs keeps each node's log apart from its data directory,
// so the log of a node's life before a wipe survives it.
func logsOutsideDataDirs(t *testing.T) func(*cluster) {
	return func(c *cluster) {
		logs := t.TempDir()
		for _, n := range c.nodes {
			n.logPath = filepath.Join(logs, fmt.Sprintf("node-%d.log", n.id))
			t.Cleanup(n.afterTest) // after the node's stop, which start registers
		}
	}
}

// fiveNodeFaults is the nemesis of TestChaosOnFiveNodes; rng makes its
// choices. Each fault logs what it did.
func fiveNodeFaults(t *testing.T, rng *rand.Rand, c *cluster, links *links, pushed *atomic.Int64) []chaosFault {
	all := nodeIDs(c)
	partition := func(layout string, cut [][2]int, hold time.Duration) {
		t.Logf("%s %s: %s for %v", time.Now().Format("15:04:05.000"), layout, describeReach(all, cut), hold)
		links.cutLinks(cut...)
		time.Sleep(hold)
		links.heal()
	}
	pick := func(nodes []*node) *node { return nodes[rng.IntN(len(nodes))] }
	shuffled := func() []int {
		order := slices.Clone(all)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		return order
	}
	return []chaosFault{
		{"leader in a minority of 2, 3 s", func() {
			l := c.leader()
			f := pick(c.followers())
			partition(fmt.Sprintf("leader %d and follower %d in the minority", l.id, f.id), split(all, []int{l.id, f.id}), 3*time.Second)
		}},
		{"ring 4 s", func() {
			order := shuffled()
			partition(fmt.Sprintf("ring %v (leader %d)", order, c.leader().id), ring(order), 4*time.Second)
		}},
		{"bridge 4 s", func() { // the leader in one half, not the bridge
			order, l := shuffled(), c.leader().id
			if mid := len(order) / 2; order[mid] == l {
				order[0], order[mid] = order[mid], order[0]
			}
			partition(fmt.Sprintf("bridge %v (leader %d)", order, l), bridge(order), 4*time.Second)
		}},
		{"kill -9 leader and a follower", func() { // restarted once writes flow again
			l := c.leader()
			f := pick(c.followers())
			t.Logf("%s kill -9 leader %d and follower %d", time.Now().Format("15:04:05.000"), l.id, f.id)
			killUntilWritesFlow(pushed, l, f)
		}},
		{"SIGSTOP leader 2 s", func() { pauseLeader(c, 2*time.Second) }},
		{"replace a partitioned follower", func() {
			f := pick(c.followers())
			links.isolate(c, f.id)
			time.Sleep(time.Second) // it falls behind
			t.Logf("%s replacing follower %d, cut off: caught up in %v", time.Now().Format("15:04:05.000"), f.id, replaceNode(c, links, f).Round(time.Millisecond))
		}},
		{"replace the leader", func() {
			l := c.leader()
			t.Logf("%s replacing leader %d: caught up in %v", time.Now().Format("15:04:05.000"), l.id, replaceNode(c, links, l).Round(time.Millisecond))
		}},
	}
}

// replaceNode replaces n by an empty node of the same id and addresses, as
// an operator replaces a failed machine: remove it from the cluster, kill
// it, wipe its data directory, heal its links, start it with --join, add it
// back as a voter, and wait until it has caught up and registered. It
// returns how long the new node took from its start to caught up.
func replaceNode(c *cluster, links *links, n *node) time.Duration {
	c.t.Helper()
	c.removeNode(n.id)
	n.kill9()
	c.wipe(n)
	links.heal()
	n.args = joinArgs(n)
	start := time.Now()
	n.start()
	c.addVoter(n)
	c.waitCaughtUp(n)
	c.waitRegistered(len(c.nodes))
	return time.Since(start)
}

// describeReach says whom each node still reaches once cut is cut.
func describeReach(all []int, cut [][2]int) string {
	r := reach(all, cut)
	out := ""
	for _, id := range all {
		out += fmt.Sprintf(" %d→%v", id, r[id])
	}
	return out[1:]
}

// TestPartitionShapes checks that the partition shapes of the five-node
// nemesis cut what they claim, and that cutting them through the link
// proxies leaves exactly those connections: open ones on a cut link are
// closed, new ones refused, the others carry bytes, and heal restores all.
func TestPartitionShapes(t *testing.T) {
	all := []int{1, 2, 3, 4, 5}
	sees := func(r map[int][]int, id int, want ...int) {
		t.Helper()
		got := slices.Sorted(slices.Values(r[id]))
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("node %d reaches %v, want %v", id, got, want)
		}
	}

	// Majority/minority with the leader (say 3) and follower 5 in the
	// minority: two sides, of 2 and 3, that do not see each other.
	minority := reach(all, split(all, []int{3, 5}))
	sees(minority, 3, 5)
	sees(minority, 5, 3)
	for _, id := range []int{1, 2, 4} {
		sees(minority, id, slices.DeleteFunc([]int{1, 2, 4}, func(o int) bool { return o == id })...)
	}
	sees(reach(all, isolation(all, 2)), 2)

	// A ring in the order 4 2 5 1 3: each node sees its two neighbours.
	order := []int{4, 2, 5, 1, 3}
	inRing := reach(all, ring(order))
	for i, id := range order {
		sees(inRing, id, order[(i+len(order)-1)%len(order)], order[(i+1)%len(order)])
	}

	// A bridge 2 4 | 1 | 5 3: node 1 sees all, each half its partner and
	// the bridge, so each half with the bridge is a majority of three.
	bridged := reach(all, bridge([]int{2, 4, 1, 5, 3}))
	sees(bridged, 1, 2, 3, 4, 5)
	sees(bridged, 2, 4, 1)
	sees(bridged, 4, 2, 1)
	sees(bridged, 5, 3, 1)
	sees(bridged, 3, 5, 1)

	// Through the proxies: node i's proxy forwards to an echo server, and
	// node j dials it from its own address, as raft does.
	l := newLinks(t)
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		for {
			conn, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(conn, conn); conn.Close() }()
		}
	}()
	proxies := map[int]string{}
	for _, id := range all {
		proxies[id] = l.proxy(id, echo.Addr().String())
	}
	dial := func(from, to int) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(nodeIP(from))}, Timeout: 5 * time.Second}
		conn, err := d.Dial("tcp", proxies[to])
		if err != nil {
			t.Fatalf("dial %d → %d: %v", from, to, err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	// carries says whether one byte goes through conn and back.
	carries := func(conn net.Conn) bool {
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write([]byte{1}); err != nil {
			return false
		}
		_, err := io.ReadFull(conn, make([]byte, 1))
		return err == nil
	}
	check := func(shape string, cut [][2]int, open map[[2]int]net.Conn) {
		t.Helper()
		r := reach(all, cut)
		for _, from := range all {
			for _, to := range all {
				if from == to {
					continue
				}
				want := slices.Contains(r[from], to)
				if got := carries(open[[2]int{from, to}]); got != want {
					t.Errorf("%s: the connection open from %d to %d carries bytes: %v, want %v", shape, from, to, got, want)
				}
				if got := carries(dial(from, to)); got != want {
					t.Errorf("%s: a new connection from %d to %d carries bytes: %v, want %v", shape, from, to, got, want)
				}
			}
		}
	}
	openAll := func() map[[2]int]net.Conn {
		open := map[[2]int]net.Conn{}
		for _, from := range all {
			for _, to := range all {
				if from != to {
					open[[2]int{from, to}] = dial(from, to)
					if !carries(open[[2]int{from, to}]) {
						t.Fatalf("healed: no bytes from %d to %d", from, to)
					}
				}
			}
		}
		return open
	}
	for _, s := range []struct {
		name string
		cut  [][2]int
	}{
		{"minority", split(all, []int{3, 5})},
		{"ring", ring(order)},
		{"bridge", bridge([]int{2, 4, 1, 5, 3})},
	} {
		open := openAll()
		l.cutLinks(s.cut...)
		check(s.name, s.cut, open)
		if got := l.cutNow(); len(got) != len(s.cut) {
			t.Errorf("%s: %d links cut, the shape has %d", s.name, len(got), len(s.cut))
		}
		l.heal()
		check(s.name+" healed", nil, openAll())
	}
}

// nemesisRand is the nemesis's random source, seeded from the clock or
// WAGGLE_CHAOS_SEED (logged, so a run can be repeated).
func nemesisRand(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("WAGGLE_CHAOS_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("nemesis seed %d (WAGGLE_CHAOS_SEED)", seed)
	return rand.New(rand.NewPCG(seed, seed))
}
