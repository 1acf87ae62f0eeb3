package raftfsm

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// A data directory written by a release that kept the raft log in
// raft-boltdb is moved to the WAL on the first start: every entry, the
// term, the vote and waggle's own stable key come along, and the old file
// goes.
func TestBoltLogIsMovedToTheWAL(t *testing.T) {
	raftDir := t.TempDir()
	old, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(raftDir, legacyLogDB)})
	if err != nil {
		t.Fatal(err)
	}
	var entries []*raft.Log
	for i := uint64(5); i <= 300; i++ {
		entries = append(entries, &raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: Seal(push(int64(i), item("q", "p", "x", byte(i))))})
	}
	if err := old.StoreLogs(entries); err != nil {
		t.Fatal(err)
	}
	old.SetUint64(keyCurrentTerm, 7)
	old.SetUint64(keyLastVoteTerm, 6)
	old.Set(keyLastVoteCand, []byte("node-2"))
	old.SetUint64(keyNoVoteThroughTerm, 5)
	old.Close()

	logs, err := openLogStore(raftDir, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	if _, err := os.Stat(filepath.Join(raftDir, legacyLogDB)); !os.IsNotExist(err) {
		t.Fatalf("the old log file is still there: %v", err)
	}
	first, _ := logs.FirstIndex()
	last, _ := logs.LastIndex()
	if first != 5 || last != 300 {
		t.Fatalf("moved log holds %d..%d, want 5..300", first, last)
	}
	var l raft.Log
	for _, want := range entries {
		if err := logs.GetLog(want.Index, &l); err != nil || l.Term != want.Term || !bytes.Equal(l.Data, want.Data) {
			t.Fatalf("entry %d: %v, term %d", want.Index, err, l.Term)
		}
	}
	for k, want := range map[string]uint64{string(keyCurrentTerm): 7, string(keyLastVoteTerm): 6, string(keyNoVoteThroughTerm): 5} {
		if got, err := logs.GetUint64([]byte(k)); err != nil || got != want {
			t.Fatalf("%s = %d, %v; want %d", k, got, err, want)
		}
	}
	if cand, _ := logs.Get(keyLastVoteCand); string(cand) != "node-2" {
		t.Fatalf("vote candidate %q", cand)
	}
	// The repair reads the term and vote from the WAL's meta file as well.
	logs.Close()
	term, voteTerm, cand, err := readTermAndVote(raftDir)
	if err != nil || term != 7 || voteTerm != 6 || string(cand) != "node-2" {
		t.Fatalf("readTermAndVote: %d %d %q %v", term, voteTerm, cand, err)
	}
}
