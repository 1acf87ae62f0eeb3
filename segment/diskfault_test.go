package segment

import (
	"errors"
	"io/fs"
	"os"
	"testing"
)

// A damaged record and a failed write both reach the fault handler, with
// the segment file's path, before the call returns the error.
func TestFaultsReachTheHandler(t *testing.T) {
	d, _ := Open(t.TempDir())
	type fault struct {
		path string
		err  error
	}
	var got []fault
	d.OnFault(func(path string, err error) { got = append(got, fault{path, err}) })
	s := d.Stream(1)
	recs := appendN(t, s, 3, 1<<20)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	segs, _ := s.Segments()
	f, _ := os.OpenFile(segs[0].Path, os.O_RDWR, 0)
	f.WriteAt([]byte{recs[1].body[3] ^ 0x04}, int64(recs[1].pos)+FrameBytes+3)
	f.Close()
	checkAll(t, s, recs[:1])
	if len(got) != 0 {
		t.Fatalf("a sound read reported %v", got)
	}
	if _, err := s.ReadRecord(recs[1].pos); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("flipped bit: %v, want ErrCorrupt", err)
	}
	if len(got) != 1 || got[0].path != segs[0].Path || !errors.Is(got[0].err, ErrCorrupt) {
		t.Fatalf("reported %+v, want ErrCorrupt in %s", got, segs[0].Path)
	}

	// A write the file refuses (here: a descriptor open read-only).
	got = nil
	ro, err := os.Open(segs[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.active.Close()
	s.active = ro
	s.mu.Unlock()
	if _, err := s.Append([]byte("more")); err != nil {
		t.Fatal(err)
	}
	err = s.Flush()
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Op != "write" {
		t.Fatalf("flush into a read-only file: %v, want a failed write", err)
	}
	if len(got) != 1 || got[0].path != segs[0].Path || !errors.Is(got[0].err, pe) {
		t.Fatalf("reported %+v, want the failed write of %s", got, segs[0].Path)
	}
}
