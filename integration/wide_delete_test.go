package integration

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Regression for issue 14: one message in each of 60,000 partitions of a
// queue, then DELETE /api/v1/resources/queues/wide, killed the node with
// "panic: fsm: store failed during apply: Txn is too big to fit into one
// request" (the delete was one raft entry removing every key of the queue
// in one badger transaction), and the node panicked again on every restart
// while replaying that entry. Now the delete writes a tombstone (the queue
// is gone for readers at once and its name is free) and the leader's
// housekeeping proposes bounded cleanup entries until nothing is left,
// which waggle_pending_deletes on /metrics counts down to 0.
//
// It also requires a raft snapshot after the cleanup to be a small fraction
// of one taken before the delete (the deleted keys are gone from the live
// state), and logs the data directory's size before the delete, after the
// cleanup, after the snapshot and after a restart.
func TestDeletingAQueueOf60000PartitionsKeepsTheNodeAlive(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes 60,000 partitions (about 10 s)")
	}
	const (
		partitions = 60_000
		perRequest = 100
		workers    = 4
	)
	began := time.Now()
	n := startSingle(t)

	// 1. A queue that must survive the delete untouched.
	keepParts := []string{"k-0", "k-1", "k-2"}
	for _, p := range keepParts {
		var items []pushItem
		for i := range 3 {
			items = append(items, pushItem{Queue: "keep", Partition: p, TransactionID: fmt.Sprintf("keep-%s-%d", p, i), Payload: randomPayload(t)})
		}
		for i, a := range n.push(items...) {
			requireStatus(t, a, "queued", uint64(i))
		}
	}
	keepBefore := fetchKeep(n, keepParts)

	// 2. One message in each of 60,000 partitions of wide, 100 per request,
	// a few requests at a time.
	pushStart := time.Now()
	pushWide(t, n, partitions, perRequest, workers)
	t.Logf("pushed %d partitions of wide in %v", partitions, time.Since(pushStart).Round(time.Millisecond))
	if got := pendingDeletes(t, n); got != 0 {
		t.Fatalf("waggle_pending_deletes is %d before any delete", got)
	}

	// 3. The data directory before the delete, and a snapshot of the state
	// then, to compare with one taken after the cleanup.
	beforeDelete := measureDataDir(t, n.dataDir)
	t.Logf("data dir before delete:  %v", beforeDelete)
	snapBefore := snapshotNow(t, n)
	t.Logf("snapshot before delete: %s at index %d", kib(snapBefore.size), snapBefore.index)

	// 4. The delete answers, and at once the queue is gone and its name free.
	deleteStart := time.Now()
	var deleted map[string]bool
	if status := do(t, http.MethodDelete, n.url("/api/v1/resources/queues/wide"), nil, &deleted); status != http.StatusOK || !deleted["deleted"] {
		t.Fatalf("delete of wide: status %d, answer %v\n%s", status, deleted, n.logTail())
	}
	t.Logf("delete answered in %v; waggle_pending_deletes right after: %d", time.Since(deleteStart).Round(time.Millisecond), pendingDeletes(t, n))
	var h healthAnswer
	if status := getJSON(t, n.url("/health"), &h); status != http.StatusOK {
		t.Fatalf("/health after the delete: %d\n%s", status, n.logTail())
	}
	if names := queueNames(t, n); !reflect.DeepEqual(names, []string{"keep"}) {
		t.Fatalf("queues right after the delete: %v, want only keep", names)
	}
	if status := getJSON(t, n.url("/api/v1/resources/queues/wide"), nil); status != http.StatusNotFound {
		t.Fatalf("GET of the deleted queue: %d, want 404", status)
	}
	for _, p := range []string{"c-0", "c-59999"} {
		if e := fetchEntry(n, "wide", p); e.Error != "unknown queue" || len(e.Records) != 0 {
			t.Fatalf("fetch of deleted wide %s: %+v, want error \"unknown queue\"", p, e)
		}
	}
	// A push to the freed name makes a new, empty queue. The transactionId
	// is the one the old c-0 message had: a deleted queue's dedup memory
	// must not reach the new one.
	reborn := pushItem{Queue: "wide", Partition: "c-0", TransactionID: wideTxn(0), Payload: randomPayload(t)}
	answer := n.push(reborn)
	requireStatus(t, answer[0], "queued", 0)
	checkReborn := func(when string) {
		t.Helper()
		e := fetchEntry(n, "wide", "c-0")
		if e.Error != "" || e.HighWatermark != 1 || len(e.Records) != 1 || e.Records[0].MessageID != *answer[0].MessageID ||
			!jsonEqual(e.Records[0].Payload, reborn.Payload) {
			t.Fatalf("%s: the new wide c-0 holds %+v, want only the message pushed after the delete", when, e)
		}
		if e := fetchEntry(n, "wide", "c-1"); e.Error != "unknown partition" || len(e.Records) != 0 {
			t.Fatalf("%s: the new wide c-1 answers %+v, want \"unknown partition\"", when, e)
		}
		var q queueAnswer
		if status := getJSON(t, n.url("/api/v1/resources/queues/wide"), &q); status != http.StatusOK ||
			len(q.Partitions) != 1 || q.Partitions[0].Name != "c-0" || q.Partitions[0].NextOffset != 1 {
			t.Fatalf("%s: GET of the new wide: status %d, %+v", when, status, q)
		}
	}
	checkReborn("right after the delete")

	// 5. The cleanup entries finish.
	waitFor(t, 60*time.Second, func() error {
		if got := pendingDeletes(t, n); got != 0 {
			return fmt.Errorf("waggle_pending_deletes %d", got)
		}
		return nil
	}, n.logTail)
	t.Logf("cleanup finished %v after the delete", time.Since(deleteStart).Round(time.Millisecond))
	afterCleanup := measureDataDir(t, n.dataDir)
	t.Logf("data dir after cleanup:  %v", afterCleanup)

	// 6. Nothing else was touched: keep, and the new wide.
	checkKeep := func(when string) {
		t.Helper()
		if got := fetchKeep(n, keepParts); !reflect.DeepEqual(got, keepBefore) {
			t.Fatalf("%s: keep changed:\nbefore %+v\nnow    %+v", when, keepBefore, got)
		}
	}
	checkKeep("after cleanup")
	checkReborn("after cleanup")
	if names := queueNames(t, n); !reflect.DeepEqual(names, []string{"keep", "wide"}) {
		t.Fatalf("queues after cleanup: %v, want keep and wide", names)
	}

	// 7. A snapshot lets raft drop the log that held the 60,000 messages.
	snapAfter := snapshotNow(t, n)
	afterSnapshot := measureDataDir(t, n.dataDir)
	t.Logf("snapshot after cleanup: %s at index %d", kib(snapAfter.size), snapAfter.index)
	t.Logf("data dir after snapshot: %v", afterSnapshot)

	// A restart replays nothing that panics, and the node comes back whole.
	n.stop()
	restartStart := time.Now()
	n.restart()
	t.Logf("restarted and leading in %v", time.Since(restartStart).Round(time.Millisecond))
	if status := getJSON(t, n.url("/health"), &h); status != http.StatusOK {
		t.Fatalf("/health after the restart: %d\n%s", status, n.logTail())
	}
	checkKeep("after restart")
	checkReborn("after restart")
	if got := pendingDeletes(t, n); got != 0 {
		t.Fatalf("waggle_pending_deletes %d after the restart", got)
	}
	afterRestart := measureDataDir(t, n.dataDir)
	t.Logf("data dir after restart:  %v", afterRestart)

	// Space given back. The live state is: a snapshot holds every live key
	// of the store, and after the cleanup only keep and the new wide are
	// left (a few KiB against megabytes). The directories are only logged:
	// badger deletes by writing deletion markers, which take more room until
	// a compaction drops both, and nothing compacts this little data (state/
	// is smaller after the restart only because the memtable's write-ahead
	// log became one table, still megabytes against the few KiB live);
	// raft's bolt file never shrinks (a truncated log's pages are kept for
	// reuse); raft keeps the snapshot taken before the delete beside the new
	// one.
	if snapAfter.size*100 > snapBefore.size {
		t.Errorf("the snapshot after the cleanup is %s, before the delete %s: the deleted queue's keys are still in the state",
			kib(snapAfter.size), kib(snapBefore.size))
	}
	for _, d := range dataDirParts {
		t.Logf("%s on disk: before delete %s, after cleanup %s, after snapshot %s, after restart %s", d,
			mib(beforeDelete.allocated[d]), mib(afterCleanup.allocated[d]), mib(afterSnapshot.allocated[d]), mib(afterRestart.allocated[d]))
	}
	t.Logf("whole test: %v", time.Since(began).Round(time.Millisecond))
}

