package raftgroups

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Each data group gets factor replicas starting one node further than the
// group before, so on 6 nodes 12 groups put 6 replicas and 2 preferred
// leaderships on every node.
func TestPlacementSpreadsReplicasAndLeaders(t *testing.T) {
	p, err := NewPlacement(3, []string{"6", "5", "4", "3", "2", "1", "10"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"1", "2", "3", "4", "5", "6", "10"}; !slices.Equal(p.Nodes, want) {
		t.Fatalf("nodes %v, want numeric order %v", p.Nodes, want)
	}
	if got := p.Replicas(1); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Fatalf("group 1: %v", got)
	}
	if got := p.Replicas(7); !slices.Equal(got, []string{"10", "1", "2"}) {
		t.Fatalf("group 7 wraps: %v", got)
	}
	if p.Replicas(0) != nil || !p.Replicates("4", 0) {
		t.Fatal("group 0 is on every node")
	}

	six, _ := NewPlacement(3, []string{"1", "2", "3", "4", "5", "6"}, nil)
	replicas, leads := map[string]int{}, map[string]int{}
	for g := uint32(1); g <= 12; g++ {
		rs := six.Replicas(g)
		if len(rs) != 3 || len(slices.Compact(slices.Sorted(slices.Values(rs)))) != 3 {
			t.Fatalf("group %d: replicas %v, want 3 distinct", g, rs)
		}
		for _, n := range rs {
			replicas[n]++
			if !six.Replicates(n, g) {
				t.Fatalf("node %s not replicating group %d", n, g)
			}
		}
		leads[rs[0]]++
	}
	for _, n := range six.Nodes {
		if replicas[n] != 6 || leads[n] != 2 {
			t.Fatalf("node %s: %d replicas and %d preferred leaderships, want 6 and 2", n, replicas[n], leads[n])
		}
	}
}

func TestPlacementRefusesWhatDoesNotFit(t *testing.T) {
	for _, c := range []struct {
		factor int
		nodes  []string
		want   string
	}{
		{6, []string{"1", "2", "3", "4", "5", "6"}, "from 1 to 5"},
		{-1, []string{"1"}, "from 1 to 5"},
		{3, []string{"1", "2"}, "at least 3 nodes"},
	} {
		if _, err := NewPlacement(c.factor, c.nodes, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("factor %d over %v: %v, want an error saying %q", c.factor, c.nodes, err, c.want)
		}
	}
	if p, err := NewPlacement(0, nil, nil); err != nil || !p.Everywhere() || !p.Replicates("9", 3) {
		t.Fatalf("factor 0: %+v %v, want every node everywhere", p, err)
	}
}

// A data directory keeps the placement it was made with: another factor
// or another peer list is refused, and a directory made without a factor
// cannot be given one.
func TestPlacementIsFixedWithTheDataDirectory(t *testing.T) {
	dir := t.TempDir()
	p, _ := NewPlacement(3, []string{"1", "2", "3", "4"}, nil)
	if err := CheckPlacement(dir, p, true); err != nil {
		t.Fatal(err)
	}
	if err := CheckPlacement(dir, p, false); err != nil {
		t.Fatalf("the same placement again: %v", err)
	}
	other, _ := NewPlacement(2, []string{"1", "2", "3", "4"}, nil)
	if err := CheckPlacement(dir, other, false); err == nil || !strings.Contains(err.Error(), "cannot change") {
		t.Fatalf("another factor: %v", err)
	}
	old := t.TempDir()
	if err := os.MkdirAll(filepath.Join(old, "raft"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckPlacement(old, p, false); err == nil || !strings.Contains(err.Error(), "without --replication-factor") {
		t.Fatalf("a factor on a directory made without one: %v", err)
	}
	if err := CheckPlacement(old, Placement{}, false); err != nil {
		t.Fatalf("no factor on a directory made without one: %v", err)
	}
}

// With racks each group's replicas span as many racks as there are (up
// to the factor), and replicas and preferred leaders stay balanced.
func TestPlacementSpreadsAGroupOverRacks(t *testing.T) {
	nodes := []string{"1", "2", "3", "4", "5", "6"}
	for _, c := range []struct {
		name   string
		racks  map[string]string
		factor int
		spans  int // racks each group spans
	}{
		{"three racks of two", map[string]string{"1": "a", "2": "a", "3": "b", "4": "b", "5": "c", "6": "c"}, 3, 3},
		{"two racks of three", map[string]string{"1": "a", "2": "a", "3": "a", "4": "b", "5": "b", "6": "b"}, 3, 2},
		{"two racks, factor 2", map[string]string{"1": "a", "2": "a", "3": "a", "4": "b", "5": "b", "6": "b"}, 2, 2},
	} {
		p, err := NewPlacement(c.factor, nodes, c.racks)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		replicas, leads := map[string]int{}, map[string]int{}
		for g := uint32(1); g <= 12; g++ {
			rs := p.Replicas(g)
			racks := map[string]bool{}
			for _, n := range rs {
				racks[c.racks[n]] = true
				replicas[n]++
			}
			if len(rs) != c.factor || len(racks) != c.spans {
				t.Fatalf("%s: group %d on %v spans %d racks, want %d replicas over %d", c.name, g, rs, len(racks), c.factor, c.spans)
			}
			leads[rs[0]]++
		}
		for _, n := range nodes {
			if replicas[n] != 12*c.factor/6 || leads[n] != 2 {
				t.Fatalf("%s: node %s has %d replicas and %d preferred leaderships, want %d and 2", c.name, n, replicas[n], leads[n], 12*c.factor/6)
			}
		}
		if !strings.Contains(p.String(), "racks=") {
			t.Fatalf("%s: the recorded placement %q leaves the racks out", c.name, p)
		}
	}
	if _, err := NewPlacement(3, nodes, map[string]string{"1": "a"}); err == nil || !strings.Contains(err.Error(), "node 2 has no rack") {
		t.Fatalf("a node without a rack: %v", err)
	}
	if _, err := NewPlacement(3, nodes[:3], map[string]string{"1": "a", "2": "a", "3": "b", "9": "c"}); err == nil || !strings.Contains(err.Error(), "node 9") {
		t.Fatalf("a rack for a node outside the cluster: %v", err)
	}
}
