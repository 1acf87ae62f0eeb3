package integration

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	bolt "go.etcd.io/bbolt"
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

	// Leave the follower 72 MiB, 8 above the 64 MiB it stops at, then push
	// until it stops. How many bytes that takes depends on the layout (the
	// raft log preallocates its files, and payloads are written into it
	// once), so the pushes are bounded by what the disk can hold, not fixed.
	fill(t, full, 72)
	filler := filepath.Join(full.dataDir, "filler")

	const perBatch, maxBatches = 60, 4000 // at most ~240 MiB, over 3 times the room left
	pushed := 0
	for b := 0; !full.hasExited(); b++ {
		if b == maxBatches {
			t.Fatalf("node %d still runs after %d messages of 1 KiB on a disk with 72 MiB free", full.id, pushed)
		}
		items := make([]pushItem, perBatch)
		for i := range items {
			items[i] = pushItem{Queue: "full", TransactionID: fmt.Sprintf("b%d-%d", b, i), Payload: randomHex(t, 512)}
		}
		c.pushUntilAccepted(20*time.Second, items...)
		pushed += perBatch
	}
	t.Logf("node %d stopped after %d messages of 1 KiB", full.id, pushed)
	// The free-space watch says "disk nearly full"; a burst that fills the
	// disk between two looks meets ENOSPC first, which stops the node as a
	// disk fault naming the file and the error. Either says why.
	if log, _ := os.ReadFile(full.logPath); !strings.Contains(string(log), "disk nearly full") && !strings.Contains(string(log), "no space left on device; stopping") {
		i := max(strings.Index(string(log), "panic"), strings.Index(string(log), "fatal error"), 0)
		t.Errorf("node %d's log does not say why it stopped:\n%.3000s", full.id, log[i:])
	}
	// The node's exit may free a little (badger's memtable file, say):
	// keep the disk well below the floor for the start that must fail.
	topUp := filepath.Join(full.dataDir, "filler-2")
	if free := freeMiB(t, full.dataDir); free > 32 {
		if err := exec.Command("fallocate", "-l", fmt.Sprint((free-32)<<20), topUp).Run(); err != nil {
			t.Fatal(err)
		}
	}
	full.start()
	select {
	case <-full.done():
	case <-time.After(10 * time.Second):
		t.Fatalf("node %d started on a full disk (%d MiB free)\n%s", full.id, freeMiB(t, full.dataDir), full.logTail())
	}

	os.Remove(filler)
	os.Remove(topUp)
	full.start()
	c.waitCaughtUp(full)
	got := idSet(full.fetchAll("full", "Default"))
	if len(got) != pushed {
		t.Fatalf("node %d holds %d messages after freeing space, want %d", full.id, len(got), pushed)
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

// A file damaged on one node while it was stopped (a flipped bit, a file
// cut short) is found when the node starts: the node moves its data aside,
// takes the state from its peers, never applies or serves the damaged
// bytes, and votes again once it has caught up.
func TestDamagedFileIsDetectedAndRepairedFromPeers(t *testing.T) {
	for name, damage := range map[string]func(t *testing.T, dir string){
		"bit flip in a badger table": func(t *testing.T, dir string) { flipByte(t, largestFile(t, filepath.Join(dir, "state"), ".sst"), -1) },
		"badger table cut short":     func(t *testing.T, dir string) { truncateHalf(t, largestFile(t, filepath.Join(dir, "state"), ".sst")) },
		"bit flip in a raft log entry": func(t *testing.T, dir string) {
			files, _ := filepath.Glob(filepath.Join(dir, "raft", "wal", "*.wal"))
			for _, path := range files {
				b, _ := os.ReadFile(path)
				if at := strings.Index(string(b), "canary-0777"); at >= 0 {
					flipByte(t, path, at+3)
					return
				}
			}
			t.Fatalf("the pushed payload is not in the raft log files %v", files)
		},
		"snapshot cut short": func(t *testing.T, dir string) {
			truncateHalf(t, largestFile(t, filepath.Join(dir, "raft", "snapshots"), "state.bin"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := startCluster(t, 3)
			pushCanaries(c, 0, 2000)
			c.snapshotAll()
			victim := c.followers()[0]
			c.waitCaughtUp(victim)
			victim.stop()
			damage(t, victim.dataDir)
			pushCanaries(c, 2000, 2100)

			victim.start()
			c.waitCaughtUp(victim)
			log, _ := os.ReadFile(victim.logPath)
			if !strings.Contains(string(log), "the data directory is damaged") {
				t.Fatalf("node %d did not report the damage:\n%s", victim.id, victim.logTail())
			}
			if aside, _ := filepath.Glob(filepath.Join(victim.dataDir, "damaged-*")); len(aside) != 1 {
				t.Fatalf("damaged files not moved aside: %v", aside)
			}
			if got := idSet(victim.fetchAll("dmg", "Default")); len(got) != 2100 {
				t.Fatalf("repaired node %d holds %d messages, want 2100", victim.id, len(got))
			}
			// It votes again: with the leader gone, it and the third node
			// elect a new one, which holds every message.
			c.leader().kill9()
			l := c.leader()
			pushCanaries(c, 2100, 2101)
			if got := idSet(l.fetchAll("dmg", "Default")); len(got) != 2101 {
				t.Fatalf("after the old leader's loss the new leader %d holds %d messages, want 2101", l.id, len(got))
			}
		})
	}
}

// pushCanaries pushes ids canary-<from>…canary-<to-1>, 100 per request.
func pushCanaries(c *cluster, from, to int) {
	for start := from; start < to; start += 100 {
		var items []pushItem
		for i := start; i < min(start+100, to); i++ {
			id := fmt.Sprintf("canary-%04d", i)
			items = append(items, pushItem{Queue: "dmg", TransactionID: id, Payload: id})
		}
		c.pushUntilAccepted(20*time.Second, items...)
	}
}

// largestFile finds the largest file under dir whose name ends in suffix.
func largestFile(t *testing.T, dir, suffix string) string {
	var best string
	var size int64 = -1
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, suffix) {
			if info, err := d.Info(); err == nil && info.Size() > size {
				best, size = path, info.Size()
			}
		}
		return nil
	})
	if best == "" {
		t.Fatalf("no %s file under %s", suffix, dir)
	}
	return best
}

