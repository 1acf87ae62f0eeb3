package router

import (
	"fmt"
	"testing"
)

func TestTableWithOneGroupAnswersItForEverything(t *testing.T) {
	tb := NewTable("only", nil, nil)
	if tb.Groups() != 1 || tb.For("orders") != "only" || tb.Forwarding(0) != "only" || len(tb.All()) != 1 {
		t.Fatalf("one group: %+v", tb)
	}
	if g := tb.GroupOfIDString("1@2"); g != 0 {
		t.Fatalf("a lease of group 2 placed in %d with one group", g)
	}
}

func TestTablePlacesNamesAndIDs(t *testing.T) {
	local := []string{"l0", "l1", "l2"}
	tb := NewTable("l0", local, []string{"f0", "f1", "f2"})
	for _, name := range []string{"orders", "billing.invoices", "billing"} {
		g := Group(name, 3)
		if tb.GroupOf(name) != g || tb.For(name) != local[g] || tb.Forwarding(g) != fmt.Sprintf("f%d", g) {
			t.Errorf("%q: group %d, local %s", name, tb.GroupOf(name), tb.For(name))
		}
	}
	for id, want := range map[string]uint32{
		"0195f0a2-7c1e-7000-8000-000000000001@2": 2, // a lease id names its group
		"x@7":                                    0, // no group 7: group 0 judges it
		"x@-1":                                   0,
		fmt.Sprint(IDBase(1) + 5):                1, // a minted number
		fmt.Sprint(IDBase(9)):                    0,
		"not-a-number":                           0,
	} {
		if got := tb.GroupOfIDString(id); got != want {
			t.Errorf("GroupOfIDString(%q) = %d, want %d", id, got, want)
		}
	}
}

func TestTableRefusesMismatchedLists(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("local and forwarding lists of different lengths were accepted")
		}
	}()
	NewTable("a", []string{"a", "b"}, []string{"a"})
}

// With a replication factor group 0 holds no queue: names spread over the
// data groups alone, and the groups this node does not replicate are
// marked.
func TestTableDataGroupsOnly(t *testing.T) {
	local := []string{"g0", "g1", "", "g3"}
	tb := NewTable("single", local, local).DataGroupsOnly([]bool{false, false, true, false})
	seen := map[uint32]bool{}
	for i := range 200 {
		g := tb.GroupOf(fmt.Sprintf("queue-%d", i))
		if g == 0 || g > 3 {
			t.Fatalf("queue-%d placed in group %d", i, g)
		}
		seen[g] = true
		if want := 1 + Group(fmt.Sprintf("queue-%d", i), 3); g != want {
			t.Fatalf("queue-%d in group %d, want %d", i, g, want)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("200 names reached groups %v, want all three data groups", seen)
	}
	if !tb.Replicated(0) || !tb.Replicated(1) || tb.Replicated(2) || !tb.Replicated(3) {
		t.Fatal("Replicated does not follow the remote list")
	}
	if !NewTable("single", local, local).Replicated(2) {
		t.Fatal("without a replication factor every group is replicated")
	}
}
