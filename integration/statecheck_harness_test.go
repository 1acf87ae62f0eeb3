package integration

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// checkIndexes is the answer to POST /api/v1/cluster/checks.
type checkIndexes struct {
	Groups []struct {
		Group uint32 `json:"group"`
		Index uint64 `json:"index"`
	} `json:"groups"`
}

// checkCompared is one entry of GET /api/v1/cluster's checks.
type checkCompared struct {
	Group   uint32 `json:"group"`
	Index   uint64 `json:"index"`
	State   string `json:"state"`
	Members []int  `json:"members"`
	Hash    string `json:"hash"`
	Error   string `json:"error"`
}

// checkStates has every member hash its whole state at one index per raft
// group, through node via, and returns the comparison of each group once
// no member is still hashing. A check some member missed (node via had
// not yet applied its address, say) is asked again.
func (c *cluster) checkStates(via *node) []checkCompared {
	c.t.Helper()
	var out []checkCompared
	waitFor(c.t, 5*time.Minute, func() error {
		var asked checkIndexes
		if status := postJSON(c.t, via.url("/api/v1/cluster/checks"), struct{}{}, &asked); status != http.StatusAccepted {
			return fmt.Errorf("POST /api/v1/cluster/checks: status %d", status)
		}
		for {
			var err error
			if out, err = c.checksFinished(via, asked); err == nil || !errors.Is(err, errCheckRunning) {
				return err
			}
			time.Sleep(100 * time.Millisecond)
		}
	}, c.diagnose)
	return out
}

var errCheckRunning = errors.New("a member is still hashing")

// checksFinished returns the comparison of each group's check asked,
// errCheckRunning while a member is still hashing, another error when a
// member holds no check at the index asked.
func (c *cluster) checksFinished(via *node, asked checkIndexes) ([]checkCompared, error) {
	var cl struct {
		Checks []checkCompared `json:"checks"`
	}
	if status := getJSON(c.t, via.url("/api/v1/cluster"), &cl); status != http.StatusOK {
		return nil, fmt.Errorf("GET /api/v1/cluster: status %d", status)
	}
	var out []checkCompared
	for _, a := range asked.Groups {
		i := slices.IndexFunc(cl.Checks, func(ch checkCompared) bool { return ch.Group == a.Group && ch.Index == a.Index })
		switch {
		case i < 0 || cl.Checks[i].State == "pending":
			return nil, fmt.Errorf("raft group %d at %d: %w", a.Group, a.Index, errCheckRunning)
		case cl.Checks[i].State == "incomplete":
			return nil, fmt.Errorf("raft group %d at %d: a member holds no check: %+v", a.Group, a.Index, cl.Checks)
		}
		out = append(out, cl.Checks[i])
	}
	return out, nil
}

// statesAgree checks the live nodes' whole states (checkStates) and fails
// the test unless every raft group's members found the same hash.
func (c *cluster) statesAgree() {
	c.t.Helper()
	byNode, err := c.digestsOf(c.live())
	if err != nil {
		c.t.Fatalf("reading the live nodes' groups: %v", err)
	}
	runners := map[uint32]int{} // per group, the live nodes that run it: all, or its replicas
	for _, ds := range byNode {
		for g := range ds {
			runners[g]++
		}
	}
	// A node checks the groups it runs across their members: ask as many
	// nodes as it takes to cover every group.
	checked := map[uint32]bool{}
	var lines []string
	for _, via := range c.live() {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(byNode[via.id])), func(g uint32) bool { return !checked[g] }) {
			continue
		}
		for _, ch := range c.checkStates(via) {
			if checked[ch.Group] {
				continue
			}
			checked[ch.Group] = true
			if ch.State != "same" || len(ch.Members) != runners[ch.Group] {
				c.t.Fatalf("state check of raft group %d at index %d: %s, members %v (%d live nodes run it) %s\n%s", ch.Group, ch.Index, ch.State, ch.Members, runners[ch.Group], ch.Error, c.diagnose())
			}
			lines = append(lines, fmt.Sprintf("group %d at %d: %s", ch.Group, ch.Index, ch.Hash))
		}
	}
	c.t.Logf("whole states agree on %d nodes: %s; %s", len(c.live()), strings.Join(lines, "; "), c.checkCosts())
}

// checkCosts says what the newest state check of group 0 read on each live
// node and how long it took.
func (c *cluster) checkCosts() string {
	var costs []string
	for _, n := range c.live() {
		var h healthAnswer
		getJSON(c.t, n.url("/health"), &h)
		if ch := h.Raft.StateCheck; ch != nil && ch.Last != nil {
			costs = append(costs, fmt.Sprintf("node %d hashed %d keys and %.1f MiB of message data in %v", n.id, ch.Last.Keys,
				float64(ch.Last.Bytes)/(1<<20), time.Duration(ch.Last.TookMs)*time.Millisecond))
		}
	}
	return "group 0: " + strings.Join(costs, ", ")
}