// flipByte flips one bit of the byte at offset (the middle when negative).
func flipByte(t *testing.T, path string, offset int) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if offset < 0 {
		offset = len(b) / 2
	}
	b[offset] ^= 0x04
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func truncateHalf(t *testing.T, path string) {
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, info.Size()/2); err != nil {
		t.Fatal(err)
	}
}

// A single node has no peers to repair from: it refuses to start on a
// damaged directory instead of serving from it.
func TestDamagedSingleNodeRefusesToStart(t *testing.T) {
	n := startSingle(t)
	pushCanaries(&cluster{t: t, nodes: []*node{n}}, 0, 1000)
	n.stop()
	truncateHalf(t, largestFile(t, filepath.Join(n.dataDir, "state"), ".sst"))
	n.start()
	select {
	case <-n.done():
	case <-time.After(20 * time.Second):
		t.Fatal("a single node started on a damaged data directory")
	}
	if log, _ := os.ReadFile(n.logPath); !strings.Contains(string(log), "no peers to repair it from") {
		t.Fatalf("the refusal does not say why:\n%s", n.logTail())
	}
}

// Regression (found by the chaos run): a node killed during its start-up
// check left the check's process holding its files; the next start read
// the lock as damage and threw a healthy directory away. A directory held
// by another process is now "in use": the node refuses to start and
// repairs nothing.
func TestDataDirInUseIsNotMistakenForDamage(t *testing.T) {
	c := startCluster(t, 3)
	pushCanaries(c, 0, 100)
	n := c.followers()[0]
	n.stop()
	held, err := bolt.Open(filepath.Join(n.dataDir, "raft", "wal", "wal-meta.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	n.start()
	select {
	case <-n.done():
	case <-time.After(20 * time.Second):
		t.Fatal("the node started while another process held its raft log")
	}
	held.Close()
	if log, _ := os.ReadFile(n.logPath); !strings.Contains(string(log), "in use by another process") {
		t.Fatalf("the refusal does not say why:\n%s", n.logTail())
	}
	if aside, _ := filepath.Glob(filepath.Join(n.dataDir, "damaged-*")); len(aside) != 0 {
		t.Fatalf("a healthy directory was moved aside: %v", aside)
	}
	n.start()
	c.waitCaughtUp(n)
	if got := idSet(n.fetchAll("dmg", "Default")); len(got) != 100 {
		t.Fatalf("node %d holds %d messages, want 100", n.id, len(got))
	}
}

// Regression (found by the 300 s chaos run): raft looks for a due snapshot
// only every 120 s by default, so nodes restarted more often than that
// never compacted their logs (400,000 entries), and every start-up check
// read them all. A node now takes the snapshot within seconds of passing
// the threshold.
func TestSnapshotIsTakenSoonAfterTheThreshold(t *testing.T) {
	n := newNode(t, 1)
	n.args = []string{"--raft-snapshot-threshold", "64"}
	n.start()
	n.waitLeader()
	for i := range 100 {
		n.push(pushItem{Queue: "snap", TransactionID: fmt.Sprint("s-", i), Payload: i})
	}
	waitFor(t, 20*time.Second, func() error {
		var h healthAnswer
		getJSON(t, n.url("/health"), &h)
		if h.Raft.LastSnapshotIndex == 0 {
			return fmt.Errorf("no snapshot yet at applied index %d", h.Raft.Applied)
		}
		return nil
	}, n.logTail)
}

// Below --storage-min-free-mib a node refuses what would add data (507
// storage_full over HTTP, KAFKA_STORAGE_ERROR over Kafka) and keeps
// serving everything else: reads, pops, acks, deletes. Once space is
// freed it takes writes again without a restart, and nothing was lost.
func TestStorageFullRefusesGrowthAndRecoversWithoutRestart(t *testing.T) {
	n := newNode(t, 1)
	n.dataDir = mountTmpfs(t, "256m")
	n.logPath = filepath.Join(t.TempDir(), "node-1.log")
	n.args = []string{"--storage-min-free-mib", "128", "--min-free-disk-mib", "16"}
	n.start()
	n.waitLeader()

	requireStatus(t, n.push(pushItem{Queue: "sf", TransactionID: "before-1", Payload: "a"})[0], "queued", 0)
	requireStatus(t, n.push(pushItem{Queue: "sf", TransactionID: "before-2", Payload: "b"})[0], "queued", 1)
	cl := kafkaClient(t, []string{n.kafkaAddr}, kgo.DefaultProduceTopic("sft"), kgo.ProducerLinger(0),
		kgo.DisableIdempotentWrite(), kgo.RecordRetries(1))
	createTopic(t, cl, "sft", 1, nil)
	produceSync(t, cl, &kgo.Record{Value: []byte("k0")})

	// Leave 96 MiB free: under the reserve, above the hard stop.
	fill(t, n, 96)
	filler := filepath.Join(n.dataDir, "filler")
	pushOnce := func(txn string) (int, errorAnswer) {
		var raw json.RawMessage
		var e errorAnswer
		status := postJSON(t, n.url("/api/v1/push"), map[string]any{"items": []pushItem{{Queue: "sf", TransactionID: txn, Payload: "c"}}}, &raw)
		if status >= 300 {
			json.Unmarshal(raw, &e)
		}
		return status, e
	}
	// The node looks at its disk four times a second.
	waitFor(t, 5*time.Second, func() error {
		if !strings.Contains(metricsText(t, n), "\nwaggle_storage_full 1\n") {
			return errors.New("the metrics do not report the full disk")
		}
		return nil
	}, n.logTail)
	if status, e := pushOnce("while-full"); status != http.StatusInsufficientStorage || e.Code != "storage_full" {
		t.Fatalf("push on a full disk: status %d code %q, want 507 storage_full", status, e.Code)
	}
	var e errorAnswer
	kv := map[string]any{"operations": []map[string]any{{"op": "put", "ns": "n", "key": "k", "value": 1, "forever": true}}}
	if status := postJSON(t, n.url("/api/v1/kv"), kv, &e); status != http.StatusInsufficientStorage || e.Code != "storage_full" {
		t.Errorf("KV put on a full disk: status %d code %q, want 507 storage_full", status, e.Code)
	}
	err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("k1")}).FirstErr()
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Errorf("Kafka produce on a full disk: %v, want KAFKA_STORAGE_ERROR", err)
	}

	// Everything that does not add data goes on.
	status, popped := n.pop(t, "sf", map[string]string{"batch": "1"})
	if status != http.StatusOK || len(popped.Messages) != 1 {
		t.Fatalf("pop on a full disk: status %d, %d messages", status, len(popped.Messages))
	}
	status, acked := n.ackAll(t, "__QUEUE_MODE__", popped.Messages, "completed")
	if status != http.StatusOK {
		t.Fatalf("ack on a full disk: status %d", status)
	}
	requireAcked(t, acked, 1)
	if got := len(n.fetchAll("sf", "Default").Entries[0].Records); got != 2 {
		t.Fatalf("fetch on a full disk: %d records, want 2", got)
	}
	if got := consumeN(t, []string{n.kafkaAddr}, "sft", 1); string(got[0].Value) != "k0" {
		t.Fatalf("Kafka fetch on a full disk: %q", got[0].Value)
	}
	if status := do(t, http.MethodDelete, n.url("/api/v1/resources/queues/sft"), nil, nil); status != http.StatusOK {
		t.Fatalf("delete of a topic on a full disk: status %d", status)
	}

	// Space freed: writes resume on the same process.
	os.Remove(filler)
	waitFor(t, 5*time.Second, func() error {
		if status, e := pushOnce("after"); status != http.StatusCreated {
			return fmt.Errorf("push after freeing space: status %d code %q", status, e.Code)
		}
		return nil
	}, n.logTail)
	if got := len(n.fetchAll("sf", "Default").Entries[0].Records); got != 3 {
		t.Fatalf("after freeing space the queue holds %d messages, want 3 (2 before, 0 refused, 1 after)", got)
	}
	select {
	case <-n.done():
		t.Fatal("the node exited")
	default:
	}
	if m := metricsText(t, n); !strings.Contains(m, "\nwaggle_storage_full 0\n") {
		t.Errorf("the metrics still report a full disk")
	}
}

