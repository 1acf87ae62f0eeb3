package integration

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// The chaos workload on 5 nodes whose 4 data groups have 3 replicas,
// under kill -9 and partitions and a nemesis that moves replicas: a
// group's replica (its leader's, half the time) moves to a node that does
// not replicate it, and, in the second fault, a node of the move is
// killed -9 while it runs and restarted 1 s later. Every move must finish
// once the fault heals, and the workload's checks (nothing acknowledged
// lost, no duplicate, transactions whole, once at most once) hold.
func TestChaosWithReplicaMoves(t *testing.T) {
	rng := nemesisRand(t)
	runChaosOn(t, chaosRun{
		nodes:   5,
		seconds: 60,
		extra:   []string{"--data-groups", "5", "--replication-factor", "3"},
		nemesis: func(c *cluster, links *links, pushed *atomic.Int64) []chaosFault {
			return []chaosFault{
				{"move a replica", func() { moveAReplica(t, rng, c, false) }},
				{"kill -9 during a move", func() { moveAReplica(t, rng, c, true) }},
				{"kill -9 a node", func() { killUntilWritesFlow(pushed, c.nodes[rng.IntN(len(c.nodes))]) }},
				{"partition a node 3 s", func() {
					links.isolate(c, c.nodes[rng.IntN(len(c.nodes))].id)
					time.Sleep(3 * time.Second)
					links.heal()
				}},
			}
		},
		maxUnavailable: 30 * time.Second,
	})
}

// moveAReplica moves one replica of a random data group to a node that
// does not replicate it (the group's leader's, half the time), with kill
// -9 of a random node of the move while it runs when kill is set, and
// waits until the move is done on every node.
func moveAReplica(t *testing.T, rng *rand.Rand, c *cluster, kill bool) {
	s := &scaleOut{cluster: c}
	via := c.live()[rng.IntN(len(c.live()))]
	var groups map[uint32]groupReplicas
	waitFor(t, 30*time.Second, func() (err error) {
		groups, err = s.groupsOf(t, via)
		return err
	})
	g := uint32(1 + rng.IntN(len(groups)))
	replicas := groups[g].Replicas
	var spare []int
	for _, n := range c.nodes {
		if !slices.Contains(replicas, n.id) {
			spare = append(spare, n.id)
		}
	}
	at := rng.IntN(len(replicas))
	if rng.IntN(2) == 0 && groups[g].Leader != nil {
		if i := slices.Index(replicas, *groups[g].Leader); i >= 0 {
			at = i
		}
	}
	moved := slices.Clone(replicas)
	moved[at] = spare[rng.IntN(len(spare))]
	body := fmt.Appendf(nil, `{"replicas":[%d,%d,%d]}`, moved[0], moved[1], moved[2])
	waitFor(t, 30*time.Second, func() error {
		if status := do(t, http.MethodPut, via.url(fmt.Sprintf("/api/v1/cluster/groups/%d/replicas", g)), body, nil); status != http.StatusOK {
			return fmt.Errorf("move of group %d to %v: status %d", g, moved, status)
		}
		return nil
	})
	if kill {
		involved := append(slices.Clone(replicas), moved[at])
		victim := c.nodes[involved[rng.IntN(len(involved))]-1]
		time.Sleep(time.Duration(rng.IntN(1000)) * time.Millisecond)
		victim.kill9()
		time.Sleep(time.Second)
		victim.start()
	}
	s.waitMoved(t, g, moved)
}
