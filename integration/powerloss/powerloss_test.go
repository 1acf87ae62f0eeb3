package powerloss

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"
)

// mount serves a fresh backing directory and returns it with its mount
// point; the test fails where FUSE cannot be mounted (not root, no
// /dev/fuse), since the power-loss tests need it.
func mount(t *testing.T) (f *FS, backing, mnt string) {
	t.Helper()
	backing, mnt = t.TempDir(), t.TempDir()
	f, err := Mount(backing, mnt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Unmount() })
	return f, backing, mnt
}

func write(t *testing.T, path string, data []byte, off int64, sync bool) {
	t.Helper()
	g, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := g.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPowerOffKeepsOnlyWhatWasSynced(t *testing.T) {
	f, backing, mnt := mount(t)
	a, b, c := filepath.Join(mnt, "a"), filepath.Join(mnt, "b"), filepath.Join(mnt, "c")
	write(t, a, []byte("durable."), 0, true)
	write(t, a, []byte("LOST"), 2, false)  // overwrites synced bytes
	write(t, a, []byte("+tail"), 8, false) // extends past the sync
	write(t, a, []byte("XX"), 1, false)    // half over bytes already saved
	write(t, b, []byte("never synced"), 0, false)
	write(t, c, []byte("0123456789"), 0, true)
	if err := os.Truncate(c, 4); err != nil { // by path, unsynced
		t.Fatal(err)
	}
	if err := os.Rename(a, filepath.Join(mnt, "a2")); err != nil {
		t.Fatal(err)
	}
	// Visible while the power is on.
	if got, _ := os.ReadFile(filepath.Join(mnt, "a2")); string(got) != "dXXOSTe.+tail" {
		t.Fatalf("a2 before the power loss: %q", got)
	}
	loss, err := f.PowerOff()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a2": "durable.", "b": "", "c": "0123456789"} {
		if got, err := os.ReadFile(filepath.Join(backing, name)); err != nil || string(got) != want {
			t.Errorf("%s after the power loss: %q (%v), want %q", name, got, err, want)
		}
	}
	// a: LOST, +tail and the unsaved byte of XX; b: its write; c: the truncation.
	if loss.Files != 3 || loss.Changes != 5 {
		t.Errorf("loss %+v, want 3 files and 5 changes", loss)
	}
}

func TestPowerOffRefusesWritesAndMmapNeedsMsync(t *testing.T) {
	f, backing, mnt := mount(t)
	p := filepath.Join(mnt, "m")
	write(t, p, make([]byte, 8192), 0, true)
	g, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	m, err := syscall.Mmap(int(g.Fd()), 0, 8192, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	copy(m, "synced by msync")
	if _, _, errno := syscall.Syscall(syscall.SYS_MSYNC, uintptr(unsafePointer(m)), 4096, syscall.MS_SYNC); errno != 0 {
		t.Fatal(errno)
	}
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	copy(m[4096:], "only in the page cache")
	if _, err := f.PowerOff(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteAt([]byte("x"), 0); err == nil {
		t.Error("a write after the power loss succeeded")
	}
	syscall.Munmap(m)
	got, err := os.ReadFile(filepath.Join(backing, "m"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(got, []byte("synced by msync")) || !bytes.Equal(got[4096:4096+22], make([]byte, 22)) {
		t.Errorf("after the power loss: %q … %q", got[:15], got[4096:4096+22])
	}
}

func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }

// A sparse file cut short comes back whole, and the undo record holds
// its data, not its holes.
func TestPowerOffUndoesATruncationOfASparseFile(t *testing.T) {
	f, backing, mnt := mount(t)
	p := filepath.Join(mnt, "sparse")
	write(t, p, []byte("head"), 0, false)
	write(t, p, []byte("tail"), 1<<30, true) // 1 GiB, nearly all hole
	if err := os.Truncate(p, 2); err != nil {
		t.Fatal(err)
	}
	loss, err := f.PowerOff()
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.Open(filepath.Join(backing, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	head, tail := make([]byte, 4), make([]byte, 4)
	g.ReadAt(head, 0)
	g.ReadAt(tail, 1<<30)
	if string(head) != "head" || string(tail) != "tail" {
		t.Errorf("after the power loss: %q … %q", head, tail)
	}
	if loss.Bytes > 4<<20 {
		t.Errorf("the undo record held %d bytes of a file with 8 bytes of data", loss.Bytes)
	}
}

// Fail makes writes and fsyncs of the files it matches answer EIO, and
// only those; a failed fsync makes nothing durable, and Clear ends it.
func TestFailAnswersEIOOnMatchingFilesUntilClear(t *testing.T) {
	f, backing, mnt := mount(t)
	bad, good := filepath.Join(mnt, "dir", "bad.log"), filepath.Join(mnt, "good.log")
	if err := os.Mkdir(filepath.Join(mnt, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	g, err := os.OpenFile(bad, os.O_RDWR|os.O_CREATE, 0o644) // kept open from its creation
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.WriteAt([]byte("synced."), 0); err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // match runs on the file system's goroutines
	var asked []string
	f.Fail(OpFsync, func(path string) bool {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, path)
		return path == "dir/bad.log"
	})
	if _, err := g.WriteAt([]byte("unsynced"), 7); err != nil {
		t.Fatalf("a write with only fsync failing: %v", err)
	}
	if err := g.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync of a failing file: %v, want EIO", err)
	}
	write(t, good, []byte("fine"), 0, true) // another file syncs
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(asked, "dir/bad.log") {
		t.Errorf("match was asked about %q, not the file's path relative to the mount", asked)
	}

	f.Fail(OpWrite, func(path string) bool { return strings.HasSuffix(path, "bad.log") })
	if _, err := g.WriteAt([]byte("X"), 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("write of a failing file: %v, want EIO", err)
	}
	if err := g.Sync(); err != nil {
		t.Fatalf("fsync with only writes failing: %v", err)
	}
	if got, _ := os.ReadFile(bad); string(got) != "synced.unsynced" {
		t.Fatalf("after a failed write the file holds %q", got)
	}
	f.Fail(OpWrite|OpFsync, func(string) bool { return true })
	if _, err := g.WriteAt([]byte("lost"), 15); !errors.Is(err, syscall.EIO) {
		t.Fatalf("write with both failing: %v", err)
	}
	f.Clear()
	if _, err := g.WriteAt([]byte("+after"), 15); err != nil {
		t.Fatalf("write after Clear: %v", err)
	}
	if _, err := f.PowerOff(); err != nil {
		t.Fatal(err)
	}
	// The fsync that failed made nothing durable; the one that worked
	// (with only writes failing) did; the write after Clear was never synced.
	if got, _ := os.ReadFile(filepath.Join(backing, "dir", "bad.log")); string(got) != "synced.unsynced" {
		t.Errorf("after the power loss: %q, want %q", got, "synced.unsynced")
	}
}
