package raftgroups

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Plans of replica moves: where data groups' replicas should go when a
// node leaves or joins. They are pure functions of the replicas now (by
// group id, as Set.Replicas answers them) and the voters that may hold
// replicas; the caller records the result in group 0 (SetReplicas).

// PlanDecommission moves every replica off node: in each group that has
// one, node is replaced, in its position, by the voter of spare that the
// group lacks and that replicates the fewest groups (counting the moves
// planned so far; ties go to the lowest id). It answers the new replicas
// of the groups that change, or an error when a group has no voter left
// to take node's place.
func PlanDecommission(replicas map[uint32][]string, node string, spare []string) (map[uint32][]string, error) {
	load := loads(replicas, spare)
	plan := map[uint32][]string{}
	for _, g := range slices.Sorted(maps.Keys(replicas)) {
		i := slices.Index(replicas[g], node)
		if i < 0 {
			continue
		}
		to, ok := leastLoaded(load, spare, replicas[g])
		if !ok {
			return nil, fmt.Errorf("raft group %d is on %s: no other voter can take node %s's replica", g, strings.Join(replicas[g], ", "), node)
		}
		load[to]++
		plan[g] = slices.Clone(replicas[g])
		plan[g][i] = to
	}
	return plan, nil
}

// PlanRebalance evens out how many replicas each voter holds: while the
// most loaded voter holds two more than the least, one of its replicas
// (in a group the least loaded one lacks) moves there, keeping its
// position (a preferred leader moves as a preferred leader). Voters with
// no replica, a node just added, get their share. It answers the new
// replicas of the groups that change (none when balanced). Replicas on
// nodes not among voters are left where they are: decommission those.
func PlanRebalance(replicas map[uint32][]string, voters []string) map[uint32][]string {
	load := loads(replicas, voters)
	now := map[uint32][]string{}
	for g, r := range replicas {
		now[g] = slices.Clone(r)
	}
	plan := map[uint32][]string{}
	for range len(replicas) * MaxReplicationFactor { // each move lowers the spread: bounded
		most := slices.MaxFunc(voters, func(a, b string) int { return cmp.Or(cmp.Compare(load[a], load[b]), compareIDs(b, a)) })
		least := slices.MinFunc(voters, func(a, b string) int { return cmp.Or(cmp.Compare(load[a], load[b]), compareIDs(a, b)) })
		if load[most]-load[least] < 2 {
			break
		}
		moved := false
		for _, g := range slices.Sorted(maps.Keys(now)) {
			i := slices.Index(now[g], most)
			if i < 0 || slices.Contains(now[g], least) {
				continue
			}
			now[g][i] = least
			plan[g] = now[g]
			load[most]--
			load[least]++
			moved = true
			break
		}
		if !moved {
			break
		}
	}
	return plan
}

// loads counts the replicas each of nodes holds (0 for one with none).
func loads(replicas map[uint32][]string, nodes []string) map[string]int {
	load := map[string]int{}
	for _, n := range nodes {
		load[n] = 0
	}
	for _, r := range replicas {
		for _, n := range r {
			load[n]++
		}
	}
	return load
}

// leastLoaded is the node of nodes, not in not, that holds the fewest
// replicas (the lowest id among equals).
func leastLoaded(load map[string]int, nodes, not []string) (string, bool) {
	var out string
	for _, n := range nodes {
		if slices.Contains(not, n) {
			continue
		}
		if out == "" || load[n] < load[out] || (load[n] == load[out] && compareIDs(n, out) < 0) {
			out = n
		}
	}
	return out, out != ""
}
