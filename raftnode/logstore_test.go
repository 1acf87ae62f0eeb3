package raftnode

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
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
		entries = append(entries, &raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: command.Seal(push(int64(i), item("q", "p", "x", byte(i))))})
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

// The start-up check reads the raft log entries a restart applies again
// (past the store's applied index, and at least the newest 4,096); a
// damaged entry before those is left to `waggle verify`, which reads all.
func TestStartCheckReadsTheLogARestartApplies(t *testing.T) {
	for _, c := range []struct {
		applied   uint64
		atStartOK bool
	}{
		{applied: 100, atStartOK: false},  // entry 200 is applied again at restart
		{applied: 9_000, atStartOK: true}, // entry 200 is behind the store and the tail
	} {
		dir := t.TempDir()
		newDataDir(t, dir)
		st := openStore(t, filepath.Join(dir, "state"))
		tx := st.BeginWrite()
		tx.PutMeta(store.Meta{AppliedIndex: c.applied, NextID: 1})
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		st.Close()
		logs, err := openLogStore(filepath.Join(dir, "raft"), hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		var entries []*raft.Log
		for i := uint64(1); i <= 10_000; i++ {
			data := command.Seal(push(int64(i), item("q", "p", "x", 1)))
			if i == 200 {
				data[len(data)/2] ^= 0x10
			}
			entries = append(entries, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: data})
		}
		if err := logs.StoreLogs(entries); err != nil {
			t.Fatal(err)
		}
		logs.Close()
		if err := VerifyDataDirAtStart(dir); (err == nil) != c.atStartOK {
			t.Errorf("applied %d: start-up check answered %v", c.applied, err)
		}
		if err := VerifyDataDir(dir); err == nil || !strings.Contains(err.Error(), "entry 200") {
			t.Errorf("applied %d: full check answered %v, want entry 200", c.applied, err)
		}
	}
}
