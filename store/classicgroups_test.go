package store

import (
	"slices"
	"testing"
)

// A record keeps the newest generation whatever order saves land in; an
// emptied group removes its own generation's record or an older one, never
// a newer one, and never leaves a record behind.
func TestClassicGroupKeepsTheNewestGeneration(t *testing.T) {
	s := openTest(t)
	gen := func(n int32, members ...string) ClassicGroup {
		g := ClassicGroup{Name: "g", ProtocolType: "consumer", Protocol: "range", Generation: n}
		for _, m := range members {
			g.Members = append(g.Members, ClassicMember{ID: m, SessionTimeoutMs: 10_000,
				Protocols: []ClassicProtocol{{Name: "range", Metadata: []byte{1, 2}}}, Assignment: []byte(m)})
		}
		if len(members) > 0 {
			g.Leader = members[0]
		}
		return g
	}
	read := func() (ClassicGroup, bool) {
		t.Helper()
		var g ClassicGroup
		var found bool
		err := s.View(func(tx *Tx) error {
			var err error
			g, found, err = tx.ClassicGroup("g")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return g, found
	}
	save := func(g ClassicGroup) { write(t, s, func(tx *Tx) error { return tx.SaveClassicGroup(g) }) }

	save(gen(2, "a"))
	save(gen(3)) // emptied in generation 3: generation 2's record goes
	if _, found := read(); found {
		t.Fatal("an emptied group's record is still there")
	}
	save(gen(1)) // an empty save with no record: nothing
	if _, found := read(); found {
		t.Fatal("an empty save left a record")
	}
	save(gen(5, "a", "b"))
	save(gen(4, "a")) // landed late
	save(gen(4))      // emptied long ago
	g, found := read()
	if !found || g.Generation != 5 || len(g.Members) != 2 || g.Leader != "a" ||
		!slices.Equal(g.Members[1].Assignment, []byte("b")) || g.Members[0].Protocols[0].Name != "range" {
		t.Fatalf("record %+v (found %v), want generation 5 of a and b", g, found)
	}
	write(t, s, func(tx *Tx) error { return tx.DeleteClassicGroup("g") })
	if _, found := read(); found {
		t.Fatal("a deleted group's record is still there")
	}
}
