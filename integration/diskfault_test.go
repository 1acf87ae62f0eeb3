package integration

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A follower whose disk fills up stops by itself with a clear reason
// before a write can fail half-way, the other two keep taking writes, it
// refuses to start while the disk is still full, and once space is freed
// it restarts and catches up with every write.
func TestFollowerWithFullDiskStopsAndCatchesUpAfterSpaceIsFreed(t *testing.T) {
	c := newCluster(t, 3)
	full := c.nodes[2]
	full.dataDir = mountTmpfs(t, "512m")
	full.logPath = filepath.Join(t.TempDir(), "node-3.log") // not on the disk that fills up
	c.start()

	// Leave the follower 72 MiB, 8 above the 64 MiB it stops at; the pushes
	// below write ~24 MiB of messages, more with the raft log.
	filler := filepath.Join(full.dataDir, "filler")
	var fs syscall.Statfs_t
	if err := syscall.Statfs(full.dataDir, &fs); err != nil {
		t.Fatal(err)
	}
	free := int64(fs.Bavail) * fs.Bsize
	if err := exec.Command("fallocate", "-l", fmt.Sprint(free-72<<20), filler).Run(); err != nil {
		t.Fatalf("fill the follower's disk: %v", err)
	}

	payload := strings.Repeat("x", 1024)
	const batches, perBatch = 400, 60
	for b := range batches {
		items := make([]pushItem, perBatch)
		for i := range items {
			items[i] = pushItem{Queue: "full", TransactionID: fmt.Sprintf("b%d-%d", b, i), Payload: payload}
		}
		c.pushUntilAccepted(20*time.Second, items...)
	}
	// The follower gave up: it exited, or it stopped applying.
	leader := c.leader()
	var lh healthAnswer
	getJSON(t, leader.url("/health"), &lh)
	select {
	case <-full.exited:
	default:
		var fh healthAnswer
		if getJSON(t, full.url("/health"), &fh) == http.StatusOK && fh.Raft.Applied >= lh.Raft.Commit {
			t.Fatalf("node %d applied everything on a full disk: the disk was not full", full.id)
		}
		full.stop()
	}
	if log, _ := os.ReadFile(full.logPath); !strings.Contains(string(log), "disk nearly full") {
		i := max(strings.Index(string(log), "panic"), strings.Index(string(log), "fatal error"), 0)
		t.Errorf("node %d's log does not say why it stopped:\n%.3000s", full.id, log[i:])
	}
	full.start()
	select {
	case <-full.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("node %d started on a full disk", full.id)
	}

	os.Remove(filler)
	full.start()
	c.waitCaughtUp(full)
	got := idSet(full.fetchAll("full", "Default"))
	if len(got) != batches*perBatch {
		t.Fatalf("node %d holds %d messages after freeing space, want %d", full.id, len(got), batches*perBatch)
	}
}

// mountTmpfs mounts a tmpfs of the given size on a new directory, for a
// disk that can fill up; it skips the test where mounting is not allowed.
func mountTmpfs(t *testing.T, size string) string {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}