// metricsText is a node's /metrics page.
func metricsText(t testing.TB, n *node) string {
	t.Helper()
	resp, err := http.Get(n.url("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// A leader whose disk fills up hands leadership to a node with room, so
// the cluster goes on taking writes instead of answering storage_full;
// when every node is full, the leader keeps leading (moving leadership
// round full nodes would only interrupt reads, acks and retention).
func TestLeaderWithFullDiskHandsLeadershipOver(t *testing.T) {
	c := newCluster(t, 3)
	for _, n := range c.nodes {
		n.dataDir = mountTmpfs(t, "256m")
		n.logPath = filepath.Join(t.TempDir(), fmt.Sprintf("node-%d.log", n.id))
	}
	c.start("--storage-min-free-mib", "128", "--min-free-disk-mib", "16")
	c.waitRegistered(3)
	full := c.leader()
	fill(t, full, 96)
	waitFor(t, 15*time.Second, func() error {
		if l, err := c.findLeader(); err != nil || l.id == full.id {
			return fmt.Errorf("node %d, its disk full, still leads (%v)", full.id, err)
		}
		return nil
	}, full.logTail)
	c.pushUntilAccepted(10*time.Second, pushItem{Queue: "after", TransactionID: "a", Payload: 1})
	if log, _ := os.ReadFile(full.logPath); !strings.Contains(string(log), "handed leadership to a voter with room") {
		t.Errorf("node %d's log does not say it handed leadership over", full.id)
	}

	// Every disk full: the leader stays, refusing pushes and serving reads.
	for _, n := range c.nodes {
		if n != full {
			fill(t, n, 96)
		}
	}
	// A hand-off may still go to a node that has not noticed its own disk
	// yet; once the leader finds no voter with room, it stays.
	var l *node
	waitFor(t, 15*time.Second, func() error {
		l = c.leader()
		if log, _ := os.ReadFile(l.logPath); !strings.Contains(string(log), "no other voter reports room") {
			return fmt.Errorf("leader %d has not found every disk full yet", l.id)
		}
		return nil
	})
	for range 3 { // three hand-off periods
		time.Sleep(2 * time.Second)
		if now := c.leader(); now.id != l.id {
			t.Fatalf("leadership moved from node %d to %d while every disk is full", l.id, now.id)
		}
	}
	var e errorAnswer
	if status := postJSON(t, l.url("/api/v1/push"), map[string]any{"items": []pushItem{{Queue: "after", TransactionID: "b", Payload: 2}}}, &e); status != http.StatusInsufficientStorage {
		t.Fatalf("push with every disk full: status %d %+v", status, e)
	}
	if got := len(l.fetchAll("after", "Default").Entries[0].Records); got != 1 {
		t.Fatalf("read with every disk full: %d records, want 1", got)
	}
}

// fill leaves leaveMiB free on n's data directory's file system with a
// file named filler.
func fill(t *testing.T, n *node, leaveMiB int64) {
	t.Helper()
	var fs syscall.Statfs_t
	if err := syscall.Statfs(n.dataDir, &fs); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("fallocate", "-l", fmt.Sprint(int64(fs.Bavail)*fs.Bsize-leaveMiB<<20), filepath.Join(n.dataDir, "filler")).Run(); err != nil {
		t.Fatalf("fill node %d's disk: %v", n.id, err)
	}
}

// freeMiB is the space left for unprivileged writes on dir's file system.
func freeMiB(t *testing.T, dir string) int64 {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	return int64(fs.Bavail) * fs.Bsize >> 20
}

// Many concurrent pushers and producers drive a node's disk down to its
// --storage-min-free-mib: the node must refuse them (507,
// KAFKA_STORAGE_ERROR) and go on serving, never fall below
// --min-free-disk-mib and stop, though writes were in flight and the raft
// log started a segment after the refusals began. The thresholds are the
// closest pair the node accepts.
func TestConcurrentWritersFillingTheDiskGetRefusedNotStopped(t *testing.T) {
	const stopMiB = 16
	n := newNode(t, 1)
	n.dataDir = mountTmpfs(t, "384m")
	n.logPath = filepath.Join(t.TempDir(), "node-1.log")
	n.args = []string{"--storage-min-free-mib", fmt.Sprint(stopMiB + minStorageHeadroomMiB), "--min-free-disk-mib", fmt.Sprint(stopMiB)}
	n.start()
	n.waitLeader()
	cl := kafkaClient(t, []string{n.kafkaAddr}, kgo.DefaultProduceTopic("fill"), kgo.ProducerLinger(0), kgo.RecordRetries(2))
	createTopic(t, cl, "fill", 4, nil)

	var lowest atomic.Int64
	lowest.Store(math.MaxInt64)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // the free space, as often as the node could not look
		for {
			if free := freeMiB(t, n.dataDir); free < lowest.Load() {
				lowest.Store(free)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	var refused, kafkaRefused atomic.Int64
	var acked sync.Map
	for w := range 32 {
		wg.Go(func() {
			for b := 0; refused.Load() < 200; b++ {
				items := make([]pushItem, 50)
				for i := range items {
					items[i] = pushItem{Queue: "fill", TransactionID: fmt.Sprintf("w%d-%d-%d", w, b, i), Payload: randomHex(t, 1024)}
				}
				var out []pushAnswer
				switch status := postJSON(t, n.url("/api/v1/push"), map[string]any{"items": items}, &out); status {
				case http.StatusCreated:
					for _, it := range items {
						acked.Store(it.TransactionID, true)
					}
				case http.StatusInsufficientStorage:
					refused.Add(1)
					time.Sleep(20 * time.Millisecond)
				case http.StatusTooManyRequests:
					time.Sleep(20 * time.Millisecond)
				default:
					t.Errorf("push: status %d", status)
					return
				}
				if n.hasExited() {
					return
				}
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			value := make([]byte, 4096)
			for refused.Load() < 200 && !n.hasExited() {
				rand.Read(value)
				if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: value}).FirstErr(); errors.Is(err, kerr.KafkaStorageError) {
					kafkaRefused.Add(1)
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	waitFor(t, 3*time.Minute, func() error {
		if n.hasExited() {
			return nil
		}
		if refused.Load() < 200 {
			return fmt.Errorf("%d pushes refused so far, free space down to %d MiB", refused.Load(), lowest.Load())
		}
		return nil
	})
	close(stop)
	wg.Wait()
	t.Logf("free space went down to %d MiB (refusing below %d, stopping below %d); %d pushes and %d produces refused",
		lowest.Load(), stopMiB+minStorageHeadroomMiB, stopMiB, refused.Load(), kafkaRefused.Load())
	if n.hasExited() {
		t.Fatalf("the node stopped (free space down to %d MiB)\n%s", lowest.Load(), n.logTail())
	}
	got := idSet(n.fetchAll("fill", "Default"))
	missing := 0
	acked.Range(func(id, _ any) bool {
		if !got[id.(string)] {
			missing++
		}
		return true
	})
	if missing > 0 {
		t.Fatalf("%d acknowledged messages are missing", missing)
	}
}

// minStorageHeadroomMiB is the least gap waggle serve accepts between
// --storage-min-free-mib and --min-free-disk-mib (node.StorageHeadroomMiB).
const minStorageHeadroomMiB = 96
