package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Replicas are compared by their state digests (see /health
// stateDigest): every node folds each write its state machine makes into
// a digest, chained entry by entry, so two nodes that report different
// digests at one index hold different states. The checks below fail a
// test on the first such pair, whatever the clients saw.

type digestPoint struct {
	Index  uint64 `json:"index"`
	Digest string `json:"digest"`
}

type digestAnswer struct {
	Since   uint64        `json:"since"`
	Applied digestPoint   `json:"applied"`
	Recent  []digestPoint `json:"recent"`
}

// points lists the digests the answer names, by index; none at index 0,
// before any entry.
func (d digestAnswer) points() map[uint64]string {
	out := map[uint64]string{}
	for _, p := range append(d.Recent, d.Applied) {
		if p.Index > 0 {
			out[p.Index] = p.Digest
		}
	}
	return out
}

// readDigests reads node n's digests with cl; a raft group of a binary
// without digests is left out.
func readDigests(cl *http.Client, n *node) (map[uint32]digestAnswer, error) {
	resp, err := cl.Get(n.url("/health"))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var h struct {
		Raft struct {
			StateDigest digestAnswer `json:"stateDigest"`
		} `json:"raft"`
		Groups []struct {
			ID          uint32       `json:"id"`
			StateDigest digestAnswer `json:"stateDigest"`
		} `json:"groups"`
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		return nil, fmt.Errorf("node %d: health status %d", n.id, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return nil, fmt.Errorf("node %d: health: %v", n.id, err)
	}
	out := map[uint32]digestAnswer{}
	if h.Raft.StateDigest.Applied.Digest != "" {
		out[0] = h.Raft.StateDigest
	}
	for _, g := range h.Groups {
		if g.StateDigest.Applied.Digest != "" {
			out[g.ID] = g.StateDigest
		}
	}
	return out, nil
}

// errDiverged marks two replicas that hold different states.
type errDiverged string

func (e errDiverged) Error() string { return string(e) }

// compareDigests compares the digests of the nodes (node id -> raft group
// -> digest) at every index two of them report in the same chain. It
// returns errDiverged on a disagreement, else how many indexes every node
// that runs a group (all of them, or its replicas) reports, per group.
func compareDigests(byNode map[int]map[uint32]digestAnswer) (map[uint32]int, error) {
	ids := slices.Sorted(func(yield func(int) bool) {
		for id := range byNode {
			if !yield(id) {
				return
			}
		}
	})
	groups := map[uint32]bool{}
	for _, ds := range byNode {
		for g := range ds {
			groups[g] = true
		}
	}
	shared := map[uint32]int{}
	for g := range groups {
		seen := map[uint64]map[uint64]int{} // since -> index -> how many nodes
		for i, a := range ids {
			da, ok := byNode[a][g]
			if !ok {
				continue
			}
			pa := da.points()
			for index := range pa {
				if seen[da.Since] == nil {
					seen[da.Since] = map[uint64]int{}
				}
				seen[da.Since][index]++
			}
			for _, b := range ids[i+1:] {
				db, ok := byNode[b][g]
				if !ok || db.Since != da.Since {
					continue
				}
				for index, digest := range db.points() {
					if other, ok := pa[index]; ok && other != digest {
						return nil, errDiverged(fmt.Sprintf("raft group %d: node %d and node %d hold different states: at index %d their digests are %s and %s (node %d: %+v; node %d: %+v)",
							g, a, b, index, other, digest, a, da, b, db))
					}
				}
			}
		}
		runs := 0 // the nodes that run group g: all, or its replicas
		for _, ds := range byNode {
			if _, ok := ds[g]; ok {
				runs++
			}
		}
		for _, counts := range seen {
			for _, n := range counts {
				if n == runs {
					shared[g]++
				}
			}
		}
	}
	return shared, nil
}

// digestsOf reads the digests of the given nodes.
func (c *cluster) digestsOf(nodes []*node) (map[int]map[uint32]digestAnswer, error) {
	return digestsWith(client, nodes)
}

func digestsWith(cl *http.Client, nodes []*node) (map[int]map[uint32]digestAnswer, error) {
	byNode := map[int]map[uint32]digestAnswer{}
	for _, n := range nodes {
		d, err := readDigests(cl, n)
		if err != nil {
			return nil, err
		}
		byNode[n.id] = d
	}
	return byNode, nil
}

// noDivergence fails the test if two of the nodes report different
// digests at an index both report; it needs no such index.
func (c *cluster) noDivergence(nodes ...*node) {
	c.t.Helper()
	byNode, err := c.digestsOf(nodes)
	if err != nil {
		return // a node down or stopping: the next check covers it
	}
	if _, err := compareDigests(byNode); err != nil {
		c.t.Fatal(err)
	}
}

// digestsShared compares the live nodes' digests: errDiverged on a
// disagreement, else an error while some raft group has no index every
// node reports, else nil and how many there are per group.
func (c *cluster) digestsShared() (map[uint32]int, error) {
	byNode, err := c.digestsOf(c.live())
	if err != nil {
		return nil, err
	}
	shared, err := compareDigests(byNode)
	if err != nil {
		return nil, err
	}
	if missing := unshared(byNode, shared); len(missing) > 0 {
		return nil, fmt.Errorf("no index every node reports yet in raft groups %v", missing)
	}
	return shared, nil
}

// unshared lists the raft groups some node runs for which no index is
// reported by every node (shared as compareDigests counts it).
func unshared(byNode map[int]map[uint32]digestAnswer, shared map[uint32]int) []uint32 {
	var missing []uint32
	for _, ds := range byNode {
		for g := range ds {
			if shared[g] == 0 && !slices.Contains(missing, g) {
				missing = append(missing, g)
			}
		}
	}
	slices.Sort(missing)
	return missing
}

// replicasAgree waits until the live nodes report digests at a shared
// index in every raft group, and fails the test if any two disagree; then
// it compares their whole states (statesAgree). Call it once writes have
// stopped, when the nodes reach the same index.
func (c *cluster) replicasAgree() {
	c.t.Helper()
	var shared map[uint32]int
	waitFor(c.t, 60*time.Second, func() (err error) {
		shared, err = c.digestsShared()
		var d errDiverged
		if errors.As(err, &d) {
			c.t.Fatal(err)
		}
		return err
	}, c.diagnose)
	c.t.Logf("replicas agree: the state digests of %d nodes match at every shared index (indexes all share, per raft group: %v)", len(c.live()), shared)
	c.statesAgree()
}

// divergenceWatch is what watchDivergence found.
type divergenceWatch struct {
	mu       sync.Mutex
	found    string // the first disagreement, "" while none
	compared int    // reads in which every raft group had an index all live nodes report
	reads    int
}

// result returns the first disagreement found ("" while none) and a
// summary of the comparisons made.
func (w *divergenceWatch) result() (found, summary string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.found, fmt.Sprintf("%d of %d reads of every live node's digests compared at an index all of them report", w.compared, w.reads)
}

// watchDivergence compares the live nodes' digests every 2 s until stop,
// while faults come and go: a replica that diverged and was later
// replaced by a snapshot agrees again at the end.
func (c *cluster) watchDivergence(wg *sync.WaitGroup, stop <-chan struct{}) *divergenceWatch {
	w := &divergenceWatch{}
	short := &http.Client{Timeout: 2 * time.Second} // a stopped node answers nothing
	untilStopped(wg, stop, func(int) {
		select {
		case <-stop:
			return
		case <-time.After(2 * time.Second):
		}
		byNode, err := digestsWith(short, c.live())
		if err != nil {
			return
		}
		shared, err := compareDigests(byNode)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.reads++
		var d errDiverged
		switch {
		case errors.As(err, &d):
			if w.found == "" {
				w.found = time.Now().Format("15:04:05.000") + ": " + string(d)
			}
		case err == nil && len(byNode) > 1 && len(unshared(byNode, shared)) == 0:
			w.compared++
		}
	})
	return w
}
