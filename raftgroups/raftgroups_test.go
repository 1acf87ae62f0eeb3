package raftgroups

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// Group g prefers the voter at position g among the voters sorted by id as
// numbers (node 10 after node 9), skipping non-voters.
func TestPreferredSpreadsGroupsOverVoters(t *testing.T) {
	servers := []raft.Server{
		{ID: "10", Suffrage: raft.Voter}, {ID: "2", Suffrage: raft.Voter},
		{ID: "7", Suffrage: raft.Nonvoter}, {ID: "9", Suffrage: raft.Voter},
	}
	for g, want := range []raft.ServerID{"2", "9", "10", "2", "9"} {
		got, ok := Preferred(servers, uint32(g))
		if !ok || got.ID != want {
			t.Errorf("group %d prefers %q, want %q", g, got.ID, want)
		}
	}
	if _, ok := Preferred([]raft.Server{{ID: "1", Suffrage: raft.Nonvoter}}, 0); ok {
		t.Error("a group without voters has a preferred leader")
	}
}

// The group count is written when data groups are first made and checked
// on every start after; a directory made without data groups (a raft log,
// no record) counts as one group.
func TestCheckCountIsFixedAtCreation(t *testing.T) {
	dir := t.TempDir()
	if err := CheckCount(dir, 3); err != nil {
		t.Fatal(err)
	}
	if err := CheckCount(dir, 3); err != nil {
		t.Fatalf("the same count again: %v", err)
	}
	for _, other := range []int{1, 2, 5} {
		if err := CheckCount(dir, other); err == nil || !strings.Contains(err.Error(), "created with 3 raft groups") {
			t.Fatalf("count %d on a directory of 3: %v", other, err)
		}
	}
	old := t.TempDir()
	if err := os.Mkdir(filepath.Join(old, "raft"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckCount(old, 1); err != nil {
		t.Fatal(err)
	}
	if err := CheckCount(old, 3); err == nil || !strings.Contains(err.Error(), "created with 1 raft groups") {
		t.Fatalf("3 groups on a directory made with one: %v", err)
	}
	if _, err := os.Stat(filepath.Join(old, "groups")); !os.IsNotExist(err) {
		t.Fatalf("a single group made a groups directory: %v", err)
	}
}
