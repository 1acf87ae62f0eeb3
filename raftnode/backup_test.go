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
	"github.com/waggle-mq/waggle/fsm"
)

// backupFile writes a backup of f to memory.
func backupFile(t *testing.T, f *fsm.FSM) []byte {
	t.Helper()
	b, err := f.Backup(time.UnixMilli(1_700_000_000_000))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	var buf bytes.Buffer
	n, err := b.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("wrote %d bytes (%d counted): %v", buf.Len(), n, err)
	}
	return buf.Bytes()
}

// verify feeds file to a verifier in chunks of size step.
func verify(file []byte, step int) (fsm.BackupHeader, error) {
	v := fsm.NewBackupVerifier()
	for i := 0; i < len(file); i += step {
		v.Write(file[i:min(i+step, len(file))])
	}
	return v.Check()
}

func TestBackupRoundTrip(t *testing.T) {
	src := newFSM(t)
	var entries [][]byte
	for i := range 20 {
		entries = append(entries, randomPush(int64(1000+i), "q", i*50, 50))
	}
	src.ApplyBatch(logs(1, entries...))
	file := backupFile(t, src)
	// Writes after the backup is taken are not in it.
	b, err := src.Backup(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	src.ApplyBatch(logs(21, randomPush(5000, "q", 9000, 20)))
	var late bytes.Buffer
	b.WriteTo(&late)
	b.Release()
	bodyOf := func(b []byte) []byte { return b[fsm.BackupHeaderSize : len(b)-fsm.BackupTrailerSize] }
	if !bytes.Equal(bodyOf(late.Bytes()), bodyOf(file)) {
		t.Fatal("a backup taken before an apply holds that apply's writes")
	}

	for _, step := range []int{1, 7, 19, 20, 21, 4096, len(file)} {
		h, err := verify(file, step)
		if err != nil {
			t.Fatalf("chunks of %d: %v", step, err)
		}
		if h.Index != 20 || h.Term != 1 || h.Created.UnixMilli() != 1_700_000_000_000 {
			t.Fatalf("header %+v", h)
		}
	}

	dir := filepath.Join(t.TempDir(), "restored")
	body, err := fsm.BackupBody(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	if err := RestoreBackup(dir, body, fsm.BackupHeader{Index: 20, Term: 1}, Peer{ID: "3", Addr: "127.0.0.1:7403"}); err != nil {
		t.Fatal(err)
	}

	// Raft finds a snapshot at the backup's index with this node alone,
	// and its term.
	snaps, err := newSnapshotStore(filepath.Join(dir, "raft"), 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	list, err := snaps.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("snapshots %v: %v", list, err)
	}
	servers := list[0].Configuration.Servers
	if list[0].Index != 20 || list[0].Term != 1 || len(servers) != 1 || servers[0].ID != "3" || servers[0].Address != "127.0.0.1:7403" {
		t.Fatalf("snapshot %+v", list[0])
	}
	wal, err := openLogStore(filepath.Join(dir, "raft"), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	term, err := wal.GetUint64(keyCurrentTerm)
	wal.Close()
	if err != nil || term != 1 {
		t.Fatalf("current term %d: %v", term, err)
	}
	if err := VerifyDataDir(dir); err != nil {
		t.Fatalf("the restored directory fails the check a start runs: %v", err)
	}

	restored, err := fsm.NewFSM(openStore(t, filepath.Join(dir, "state")))
	if err != nil {
		t.Fatal(err)
	}
	if restored.AppliedIndex() != 20 {
		t.Fatalf("restored store applied %d", restored.AppliedIndex())
	}
	want := newFSM(t)
	want.ApplyBatch(logs(1, entries...))
	if !bytes.Equal(snapshotBytes(t, restored), snapshotBytes(t, want)) {
		t.Fatal("the restored store differs from the state backed up")
	}
}

func TestBackupVerifierRefusesDamage(t *testing.T) {
	src := newFSM(t)
	src.ApplyBatch(logs(1, randomPush(1000, "q", 0, 30)))
	file := backupFile(t, src)
	flip := func(i int) []byte {
		b := bytes.Clone(file)
		b[i] ^= 0x10
		return b
	}
	cases := map[string]struct {
		file []byte
		want string
	}{
		"empty":            {nil, "not a waggle backup"},
		"header only":      {file[:fsm.BackupHeaderSize], "truncated"},
		"cut in the body":  {file[:len(file)/2], "truncated"},
		"cut in trailer":   {file[:len(file)-3], "truncated"},
		"bit in the body":  {flip(len(file) / 2), "CRC-32C"},
		"bit in the index": {flip(14), "CRC-32C"},
		"bit in the CRC":   {flip(len(file) - 1), "CRC-32C"},
		"bit in length":    {flip(len(file) - 6), "trailer says"},
		"bad magic":        {flip(0), "not a waggle backup"},
		"bytes appended":   {append(bytes.Clone(file), 0, 0, 0), "truncated"},
	}
	for name, c := range cases {
		_, err := verify(c.file, 13)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

func TestRestoreBackupRefusesANonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := RestoreBackup(dir, bytes.NewReader(nil), fsm.BackupHeader{Index: 1, Term: 1}, Peer{ID: "1", Addr: "127.0.0.1:7400"})
	if !errors.Is(err, ErrDataDirNotEmpty) {
		t.Fatalf("restore into a non-empty dir: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "keep")); err != nil || string(b) != "x" {
		t.Fatal("the file in the directory was touched")
	}
}
