package integration

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// A follower killed while it restores a snapshot comes back with the whole
// state, not the part its restore had written. Badger adds the tables of
// restored keys to the store as it builds them, so a kill in the middle
// leaves part of the keys in: the follower must restore again before it
// serves, however often it is killed doing so. The state is 32 MiB of KV
// rows (random, incompressible), so a restore builds about 16 tables; each
// kill lands once 8 new ones are on disk.
//
// Two restores are killed: one of a snapshot the leader sends (raft sends
// it again: the follower's log cannot take the entries after a snapshot
// it never installed), and the one a node does when it starts with its
// store behind its own snapshot, as a machine crash leaves badger, which
// does not fsync. Nothing sends that one again: a follower that came back
// claiming the snapshot's index over part of its keys would serve them.
func TestFollowerKilledWhileRestoringComesBackWhole(t *testing.T) {
	c := startCluster(t, 3, "--raft-trailing-logs", "2")
	f := c.followers()[0]
	f.kill9()
	leader := c.leader()
	const calls, perCall = 128, 250 // bodies under the 1 MiB limit
	want := map[string]string{}
	raw := make([]byte, 750)
	for call := range calls {
		var ops []map[string]any
		for i := range perCall {
			rand.Read(raw)
			key, value := fmt.Sprintf("k%06d", call*perCall+i), base64.StdEncoding.EncodeToString(raw)
			want[key] = value
			ops = append(ops, map[string]any{"op": "put", "ns": "big", "key": key, "value": value, "forever": true})
		}
		if status := postJSON(t, leader.url("/api/v1/kv"), map[string]any{"operations": ops}, nil); status != http.StatusOK {
			t.Fatalf("KV put %d: status %d", call, status)
		}
	}
	c.snapshotAll() // the follower now needs the snapshot: the log it lacks is gone

	stateDir := filepath.Join(f.dataDir, "state")
	// killMidRestore starts the follower and kills it once a restore has
	// written 8 tables. It says false, leaving the follower running, when
	// the follower answered /health first and serving says that is
	// possible (a follower that serves without restoring).
	killMidRestore := func(what string, serving bool) bool {
		began := time.Now()
		f.start()
		// Polled every few milliseconds, not waitFor's 50: the restore
		// writes its tables in under a second.
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			found := tablesSince(t, stateDir, began)
			if found >= 8 || f.hasExited() {
				f.kill9()
				t.Logf("%s: killed the follower with %d new tables written", what, found)
				return true
			}
			if serving && getJSON(t, f.url("/health"), nil) == http.StatusOK {
				t.Logf("%s: the follower came up serving without restoring", what)
				return false
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d new badger tables after a minute, waiting for 8\n%s", what, found, f.logTail())
			}
		}
	}
	killMidRestore("the restore of the snapshot the leader sent", false)
	f.start()
	c.waitCaughtUp(f)
	requireRows(t, f, want, "after a restore of a snapshot the leader sent was killed")

	f.kill9()
	// A store far behind its snapshot; emptied is the far end of that.
	if err := os.RemoveAll(stateDir); err != nil {
		t.Fatal(err)
	}
	killMidRestore("the restore of the follower's own snapshot as it starts", false)
	if killMidRestore("the next start", true) {
		f.start()
	}
	c.waitCaughtUp(f)
	requireRows(t, f, want, "after the restore of the follower's own snapshot was killed")
	c.replicasAgree()
}

// requireRows fails unless n answers each KV row of namespace big as want
// holds it.
func requireRows(t *testing.T, n *node, want map[string]string, when string) {
	t.Helper()
	var (
		mu      sync.Mutex
		missing []string
		wg      sync.WaitGroup
		keys    = make(chan string)
	)
	for range 8 {
		wg.Go(func() {
			for key := range keys {
				var row struct {
					Found bool   `json:"found"`
					Value string `json:"value"`
				}
				status := getJSON(t, n.url("/api/v1/kv/big/"+key), &row)
				if status != http.StatusOK || !row.Found || row.Value != want[key] {
					mu.Lock()
					missing = append(missing, fmt.Sprintf("%s (status %d, found %v)", key, status, row.Found))
					mu.Unlock()
				}
			}
		})
	}
	for key := range want {
		keys <- key
	}
	close(keys)
	wg.Wait()
	if len(missing) > 0 {
		t.Fatalf("%s, node %d lacks %d of %d rows, e.g. %s\n%s",
			when, n.id, len(missing), len(want), strings.Join(missing[:min(5, len(missing))], ", "), n.logTail())
	}
}

// tablesSince counts the badger tables in dir written since t0 (badger
// reuses the number of a table that a crash left out of its manifest, so
// names alone do not tell a new table from an old one).
func tablesSince(t *testing.T, dir string, t0 time.Time) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".sst") {
			continue
		}
		if info, err := e.Info(); err == nil && !info.ModTime().Before(t0) {
			n++
		}
	}
	return n
}
