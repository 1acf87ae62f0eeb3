package fsm

import (
	"fmt"
	"maps"
	"testing"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

func TestFSM_SeedIDs(t *testing.T) {
	f := newFSM(t)
	base := uint64(3) << 44
	if got := f.ApplyBatch(logs(1, (&command.SeedIDsCommand{Base: base}).Encode()))[0].(uint64); got != base {
		t.Fatalf("counter after the seed: %d, want %d", got, base)
	}
	// The next id minted is in the group's range.
	pid := f.ApplyBatch(logs(2, (&command.NewProducerIDCommand{}).Encode()))[0].(int64)
	if uint64(pid) != base {
		t.Fatalf("producer id %d after seeding %d", pid, base)
	}
	// A repeat, or a lower base, never lowers the counter.
	if got := f.ApplyBatch(logs(3, (&command.SeedIDsCommand{Base: 5}).Encode()))[0].(uint64); got != base+1 {
		t.Fatalf("counter after a lower seed: %d, want %d", got, base+1)
	}
	var meta store.Meta
	if err := f.store.View(func(tx *store.Tx) (err error) { meta, err = tx.Meta(); return err }); err != nil {
		t.Fatal(err)
	}
	if meta.NextID != base+1 {
		t.Fatalf("stored counter %d, want %d", meta.NextID, base+1)
	}
	back, err := DecodeAnswer((&command.SeedIDsCommand{}).Encode(), []byte("42"))
	if err != nil || back.(uint64) != 42 {
		t.Fatalf("DecodeAnswer: %v, %v", back, err)
	}
	if _, err := DecodeAnswer([]byte{200}, nil); err == nil {
		t.Fatal("DecodeAnswer of an unknown type: no error")
	}
}

// A keyed entry's answer, sent as JSON from the group's leader, is read
// back with its inner command's type.
func TestDecodeAnswerOfAKeyedEntry(t *testing.T) {
	entry := (&command.KeyedCommand{Key: "k", WindowMs: 1000, Inner: (&command.DeleteOffsetsCommand{Group: "g"}).Encode()}).Encode()
	got, err := DecodeAnswer(entry, []byte(`{"Replayed":true,"Mismatch":false,"NotKept":false,"Answer":3}`))
	if err != nil {
		t.Fatal(err)
	}
	r := got.(command.KeyedResult)
	if n, ok := r.Answer.(int); !r.Replayed || !ok || n != 3 {
		t.Fatalf("read back %#v", r)
	}
}

func TestFSM_PreferLeader(t *testing.T) {
	f := newFSM(t)
	pref := func() (string, bool) {
		var node string
		var found bool
		if err := f.store.View(func(tx *store.Tx) (err error) { node, found, err = tx.LeaderPreference(2); return err }); err != nil {
			t.Fatal(err)
		}
		return node, found
	}
	if a := f.ApplyBatch(logs(1, (&command.PreferLeaderCommand{Group: 2, Node: "3"}).Encode()))[0]; a != nil {
		t.Fatalf("answered %v, want nothing", a)
	}
	if node, found := pref(); !found || node != "3" {
		t.Fatalf("preference %q %v, want node 3", node, found)
	}
	f.ApplyBatch(logs(2, (&command.PreferLeaderCommand{Group: 2}).Encode()))
	if node, found := pref(); found {
		t.Fatalf("preference %q after it was cleared", node)
	}
}

// A classic group's record is kept at its newest generation and goes when
// the group is deleted (DeleteGroups, or an HTTP group delete).
func TestFSM_ClassicGroupRecordGoesWithTheGroup(t *testing.T) {
	f := newFSM(t)
	record := func() (store.ClassicGroup, bool) {
		var g store.ClassicGroup
		var found bool
		if err := f.store.View(func(tx *store.Tx) (err error) { g, found, err = tx.ClassicGroup("workers"); return err }); err != nil {
			t.Fatal(err)
		}
		return g, found
	}
	f.ApplyBatch(logs(1, (&command.SaveClassicGroupCommand{Group: classicGroup("workers", 3, "w-1", "w-2")}).Encode(),
		(&command.SaveClassicGroupCommand{Group: classicGroup("workers", 2, "w-1")}).Encode()))
	if g, found := record(); !found || g.Generation != 3 || len(g.Members) != 2 {
		t.Fatalf("record %+v (found %v), want generation 3 of two members", g, found)
	}
	f.ApplyBatch(logs(3, (&command.DeleteOffsetsCommand{Group: "workers", All: true}).Encode()))
	if g, found := record(); found {
		t.Fatalf("record %+v left after the group was deleted", g)
	}
}

// Group configs change one by one, are replaced whole by a replacing
// alter, stop growing at the cap, and go with their group.
func TestGroupConfigsAreAlteredAndGoWithTheirGroup(t *testing.T) {
	f := newFSM(t)
	config := func(group string) map[string]string {
		var cfg map[string]string
		if err := f.store.View(func(tx *store.Tx) (err error) { cfg, err = tx.GroupConfig(group); return err }); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	set := func(name, value string) command.GroupConfigChange {
		return command.GroupConfigChange{Name: name, Value: value}
	}
	f.ApplyBatch(logs(1,
		(&command.AlterGroupConfigCommand{Group: "g", Changes: []command.GroupConfigChange{set("a", "1"), set("b", "2")}}).Encode(),
		(&command.AlterGroupConfigCommand{Group: "g", Changes: []command.GroupConfigChange{{Name: "a", Remove: true}, set("c", "3")}}).Encode()))
	if got := config("g"); !maps.Equal(got, map[string]string{"b": "2", "c": "3"}) {
		t.Fatalf("after set and remove: %v", got)
	}
	f.ApplyBatch(logs(3, (&command.AlterGroupConfigCommand{Group: "g", Replace: true, Changes: []command.GroupConfigChange{set("d", "4")}}).Encode()))
	if got := config("g"); !maps.Equal(got, map[string]string{"d": "4"}) {
		t.Fatalf("after replace: %v", got)
	}
	many := make([]command.GroupConfigChange, command.MaxGroupConfigs+5)
	for i := range many {
		many[i] = set(fmt.Sprint("n", i), "v")
	}
	f.ApplyBatch(logs(4, (&command.AlterGroupConfigCommand{Group: "h", Changes: many}).Encode()))
	if n := len(config("h")); n != command.MaxGroupConfigs {
		t.Fatalf("%d configs kept, want the cap %d", n, command.MaxGroupConfigs)
	}
	f.ApplyBatch(logs(5, (&command.DeleteOffsetsCommand{Group: "g", All: true}).Encode()))
	if got := config("g"); got != nil {
		t.Fatalf("configs %v left after the group was deleted", got)
	}
}
