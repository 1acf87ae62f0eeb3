package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Regression: a second `waggle serve` on the data directory of a running
// node reported the directory as damaged ("store at …: Cannot acquire
// directory lock … Another process is using this Badger database"): badger
// turns the lock's EWOULDBLOCK into text, and the start-up check only knew
// bolt's lock timeout (the earlier regression test held the raft log, not
// the store). In a cluster the second process went on to "repair": it tried
// to move the directory aside and told the operator to empty it. It must
// say "in use", exit non-zero (75) and touch nothing, single node or
// cluster.
func TestSecondServeOnARunningNodesDataDirIsInUse(t *testing.T) {
	for _, mode := range []string{"single node", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			var running *node
			var check func()
			if mode == "single node" {
				running = startSingle(t)
				check = func() { running.push(pushItem{Queue: "inuse", TransactionID: "after", Payload: 1}) }
			} else {
				c := startCluster(t, 3)
				running = c.followers()[0]
				check = func() { c.waitCaughtUp(running) }
			}
			running.push(pushItem{Queue: "inuse", TransactionID: "before", Payload: 1})
			before := listTree(t, running.dataDir)

			// The same node again (same id, peers and data directory), on
			// other ports.
			second := &node{t: t, id: running.id, dataDir: running.dataDir, httpAddr: freeAddr(t), raftAddr: freeAddr(t),
				kafkaAddr: freeAddr(t), args: running.args, logPath: filepath.Join(t.TempDir(), "second.log")}
			second.start()
			select {
			case <-second.done():
			case <-time.After(30 * time.Second):
				t.Fatal("a second node started on a data directory in use")
			}
			log, _ := os.ReadFile(second.logPath)
			if code := second.cmd.ProcessState.ExitCode(); code != 75 {
				t.Errorf("the second node exited %d, want 75 (in use):\n%s", code, log)
			}
			if !strings.Contains(string(log), "in use by another process") || strings.Contains(string(log), "damaged") {
				t.Fatalf("the second node does not say 'in use' (or calls it damage):\n%s", log)
			}
			if after := listTree(t, running.dataDir); strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Fatalf("the data directory changed:\nbefore %v\nafter  %v", before, after)
			}
			check() // the running node still works
		})
	}
}

// listTree lists the folders under dir and the badger/raft files that a
// move-aside or a repair would add or take away (not their sizes, which a
// running node changes).
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, pattern := range []string{"*", "raft/*", "raft/snapshots/*"} {
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
	}
	return out
}

// Regression (issue 30): a node whose data directory vanished under it
// (deleted, or its disk unmounted) went on answering, and SIGTERM then
// hung in badger's close ("error flushing memtable … no such file or
// directory", retried forever). It must stop by itself, saying why, with
// a non-zero exit code.
func TestNodeStopsWhenItsDataDirectoryVanishes(t *testing.T) {
	n := newNode(t, 1)
	dir := filepath.Join(n.dataDir, "data")
	n.logPath = filepath.Join(t.TempDir(), "node.log") // outside the directory that goes
	n.args = []string{"--data-dir", dir}
	n.start()
	n.waitLeader()
	n.push(pushItem{Queue: "vanish", TransactionID: "before", Payload: 1})
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.done():
	case <-time.After(20 * time.Second):
		t.Fatal("the node still runs 20 s after its data directory vanished")
	}
	log, _ := os.ReadFile(n.logPath)
	if code := n.cmd.ProcessState.ExitCode(); code == 0 {
		t.Errorf("the node exited 0:\n%s", log)
	}
	if !strings.Contains(string(log), "is gone") {
		t.Fatalf("the node does not say its data directory is gone:\n%s", log)
	}
}
