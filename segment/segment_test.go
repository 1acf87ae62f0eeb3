package segment

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

type rec struct {
	pos  uint64
	body []byte
}

// appendN appends n random records, rolling to a new segment before one
// would take the active segment past segBytes.
func appendN(t *testing.T, s *Stream, n int, segBytes uint64) []rec {
	t.Helper()
	var out []rec
	for i := range n {
		body := make([]byte, 50+rand.IntN(200))
		for j := range body {
			body[j] = byte(rand.Uint32())
		}
		copy(body, fmt.Sprint(i))
		if segs, _ := s.Segments(); len(segs) > 0 && segs[len(segs)-1].Size+uint64(FrameBytes+len(body)) > segBytes {
			if err := s.Roll(); err != nil {
				t.Fatal(err)
			}
		}
		pos, err := s.Append(body)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec{pos, body})
	}
	return out
}

func checkAll(t *testing.T, s *Stream, recs []rec) {
	t.Helper()
	for i, r := range recs {
		got, err := s.Read(r.pos, uint32(len(r.body)))
		if err != nil || !bytes.Equal(got, r.body) {
			t.Fatalf("record %d at %d: err %v, equal %v", i, r.pos, err, bytes.Equal(got, r.body))
		}
	}
}

func TestAppendReadRollTruncate(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := d.Stream(7)
	recs := appendN(t, s, 100, 4096)
	checkAll(t, s, recs) // from the buffer and from sealed files
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	checkAll(t, s, recs)
	segs, _ := s.Segments()
	if len(segs) < 4 {
		t.Fatalf("100 records of ~150 bytes in 4 KiB segments made %d segments", len(segs))
	}
	for _, sg := range segs[:len(segs)-1] {
		if sg.Size > 4096 {
			t.Fatalf("sealed segment of %d bytes > 4096", sg.Size)
		}
	}
	committed, _ := s.End()
	more := appendN(t, s, 40, 4096) // appended, never committed
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}

	// A restart: a fresh Dir sees the files, and the uncommitted tail goes.
	d.Close()
	d2, _ := Open(d.Root())
	s2 := d2.Stream(7)
	if end, _ := s2.End(); end != committed+totalFrames(more) {
		t.Fatalf("reopened end %d, want %d", end, committed+totalFrames(more))
	}
	if err := s2.Truncate(committed); err != nil {
		t.Fatal(err)
	}
	if end, _ := s2.End(); end != committed {
		t.Fatalf("after truncate end %d, want %d", end, committed)
	}
	checkAll(t, s2, recs)
	if _, err := s2.Read(more[len(more)-1].pos, uint32(len(more[len(more)-1].body))); !errors.Is(err, ErrGone) {
		t.Fatalf("read past the truncated end: %v", err)
	}
	// Appends resume at the committed end, and a truncate past the end is
	// refused.
	again := appendN(t, s2, 10, 4096)
	if again[0].pos != committed {
		t.Fatalf("append after truncate at %d, want %d", again[0].pos, committed)
	}
	checkAll(t, s2, append(recs, again...))
	if err := s2.Truncate(committed + 1<<20); err == nil {
		t.Fatal("truncate to a point past the stream's end passed")
	}
}

func totalFrames(recs []rec) uint64 {
	var n uint64
	for _, r := range recs {
		n += uint64(FrameBytes + len(r.body))
	}
	return n
}

// A segment cut in the middle of a record (a crash while the file was
// written) or with flipped bits reads as damage, never as data.
func TestDamageIsRefused(t *testing.T) {
	d, _ := Open(t.TempDir())
	s := d.Stream(1)
	recs := appendN(t, s, 5, 1<<20)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	segs, _ := s.Segments()
	last := recs[len(recs)-1]
	if err := os.Truncate(segs[0].Path, int64(last.pos)+FrameBytes+3); err != nil {
		t.Fatal(err)
	}
	d.Close()
	d, _ = Open(d.Root())
	s = d.Stream(1)
	if _, err := s.Read(last.pos, uint32(len(last.body))); err == nil {
		t.Fatal("a record cut short read without error")
	}
	// Flip a byte in the first record's body.
	f, _ := os.OpenFile(segs[0].Path, os.O_RDWR, 0)
	f.WriteAt([]byte{recs[0].body[10] ^ 0xff}, int64(recs[0].pos)+FrameBytes+10)
	f.Close()
	if _, err := s.Read(recs[0].pos, uint32(len(recs[0].body))); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("flipped byte: %v, want ErrCorrupt", err)
	}
	checkAll(t, s, recs[1:len(recs)-1])
	// The recovery cut goes back to the last whole record the index knows.
	if err := s.Truncate(last.pos); err != nil {
		t.Fatal(err)
	}
	if end, _ := s.End(); end != last.pos {
		t.Fatalf("end %d after cut, want %d", end, last.pos)
	}
}

