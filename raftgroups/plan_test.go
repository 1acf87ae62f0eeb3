package raftgroups

import (
	"maps"
	"slices"
	"testing"
)

// twelveOnSix is the static placement of 12 data groups of 3 replicas on
// 6 nodes, by group.
func twelveOnSix(t *testing.T) map[uint32][]string {
	p, err := NewPlacement(3, []string{"1", "2", "3", "4", "5", "6"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint32][]string{}
	for g := uint32(1); g <= 12; g++ {
		out[g] = p.Replicas(g)
	}
	return out
}

func loadOf(replicas map[uint32][]string) map[string]int {
	load := map[string]int{}
	for _, r := range replicas {
		for _, n := range r {
			load[n]++
		}
	}
	return load
}

func TestPlanDecommissionSpreadsANodesReplicas(t *testing.T) {
	now := twelveOnSix(t)
	plan, err := PlanDecommission(now, "2", []string{"1", "3", "4", "5", "6"})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 6 {
		t.Fatalf("node 2 replicates 6 groups; the plan moves %d: %v", len(plan), plan)
	}
	maps.Copy(now, plan)
	load := loadOf(now)
	for g, r := range now {
		if slices.Contains(r, "2") || len(slices.Compact(slices.Sorted(slices.Values(r)))) != 3 {
			t.Fatalf("group %d after the plan: %v", g, r)
		}
	}
	if load["2"] != 0 || slices.Max(slices.Collect(maps.Values(load)))-slices.Min(slices.Collect(maps.Values(load))) > 1 {
		t.Fatalf("loads after the plan: %v", load)
	}
	// Group 1 was {1,2,3}: node 2's place, second, is taken in place.
	if r := plan[1]; r[0] != "1" || r[2] != "3" || r[1] == "2" {
		t.Fatalf("group 1: %v", r)
	}
	if _, err := PlanDecommission(map[uint32][]string{1: {"1", "2", "3"}}, "2", []string{"1", "3"}); err == nil {
		t.Fatal("a group on every voter got a plan")
	}
}

func TestPlanRebalanceGivesANewNodeItsShare(t *testing.T) {
	now := twelveOnSix(t)
	voters := []string{"1", "2", "3", "4", "5", "6", "7"}
	plan := PlanRebalance(now, voters)
	maps.Copy(now, plan)
	load := loadOf(now)
	// 36 replicas on 7 nodes: 5 or 6 each.
	for _, n := range voters {
		if load[n] < 5 || load[n] > 6 {
			t.Fatalf("node %s holds %d replicas after the rebalance: %v", n, load[n], load)
		}
	}
	if len(plan) != 5 {
		t.Fatalf("the plan moves %d groups, want the 5 that node 7 takes: %v", len(plan), plan)
	}
	if again := PlanRebalance(now, voters); len(again) != 0 {
		t.Fatalf("a balanced cluster got a plan: %v", again)
	}
}
