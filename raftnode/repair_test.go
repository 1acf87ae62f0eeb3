package raftnode

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/waggle-mq/waggle/fsm"
	"github.com/waggle-mq/waggle/store"
)

// newDataDir makes a healthy stopped node's data directory: a store (with
// cmds applied to it, as entries from index 1) and a raft log holding a
// term.
func newDataDir(t *testing.T, dir string, cmds ...[]byte) {
	t.Helper()
	st, err := store.Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) > 0 {
		sm, err := fsm.NewFSM(st)
		if err != nil {
			t.Fatal(err)
		}
		sm.ApplyBatch(logs(1, cmds...))
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "raft"), 0o755); err != nil {
		t.Fatal(err)
	}
	logs, err := openLogStore(filepath.Join(dir, "raft"), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(logs.SetUint64(keyCurrentTerm, 3), logs.Close()); err != nil {
		t.Fatal(err)
	}
}

// Regression: the start-up check of a second `waggle serve` on the data
// directory of a running node called the running node's badger lock
// damage ("store at …: Cannot acquire directory lock … Another process is
// using this Badger database"), because badger formats the EWOULDBLOCK it
// met into text and the check only knew bolt's lock timeout; in a cluster
// the node then tried to move the directory aside and told the operator to
// empty it. A held store is "in use".
func TestVerifyDataDirHeldByARunningStoreIsInUse(t *testing.T) {
	dir := t.TempDir()
	newDataDir(t, dir)
	held, err := store.Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	if err := VerifyDataDir(dir); !errors.Is(err, ErrDataDirInUse) {
		t.Fatalf("VerifyDataDir on a held store: %v, want ErrDataDirInUse", err)
	}
	// The error badger itself returns for the lock is classified the same
	// way (it is text only: no errors.Is chain to follow).
	badgerErr := store.Verify(filepath.Join(dir, "state"))
	if badgerErr == nil {
		t.Fatal("badger opened a store another handle holds")
	}
	if got := notDamage(badgerErr); got != ErrDataDirInUse {
		t.Fatalf("notDamage(%q) = %v, want ErrDataDirInUse", badgerErr, got)
	}
}

// A raft log held by a running node is "in use" too (the lock on the
// WAL's meta file).
func TestVerifyDataDirHeldRaftLogIsInUse(t *testing.T) {
	dir := t.TempDir()
	newDataDir(t, dir)
	held, err := openLogStore(filepath.Join(dir, "raft"), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := VerifyDataDir(dir); !errors.Is(err, ErrDataDirInUse) {
		t.Fatalf("VerifyDataDir on a held raft log: %v, want ErrDataDirInUse", err)
	}
}

// Regression: a data directory this process may not read or write (owned
// by another user, say after one start with sudo) failed the start-up
// check with badger's "permission denied", which was counted as damage: a
// node of a cluster would have moved the healthy directory aside. It is
// ErrDataDirUnreadable, never damage. Root ignores permission bits, so as
// root the check runs in a child process as the user nobody.
func TestVerifyDataDirNotReadableIsNotDamage(t *testing.T) {
	base, err := os.MkdirTemp("", "waggle-perm-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	dir := filepath.Join(base, "data")
	newDataDir(t, dir)
	if os.Geteuid() != 0 {
		if err := os.Chmod(filepath.Join(dir, "raft", walDir, walMetaFile), 0); err != nil {
			t.Fatal(err)
		}
		if err := VerifyDataDir(dir); !errors.Is(err, ErrDataDirUnreadable) {
			t.Fatalf("VerifyDataDir with an unreadable raft log: %v, want ErrDataDirUnreadable", err)
		}
		return
	}
	out := verifyAsNobody(t, base, dir)
	for _, want := range []string{"VerifyDataDir: unreadable", "badger: unreadable"} {
		if !strings.Contains(out, want) {
			t.Fatalf("checked as nobody, want %q in:\n%s", want, out)
		}
	}
}

// verifyAsNobody runs TestVerifyDataDirChild of a copy of this test binary
// (the build directory is private to root) as uid 65534 on dir.
func verifyAsNobody(t *testing.T, base, dir string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "raftnode.test")
	if err := copyFile(self, bin); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^TestVerifyDataDirChild$", "-test.v")
	cmd.Env = append(os.Environ(), "WAGGLE_TEST_VERIFY_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil && !strings.Contains(string(out), "VerifyDataDir:") {
		t.Skipf("cannot run the check as nobody here: %v %s", err, out)
	}
	return string(out)
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// TestVerifyDataDirChild is the child of TestVerifyDataDirNotReadableIsNotDamage:
// it prints how VerifyDataDir, and badger itself, see the directory.
func TestVerifyDataDirChild(t *testing.T) {
	dir := os.Getenv("WAGGLE_TEST_VERIFY_DIR")
	if dir == "" {
		t.Skip("runs only as the child of TestVerifyDataDirNotReadableIsNotDamage")
	}
	fmt.Println("VerifyDataDir:", kindOf(VerifyDataDir(dir)))
	fmt.Println("badger:", kindOf(notDamageOrSelf(store.Verify(filepath.Join(dir, "state")))))
}

func notDamageOrSelf(err error) error {
	if kind := notDamage(err); kind != nil {
		return kind
	}
	return err
}

func kindOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrDataDirUnreadable):
		return "unreadable: " + err.Error()
	case errors.Is(err, ErrDataDirInUse):
		return "in use: " + err.Error()
	default:
		return "damage: " + err.Error()
	}
}

// Regression: `waggle verify` on a path that does not exist, or on an
// empty folder, printed "ok" (every check skipped what it did not find),
// so a backup check with a typo passed. Both are ErrNoData.
func TestVerifyDataDirMissingOrEmptyIsNoData(t *testing.T) {
	empty := t.TempDir()
	for _, dir := range []string{filepath.Join(empty, "typo"), empty} {
		if err := VerifyDataDir(dir); !errors.Is(err, ErrNoData) {
			t.Errorf("VerifyDataDir(%s) = %v, want ErrNoData", dir, err)
		}
	}
	healthy := t.TempDir()
	newDataDir(t, healthy)
	if err := VerifyDataDir(healthy); err != nil {
		t.Fatalf("VerifyDataDir on a healthy directory: %v", err)
	}
}

// waggle verify reads every segment record; the start-up check does not
// (a damaged record is found when it is read). A flipped bit in a segment
// is damage to the first and passes the second.
func TestVerifyDataDirReadsSegmentsOnDemandOnly(t *testing.T) {
	dir := t.TempDir()
	newDataDir(t, dir, randomPush(1000, "q", 0, 50))
	if err := VerifyDataDir(dir); err != nil {
		t.Fatalf("an intact directory: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "state", "segments", "*", "*.seg"))
	if len(files) != 1 {
		t.Fatalf("segment files: %v", files)
	}
	b, _ := os.ReadFile(files[0])
	b[len(b)/2] ^= 0x08
	if err := os.WriteFile(files[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := VerifyDataDirAtStart(dir); err != nil {
		t.Fatalf("the start-up check read the data: %v", err)
	}
	if err := VerifyDataDir(dir); err == nil || !strings.Contains(err.Error(), "damaged record") {
		t.Fatalf("waggle verify of a flipped bit in a segment: %v", err)
	}
}