// wideTxn is the transactionId of the message pushed to partition c-i of
// wide: unique, so dedup is on for every one.
func wideTxn(i int) string { return fmt.Sprintf("wide-c-%d", i) }

// pushWide pushes one message to each of partitions c-0 … c-(count-1) of
// wide, perRequest items a request, with workers requests in flight.
func pushWide(t *testing.T, n *node, count, perRequest, workers int) {
	t.Helper()
	starts := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first := range starts {
				if err := pushWideRange(t, n, first, min(first+perRequest, count)); err != nil {
					errs <- err
					for range starts { // drain so the sender finishes
					}
					return
				}
			}
		}()
	}
	for first := 0; first < count; first += perRequest {
		starts <- first
	}
	close(starts)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("%v\n%s", err, n.logTail())
	}
}

// pushWideRange pushes partitions c-first … c-(end-1) in one request. It
// reports rather than fails, as it runs off the test's goroutine.
func pushWideRange(t *testing.T, n *node, first, end int) error {
	items := make([]pushItem, 0, end-first)
	for i := first; i < end; i++ {
		items = append(items, pushItem{Queue: "wide", Partition: fmt.Sprintf("c-%d", i), TransactionID: wideTxn(i), Payload: randomPayload(t)})
	}
	body, err := json.Marshal(map[string]any{"items": items})
	if err != nil {
		return err
	}
	var out []pushAnswer
	if status := do(t, http.MethodPost, n.url("/api/v1/push"), body, &out); status != http.StatusCreated {
		return fmt.Errorf("push of c-%d … c-%d: status %d", first, end-1, status)
	}
	if len(out) != len(items) {
		return fmt.Errorf("push of %d items answered %d", len(items), len(out))
	}
	for i, a := range out {
		if a.Status != "queued" || a.Offset == nil || *a.Offset != 0 {
			return fmt.Errorf("push to %s: %+v, want queued at offset 0", items[i].Partition, a)
		}
	}
	return nil
}

