package raftnode

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/types"

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

// The WAL is reopened after every reopenAfter bytes appended (to let go of
// raft-wal's buffers of sealed segments); across reopens every entry, the
// first and last index and the stable keys read back, and a reopen after
// Close does not bring the log back.
func TestWALIsReopenedAsItGrows(t *testing.T) {
	// Segments of 1.5 MiB: some reopens come right after the append that
	// sealed one.
	dir := t.TempDir()
	l := &walLog{dir: dir, logger: hclog.NewNullLogger(), reopenAfter: 1 << 20, segmentBytes: 3 << 19}
	if err := l.reopen(); err != nil {
		t.Fatal(err)
	}
	if err := l.SetUint64(keyCurrentTerm, 7); err != nil {
		t.Fatal(err)
	}
	entry := func(i uint64) []byte { return bytes.Repeat([]byte{byte(i)}, 100<<10) }
	opened := map[any]bool{l.w: true}
	const n = 64 // 6.4 MiB: six reopens
	for i := uint64(1); i <= n; i += 2 {
		if err := l.StoreLogs([]*raft.Log{{Index: i, Term: 1, Data: entry(i)}, {Index: i + 1, Term: 1, Data: entry(i + 1)}}); err != nil {
			t.Fatal(err)
		}
		opened[l.w] = true
	}
	if len(opened) < 6 {
		t.Fatalf("the WAL was opened %d times over %d entries of 100 KiB, want 6 or more", len(opened), n)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.wal")); len(files) < 4 {
		t.Fatalf("%d segment files, want 4 or more: the test did not seal segments", len(files))
	}
	if err := l.DeleteRange(1, 10); err != nil {
		t.Fatal(err)
	}
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	if first != 11 || last != n {
		t.Fatalf("the log holds [%d, %d], want [11, %d]", first, last, n)
	}
	for i := first; i <= last; i++ {
		var e raft.Log
		if err := l.GetLog(i, &e); err != nil || !bytes.Equal(e.Data, entry(i)) {
			t.Fatalf("entry %d: %v (%d bytes)", i, err, len(e.Data))
		}
	}
	if term, err := l.GetUint64(keyCurrentTerm); err != nil || term != 7 {
		t.Fatalf("term %d, %v; want 7", term, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.StoreLog(&raft.Log{Index: n + 1, Term: 1, Data: entry(0)}); err == nil {
		t.Fatal("a closed log took an entry")
	}
}

// A crash right after the append that fills a segment, before raft-wal's
// goroutine makes the next one, leaves a log whose tail is sealed: raft-wal
// then refuses every append. The crash is played by closing the WAL
// without waiting for that goroutine, after every append, until an append
// is refused; walLog must take appends on that directory, and keep every
// entry.
func TestSealedTailLeftByACrashIsMended(t *testing.T) {
	dir := t.TempDir()
	const segmentBytes = 1 << 20
	entry := func(i uint64) []byte { return bytes.Repeat([]byte{byte(i)}, 64<<10) }
	open := func() *wal.WAL {
		w, err := wal.Open(dir, wal.WithSegmentSize(segmentBytes))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := open()
	var last uint64
	for sealed := false; !sealed; {
		if last > 200 {
			t.Fatal("200 appends of 64 KiB into 1 MiB segments, each followed by a crash, never left a sealed tail")
		}
		err := w.StoreLogs([]*raft.Log{{Index: last + 1, Term: 1, Data: entry(last + 1)}})
		switch {
		case errors.Is(err, types.ErrSealed):
			sealed = true
		case err != nil:
			t.Fatal(err)
		default:
			last++
		}
		if err := w.Close(); err != nil { // a crash: a pending rotation is dropped
			t.Fatal(err)
		}
		w = open()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	l := &walLog{dir: dir, logger: hclog.NewNullLogger(), reopenAfter: reopenEvery, segmentBytes: segmentBytes}
	if err := l.reopen(); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := last + 1; i <= last+20; i++ {
		if err := l.StoreLog(&raft.Log{Index: i, Term: 1, Data: entry(i)}); err != nil {
			t.Fatalf("append %d after the crash: %v", i, err)
		}
	}
	if err := l.reopen(); err != nil { // and the mended log opens again
		t.Fatal(err)
	}
	for i := uint64(1); i <= last+20; i++ {
		var e raft.Log
		if err := l.GetLog(i, &e); err != nil || !bytes.Equal(e.Data, entry(i)) {
			t.Fatalf("entry %d: %v (%d bytes)", i, err, len(e.Data))
		}
	}
}

// A crash in the middle of a mend, after the last entry was deleted and
// before it was appended again, must not lose it: the open appends the
// entry the mend saved.
func TestMendInterruptedByACrashKeepsTheEntry(t *testing.T) {
	dir := t.TempDir()
	l := &walLog{dir: dir, logger: hclog.NewNullLogger(), reopenAfter: reopenEvery}
	if err := l.reopen(); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 4, 1, 2, 3, 4, time.UTC)
	for i := uint64(1); i <= 3; i++ {
		e := &raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: []byte{byte(i), 7}, Extensions: []byte("x"), AppendedAt: at}
		if err := l.StoreLog(e); err != nil {
			t.Fatal(err)
		}
	}
	// The mend's first two steps, then the crash.
	var e raft.Log
	if err := l.w.GetLog(3, &e); err != nil {
		t.Fatal(err)
	}
	saved, err := encodeMendEntry(&e)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.w.Set(keyMendEntry, saved); err != nil {
		t.Fatal(err)
	}
	if err := l.w.DeleteRange(3, 3); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = &walLog{dir: dir, logger: hclog.NewNullLogger(), reopenAfter: reopenEvery}
	if err := l.reopen(); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var got raft.Log
	if err := l.GetLog(3, &got); err != nil {
		t.Fatalf("entry 3 after the interrupted mend: %v", err)
	}
	if got.Term != 2 || got.Type != raft.LogCommand || !bytes.Equal(got.Data, []byte{3, 7}) || string(got.Extensions) != "x" || !got.AppendedAt.Equal(at) {
		t.Fatalf("entry 3 came back as %+v", got)
	}
	if err := l.StoreLog(&raft.Log{Index: 4, Term: 2, Data: []byte{4}}); err != nil {
		t.Fatal(err)
	}
	if saved, _ := l.Get(keyMendEntry); len(saved) != 0 {
		t.Fatalf("the saved entry is still there (%d bytes) once the log holds it", len(saved))
	}
}
