package router

import "testing"

func TestKeyIsTheNameUpToItsFirstDot(t *testing.T) {
	for name, want := range map[string]string{"orders": "orders", "billing.invoices": "billing", "a.b.c": "a", ".x": "", "": ""} {
		if got := Key(name); got != want {
			t.Errorf("Key(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestGroupKeepsAKeyTogetherAndSpreadsKeys(t *testing.T) {
	if g := Group("anything", 1); g != 0 {
		t.Fatalf("one group: got %d", g)
	}
	if a, b := Group("billing.invoices", 3), Group("billing.payments", 3); a != b || a != Group("billing", 3) {
		t.Fatalf("one key in groups %d and %d", a, b)
	}
	seen := map[uint32]int{}
	for i := range 300 {
		g := Group("queue-"+string(rune('a'+i%26))+string(rune('a'+i/26)), 3)
		if g >= 3 {
			t.Fatalf("group %d of 3", g)
		}
		seen[g]++
	}
	for g := range uint32(3) {
		if seen[g] < 60 {
			t.Errorf("group %d owns %d of 300 names: %v", g, seen[g], seen)
		}
	}
}

func TestIDsNameTheirGroup(t *testing.T) {
	for _, g := range []uint32{0, 1, 5, 63} {
		for _, n := range []uint64{0, 1, 1 << 40} {
			if got := GroupOfID(IDBase(g) + n); got != g {
				t.Errorf("id %d of group %d: GroupOfID says %d", IDBase(g)+n, g, got)
			}
		}
	}
	if IDBase(63)+1<<44-1 >= 1<<53 {
		t.Fatal("ids leave the integers a JSON number carries")
	}
}