// randomPayload is a JSON string of 64 random base64 characters, which no
// compression in the store can shrink.
func randomPayload(t testing.TB) string {
	var b [48]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Error(err)
	}
	return base64.StdEncoding.EncodeToString(b[:])
}

func jsonEqual(raw json.RawMessage, v any) bool {
	want, err := json.Marshal(v)
	return err == nil && string(raw) == string(want)
}

// fetchEntry fetches one partition from offset 0 (one page is plenty here).
func fetchEntry(n *node, queue, partition string) fetchEntryAnswer {
	n.t.Helper()
	var out fetchAnswer
	req := map[string]any{"entries": []map[string]any{{"queue": queue, "partition": partition, "offset": 0}}}
	if status := postJSON(n.t, n.url("/api/v1/fetch"), req, &out); status != http.StatusOK || len(out.Entries) != 1 {
		n.t.Fatalf("fetch of %s %s: status %d, %d entries", queue, partition, status, len(out.Entries))
	}
	return out.Entries[0]
}

// fetchKeep is what a fetch answers for each partition of keep.
func fetchKeep(n *node, parts []string) map[string]fetchEntryAnswer {
	n.t.Helper()
	out := map[string]fetchEntryAnswer{}
	for _, p := range parts {
		e := fetchEntry(n, "keep", p)
		if e.Error != "" || len(e.Records) != 3 {
			n.t.Fatalf("keep %s: %+v, want 3 records", p, e)
		}
		out[p] = e
	}
	return out
}

