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
