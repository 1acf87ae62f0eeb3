package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestDiskFaultSortsErrors(t *testing.T) {
	for _, c := range []struct {
		name     string
		err      error
		op, path string
		fault    bool
	}{
		{"fsync", fmt.Errorf("segment: seal: %w", &fs.PathError{Op: "sync", Path: "/d/1.seg", Err: syscall.EIO}), "fsync", "/d/1.seg", true},
		{"write", &fs.PathError{Op: "write", Path: "/d/x.wal", Err: syscall.ENOSPC}, "write", "/d/x.wal", true},
		{"bare EIO (bbolt's fdatasync)", syscall.EIO, "write or fsync", "", true},
		{"read EIO", &fs.PathError{Op: "read", Path: "/d/x", Err: syscall.EIO}, "read", "/d/x", true},
		{"read error", &fs.PathError{Op: "open", Path: "/d/x", Err: syscall.ENOENT}, "", "", false},
		{"other", errors.New("raft log: closed"), "", "", false},
		{"nil", nil, "", "", false},
		{"damage", &Fault{Op: "read", Path: "/d/1.seg", Err: errors.New("crc"), Damage: true}, "", "", false},
	} {
		op, path, ok := DiskFault(c.err)
		if op != c.op || path != c.path || ok != c.fault {
			t.Errorf("%s: %q %q %v, want %q %q %v", c.name, op, path, ok, c.op, c.path, c.fault)
		}
	}
}

// Each fault reaches the handler once, as a *Fault that errors.Is knows,
// and the line it makes names the operation, the file and the error.
func TestReportHandsFaultsToTheHandler(t *testing.T) {
	var got []*Fault
	HandleFaults(func(f *Fault) { got = append(got, f) })
	defer HandleFaults(nil)
	err := ReportDiskFault(fmt.Errorf("wal: %w", &fs.PathError{Op: "sync", Path: "/d/raft/wal/1.wal", Err: syscall.EIO}), "/d/raft/wal")
	if !errors.Is(err, ErrDiskFault) || errors.Is(err, ErrDamageFound) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("%v is not a disk fault", err)
	}
	if want := "fsync /d/raft/wal/1.wal: input/output error"; err.Error() != want {
		t.Errorf("%q, want %q", err, want)
	}
	if again := ReportDiskFault(fmt.Errorf("up the stack: %w", err), "/elsewhere"); !errors.Is(again, ErrDiskFault) || len(got) != 1 {
		t.Errorf("a fault passed up was reported again: %d reports", len(got))
	}
	if err := ReportDiskFault(errors.New("no"), "/d"); errors.Is(err, ErrDiskFault) || len(got) != 1 {
		t.Errorf("an error that is no disk fault was reported")
	}
	err = ReportDamage(errors.New("checksum"), "/d/state/segments/1/0.seg", "/d/state")
	if !errors.Is(err, ErrDamageFound) || errors.Is(err, ErrDiskFault) || len(got) != 2 || got[1].Marker != "/d/state/damage-found" {
		t.Fatalf("damage: %v, reports %+v", err, got)
	}
}

// A damaged segment record read through the store is reported as damage
// with the marker in the store's directory, and never returned as data.
func TestDamagedSegmentReadIsReported(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got []*Fault
	HandleFaults(func(f *Fault) { got = append(got, f) })
	defer HandleFaults(nil)
	st := s.segs.Stream(7)
	pos, _ := st.Append([]byte("a record of some length"))
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	path := st.Path(0)
	b, _ := os.ReadFile(path)
	b[len(b)-2] ^= 0x04
	os.WriteFile(path, b, 0o644)
	if _, err := st.ReadRecord(pos); err == nil {
		t.Fatal("a damaged record was read")
	}
	if len(got) != 1 || !got[0].Damage || got[0].Path != path || got[0].Marker != filepath.Join(dir, DamageMarkerFile) {
		t.Fatalf("reported %+v", got)
	}
}