func TestDropBeforeAndInstall(t *testing.T) {
	d, _ := Open(t.TempDir())
	s := d.Stream(3)
	recs := appendN(t, s, 60, 2048)
	s.Flush()
	segs, _ := s.Segments()
	cut := segs[2].Base
	if err := s.DropBefore(cut); err != nil {
		t.Fatal(err)
	}
	left, _ := s.Segments()
	if len(left) != len(segs)-2 || left[0].Base != cut {
		t.Fatalf("after DropBefore(%d): %d segments from %d", cut, len(left), left[0].Base)
	}
	for _, r := range recs {
		_, err := s.Read(r.pos, uint32(len(r.body)))
		if (r.pos < cut) != errors.Is(err, ErrGone) {
			t.Fatalf("record at %d (cut %d): %v", r.pos, cut, err)
		}
	}
	// Dropping everything keeps the active segment, so the end is kept.
	end, _ := s.End()
	s.DropBefore(end)
	if e2, _ := s.End(); e2 != end {
		t.Fatalf("end moved from %d to %d", end, e2)
	}
	left, _ = s.Segments()
	if len(left) != 1 {
		t.Fatalf("%d segments left, want the active one", len(left))
	}

	// Install the remaining segments into another directory, as a
	// follower does from a snapshot.
	d2, _ := Open(t.TempDir())
	s2 := d2.Stream(3)
	for _, sg := range left {
		f, err := os.Open(sg.Path)
		if err != nil {
			t.Fatal(err)
		}
		if err := s2.Install(sg.Base, sg.Size, f, ""); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	var kept []rec
	for _, r := range recs {
		if r.pos >= left[len(left)-1].Base {
			kept = append(kept, r)
		}
	}
	checkAll(t, s2, kept)
	if e2, _ := s2.End(); e2 != end {
		t.Fatalf("installed stream ends at %d, want %d", e2, end)
	}
}

// A node restoring its own snapshot reads a sidecar through the
// snapshot's hard link of the very file it installs into; installing
// replaces the file, it never empties the one being read.
func TestInstallNeverEmptiesTheFileItReads(t *testing.T) {
	d, _ := Open(t.TempDir())
	s := d.Stream(4)
	appendN(t, s, 10, 512)
	s.Flush()
	segs, _ := s.Segments()
	path := s.SidecarPath(segs[0].Base)
	want := make([]byte, 4096)
	for i := range want {
		want[i] = byte(rand.IntN(256))
	}
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "snapshot-link.ref")
	if err := os.Link(path, link); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(link)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// No file of exactly this size is offered, so the bytes are written.
	if err := s.InstallSidecar(segs[0].Base, uint64(len(want)), src, ""); err != nil {
		t.Fatalf("installing from a link of the file itself: %v", err)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("installed %d bytes (%v), want the %d the sidecar held", len(got), err, len(want))
	}
}

// Verify reads every record up to the committed end: intact streams pass
// (an uncommitted tail past the end is not read), a flipped bit, a cut
// file or an end past the data fail.
func TestVerify(t *testing.T) {
	d, _ := Open(t.TempDir())
	s := d.Stream(5)
	appendN(t, s, 200, 4096)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	end, _ := s.End()
	if err := s.Verify(end); err != nil {
		t.Fatalf("an intact stream: %v", err)
	}
	segs, _ := s.Segments()
	if len(segs) < 3 {
		t.Fatalf("%d segments; the test needs 3 or more", len(segs))
	}
	// A record of the last segment past the committed end is not read.
	last := segs[len(segs)-1]
	if err := s.Verify(end - 1); err == nil {
		t.Fatal("an end inside a record passed")
	}
	if err := s.Verify(end + 1); err == nil {
		t.Fatal("an end past the data passed")
	}
	b, _ := os.ReadFile(segs[1].Path)
	b[len(b)/2] ^= 0x40
	os.WriteFile(segs[1].Path, b, 0o644)
	if err := s.Verify(end); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a flipped bit in %s: %v", segs[1].Path, err)
	}
	b[len(b)/2] ^= 0x40
	os.WriteFile(segs[1].Path, b[:len(b)-3], 0o644)
	if err := s.Verify(last.Base); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a segment cut short: %v", err)
	}
}
