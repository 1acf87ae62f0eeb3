package raftgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Placement says which nodes replicate each data group. With Factor 0
// every node replicates every group (and group 0 holds data too, as it
// always has). With a factor, each data group has Factor replicas among
// the cluster's nodes, so a cluster of more nodes than replicas stores and
// applies each record on Factor of them only: capacity grows with the
// cluster. Group 0, the metadata group, stays on every node and then holds
// no queue or topic (router.Table.DataGroupsOnly).
//
// The replicas of data group g are the Factor nodes from position g-1 on
// (wrapping) among Nodes, and the first of them is the group's preferred
// leader: consecutive groups start one node further, so replicas and
// leaders spread evenly when there are at least as many groups as nodes.
// With racks (Kafka's broker.rack), Nodes alternate between the racks, and
// a node whose rack the group has already is passed over while another
// rack's node can be taken, so a group's replicas are in as many racks as
// there are (up to Factor).
type Placement struct {
	Factor int               // replicas per data group; 0: every node
	Nodes  []string          // the cluster's voters when it was created: by id, alternating between racks
	Racks  map[string]string // each node's rack; nil: none
}

// MaxReplicationFactor bounds Placement.Factor: raft groups of more than
// five voters write more than they protect.
const MaxReplicationFactor = 5

// NewPlacement is the placement of factor replicas per data group over
// the static cluster of nodes (ids), in racks (by node id; nil or empty:
// no racks). An error explains a factor or racks that do not fit.
func NewPlacement(factor int, nodes []string, racks map[string]string) (Placement, error) {
	if factor == 0 {
		return Placement{}, nil
	}
	switch {
	case factor < 0 || factor > MaxReplicationFactor:
		return Placement{}, fmt.Errorf("replication factor %d: from 1 to %d (0: every node replicates every group)", factor, MaxReplicationFactor)
	case len(nodes) < factor:
		return Placement{}, fmt.Errorf("replication factor %d needs a static cluster (--peers) of at least %d nodes, not %d", factor, factor, len(nodes))
	}
	sorted := slices.Clone(nodes)
	slices.SortFunc(sorted, compareIDs)
	sorted = slices.Compact(sorted)
	if len(racks) == 0 {
		return Placement{Factor: factor, Nodes: sorted}, nil
	}
	for _, n := range sorted {
		if racks[n] == "" {
			return Placement{}, fmt.Errorf("node %s has no rack: give every node one, or none", n)
		}
	}
	for n := range racks {
		if !slices.Contains(sorted, n) {
			return Placement{}, fmt.Errorf("a rack is given for node %s, which is not in the cluster", n)
		}
	}
	return Placement{Factor: factor, Nodes: alternateRacks(sorted, racks), Racks: racks}, nil
}

// alternateRacks orders nodes (sorted by id) by taking one of each rack in
// turn, racks in the order of their first node: a1 b1 c1 a2 b2 c2 ….
func alternateRacks(nodes []string, racks map[string]string) []string {
	var order []string
	byRack := map[string][]string{}
	for _, n := range nodes {
		r := racks[n]
		if byRack[r] == nil {
			order = append(order, r)
		}
		byRack[r] = append(byRack[r], n)
	}
	out := make([]string, 0, len(nodes))
	for i := 0; len(out) < len(nodes); i++ {
		for _, r := range order {
			if i < len(byRack[r]) {
				out = append(out, byRack[r][i])
			}
		}
	}
	return out
}

// Everywhere reports whether every node replicates every group.
func (p Placement) Everywhere() bool { return p.Factor == 0 }

// Replicas lists the nodes that replicate group g, its preferred leader
// first; nil when every node does (Everywhere) or for group 0.
func (p Placement) Replicas(g uint32) []string {
	if p.Everywhere() || g == 0 || len(p.Nodes) == 0 {
		return nil
	}
	out := make([]string, 0, p.Factor)
	racks := map[string]bool{}
	// A first pass takes nodes of racks the group lacks, a second fills
	// up with any (more replicas than racks).
	for pass := range 2 {
		for i := 0; i < len(p.Nodes) && len(out) < p.Factor; i++ {
			n := p.Nodes[(int(g)-1+i)%len(p.Nodes)]
			if slices.Contains(out, n) || (pass == 0 && p.Racks != nil && racks[p.Racks[n]]) {
				continue
			}
			out = append(out, n)
			racks[p.Racks[n]] = true
		}
	}
	return out
}

// Replicates reports whether node runs a member of group g.
func (p Placement) Replicates(node string, g uint32) bool {
	return p.Everywhere() || g == 0 || slices.Contains(p.Replicas(g), node)
}

// GroupsOn is how many of a cluster's count raft groups node runs, group
// 0 included.
func (p Placement) GroupsOn(node string, count int) int {
	n := 1
	for g := uint32(1); g < uint32(count); g++ {
		if p.Replicates(node, g) {
			n++
		}
	}
	return n
}

// placementFile records a data directory's placement: the factor, then
// the nodes it was computed over. It cannot change (replica moves are
// not built yet), and every node must compute the same replicas.
const placementFile = "placement"

// String is the placement as its file records it.
func (p Placement) String() string {
	s := "factor=" + strconv.Itoa(p.Factor) + " nodes=" + strings.Join(p.Nodes, ",")
	if p.Racks != nil {
		var racks []string
		for _, n := range p.Nodes {
			racks = append(racks, n+"="+p.Racks[n])
		}
		s += " racks=" + strings.Join(racks, ",")
	}
	return s
}

// CheckPlacement records p in a new data directory and refuses another
// one in an existing directory (one made without a factor has factor 0).
// Call it after CheckCount.
func CheckPlacement(dataDir string, p Placement, fresh bool) error {
	path := filepath.Join(dataDir, "groups", placementFile)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if !fresh {
			if p.Everywhere() {
				return nil
			}
			return fmt.Errorf("this data directory was created without --replication-factor: it cannot be given one (%s)", p)
		}
		if p.Everywhere() {
			return nil
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		return os.WriteFile(path, []byte(p.String()+"\n"), 0o644)
	case err != nil:
		return err
	}
	if had := strings.TrimSpace(string(b)); had != p.String() {
		return fmt.Errorf("this data directory was created with placement %q, not %q: --replication-factor and --peers cannot change yet", had, p)
	}
	return nil
}
