package httpapi

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
)

// replicasJSON is what GET /api/v1/cluster found comparing the members'
// state digests of one raft group (see digestJSON). State is "same" when
// every member that answered reports a digest at Index and no two
// disagree anywhere they can be compared; "diverged" when two members,
// named in Members, report different digests at Index; "unknown" while
// fewer than two members answered or they share no index yet.
type replicasJSON struct {
	Group   uint32        `json:"group"`
	State   string        `json:"state"`
	Index   *uint64       `json:"index"`
	Members []json.Number `json:"members"`
}

// compareReplicas compares the state digests of the members that
// answered, per raft group.
func compareReplicas(members []memberJSON) []replicasJSON {
	type reading struct {
		node   json.Number
		since  uint64
		points map[uint64]string
	}
	byGroup := map[uint32][]reading{}
	eachGroupView(members, func(group uint32, node json.Number, d *digestJSON, _ *checkJSON) {
		if d == nil || d.Applied.Digest == "" {
			return // a binary without digests
		}
		points := map[uint64]string{}
		for _, p := range append(d.Recent, d.Applied) {
			if p.Index > 0 {
				points[p.Index] = p.Digest
			}
		}
		byGroup[group] = append(byGroup[group], reading{node, d.Since, points})
	})
	out := []replicasJSON{} // an empty list, not null, when no member answered
	for _, group := range slices.Sorted(maps.Keys(byGroup)) {
		rs := byGroup[group]
		r := replicasJSON{Group: group, State: "unknown", Members: []json.Number{}}
		// The lowest index at which two members of one chain disagree.
		for i, a := range rs {
			for _, b := range rs[i+1:] {
				if a.since != b.since {
					continue
				}
				for index, digest := range b.points {
					if other, ok := a.points[index]; ok && other != digest && (r.Index == nil || index < *r.Index) {
						r.State, r.Index, r.Members = "diverged", ptr(index), []json.Number{a.node, b.node}
					}
				}
			}
		}
		if r.State == "unknown" && len(rs) > 1 && !slices.ContainsFunc(rs, func(x reading) bool { return x.since != rs[0].since }) {
			// The highest index every member reports.
			for index := range rs[0].points {
				all := !slices.ContainsFunc(rs[1:], func(x reading) bool { _, ok := x.points[index]; return !ok })
				if all && (r.Index == nil || index > *r.Index) {
					r.State, r.Index = "same", ptr(index)
				}
			}
			if r.State == "same" {
				for _, x := range rs {
					r.Members = append(r.Members, x.node)
				}
				sortNodes(r.Members)
			}
		}
		out = append(out, r)
	}
	return out
}

// eachGroupView calls fn with each member's view of each raft group, for
// the members that answered: its digest and state check of the group
// (nil when it reports none), from its groups' entries or, with a
// single group, its own.
func eachGroupView(members []memberJSON, fn func(group uint32, node json.Number, digest *digestJSON, check *checkJSON)) {
	for _, m := range members {
		switch {
		case m.State != "up":
		case len(m.Groups) > 0: // group 0 among them
			for _, g := range m.Groups {
				fn(g.ID, m.ID, &g.StateDigest, g.StateCheck)
			}
		default:
			fn(0, m.ID, m.StateDigest, m.StateCheck)
		}
	}
}

// sortNodes sorts node ids.
func sortNodes(nodes []json.Number) {
	slices.SortFunc(nodes, func(a, b json.Number) int { return cmp.Compare(a.String(), b.String()) })
}