// queueNames lists the queues GET /api/v1/resources/queues shows.
func queueNames(t *testing.T, n *node) []string {
	t.Helper()
	var all struct{ Queues []queueAnswer }
	if status := getJSON(t, n.url("/api/v1/resources/queues"), &all); status != http.StatusOK {
		t.Fatalf("queue list: status %d", status)
	}
	names := []string{}
	for _, q := range all.Queues {
		names = append(names, q.Name)
	}
	return names
}

// pendingDeletes reads the gauge waggle_pending_deletes from /metrics.
func pendingDeletes(t *testing.T, n *node) int {
	t.Helper()
	resp, err := client.Get(n.url("/metrics"))
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("/metrics: status %d: %s", resp.StatusCode, body)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "waggle_pending_deletes "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("waggle_pending_deletes %q: %v", v, err)
			}
			return int(f)
		}
	}
	t.Fatalf("/metrics has no waggle_pending_deletes (%v)", sc.Err())
	return 0
}

// dirUsage is a data directory's size, per part (see dataDirPart) and in
// total: apparent is the sum of file sizes, allocated the blocks the files
// really take.
type dirUsage struct {
	apparent, allocated map[string]int64
}

// dataDirParts are the parts of a data directory that are measured apart.
var dataDirParts = []string{"total", "state", "raft log", "raft snapshots"}

// dataDirPart says which part of a data directory a path (relative to it)
// belongs to: badger's state/, raft/snapshots/, or the rest of raft/ (the
// bolt log and stable store); "" for anything else (the node's log).
func dataDirPart(rel string) string {
	switch parts := strings.Split(rel, string(filepath.Separator)); {
	case parts[0] == "state":
		return "state"
	case parts[0] == "raft" && len(parts) > 1 && parts[1] == "snapshots":
		return "raft snapshots"
	case parts[0] == "raft":
		return "raft log"
	}
	return ""
}

func (u dirUsage) String() string {
	var b strings.Builder
	for _, d := range dataDirParts {
		fmt.Fprintf(&b, "%s %s on disk (%s apparent); ", d, mib(u.allocated[d]), mib(u.apparent[d]))
	}
	return strings.TrimSuffix(b.String(), "; ")
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

func kib(n int64) string { return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10)) }

// snapshotInfo is a raft snapshot taken on request: its index and the size
// of its files.
type snapshotInfo struct {
	index uint64
	size  int64
}

// snapshotNow asks the node for a raft snapshot and measures it, finding it
// by the index in its meta.json (raft keeps older snapshots beside it).
func snapshotNow(t *testing.T, n *node) snapshotInfo {
	t.Helper()
	var answer struct {
		Index uint64 `json:"index"`
	}
	if status := postJSON(t, n.url("/api/v1/cluster/snapshot"), struct{}{}, &answer); status != http.StatusOK {
		t.Fatalf("snapshot: status %d\n%s", status, n.logTail())
	}
	metas, err := filepath.Glob(filepath.Join(n.dataDir, "raft", "snapshots", "*", "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range metas {
		raw, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		var meta struct{ Index uint64 }
		if err := json.Unmarshal(raw, &meta); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if meta.Index != answer.Index {
			continue
		}
		files, err := os.ReadDir(filepath.Dir(m))
		if err != nil {
			t.Fatal(err)
		}
		info := snapshotInfo{index: answer.Index}
		for _, f := range files {
			fi, err := f.Info()
			if err != nil {
				t.Fatal(err)
			}
			info.size += fi.Size()
		}
		return info
	}
	t.Fatalf("no snapshot at index %d among %v", answer.Index, metas)
	return snapshotInfo{}
}

// measureDataDir walks dir and sums its files' sizes. A file can vanish
// while the node runs (a compacted table, a replaced snapshot); it is
// skipped.
func measureDataDir(t testing.TB, dir string) dirUsage {
	t.Helper()
	u := dirUsage{apparent: map[string]int64{}, allocated: map[string]int64{}}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		var blocks int64
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			blocks = st.Blocks * 512
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		for _, k := range []string{"total", dataDirPart(rel)} {
			if k != "" {
				u.apparent[k] += info.Size()
				u.allocated[k] += blocks
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("measure %s: %v", dir, err)
	}
	return u
}
