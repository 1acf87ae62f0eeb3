package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/waggle-mq/waggle/integration/powerloss"
)

// Issue 33: a disk that answers EIO to a write or an fsync, and damage a
// running node reads back. The node must stop at once with one clear line
// (never retry an fsync that failed, never serve a damaged record), the
// others go on, and a restart catches up (or, after damage, repairs) from
// the peers.

// faultyDisks puts every node's data directory of c (not yet started) on a
// powerloss file system, whose Fail makes writes or fsyncs answer EIO;
// node logs stay outside it.
func faultyDisks(t *testing.T, c *cluster) map[int]*powerloss.FS {
	t.Helper()
	disks := map[int]*powerloss.FS{}
	logs := t.TempDir()
	for _, n := range c.nodes {
		backing, mnt := t.TempDir(), t.TempDir()
		f, err := powerloss.Mount(backing, mnt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Unmount() }) // after the node's stop, which start registers
		disks[n.id] = f
		n.dataDir = filepath.Join(mnt, "data")
		if err := os.Mkdir(n.dataDir, 0o755); err != nil {
			t.Fatal(err)
		}
		n.logPath = filepath.Join(logs, fmt.Sprintf("node-%d.log", n.id))
		t.Cleanup(n.afterTest)
	}
	return disks
}

// raftLogFiles and segmentFiles match the files Fail makes fail: the raft
// log's segment files, and the message data's.
func raftLogFiles(path string) bool {
	return strings.Contains(path, "raft/wal/") && strings.HasSuffix(path, ".wal")
}

func segmentFiles(path string) bool {
	return strings.Contains(path, "state/segments/") && strings.HasSuffix(path, ".seg")
}

// pushLoad pushes batches of 20 messages to queue, each batch retried on
// the live nodes with the same transactionIds until one answers 201, and
// keeps, per id, the offset of its answer ("queued" or, for a retry of a
// push that went through, "duplicate"). Faults may end requests.
type pushLoad struct {
	c     *cluster
	queue string

	mu      sync.Mutex
	offsets map[string]uint64 // acknowledged id → offset
	err     error             // an answer that breaks the contract
	acked   atomic.Int64
	stop    chan struct{}
	wg      sync.WaitGroup
}

func startPushLoad(c *cluster, queue string, workers int) *pushLoad {
	p := &pushLoad{c: c, queue: queue, offsets: map[string]uint64{}, stop: make(chan struct{})}
	for w := range workers {
		p.wg.Go(func() {
			for b := 0; ; b++ {
				items := make([]pushItem, 20)
				for i := range items {
					id := fmt.Sprintf("w%d-b%d-%d", w, b, i)
					items[i] = pushItem{Queue: queue, TransactionID: id, Payload: id}
				}
				if !p.pushRetrying(items) {
					return
				}
			}
		})
	}
	return p
}

// pushRetrying pushes items until a node accepts them; false once stopped.
func (p *pushLoad) pushRetrying(items []pushItem) bool {
	for i := 0; ; i++ {
		select {
		case <-p.stop:
			return false
		default:
		}
		live := p.c.live()
		if len(live) == 0 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		var out []pushAnswer
		status := postJSON(p.c.t, live[i%len(live)].url("/api/v1/push"), map[string]any{"items": items}, &out)
		if status != http.StatusCreated || len(out) != len(items) {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		p.mu.Lock()
		for k, a := range out {
			if (a.Status != "queued" && a.Status != "duplicate") || a.Offset == nil {
				p.err = fmt.Errorf("push of %s answered %+v", items[k].TransactionID, a)
				continue
			}
			p.offsets[items[k].TransactionID] = *a.Offset
		}
		p.mu.Unlock()
		p.acked.Add(int64(len(items)))
		return true
	}
}

// waitMore waits until n more messages than now are acknowledged.
func (p *pushLoad) waitMore(t *testing.T, n int64, timeout time.Duration, why func() string) {
	t.Helper()
	from := p.acked.Load()
	waitFor(t, timeout, func() error {
		if got := p.acked.Load() - from; got < n {
			return fmt.Errorf("%d messages acknowledged, want %d", got, n)
		}
		return nil
	}, why)
}

// end stops the pushers and returns what they acknowledged.
func (p *pushLoad) end(t *testing.T) map[string]uint64 {
	close(p.stop)
	p.wg.Wait()
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.offsets
}

// requireExactlyOnce checks that the partition n holds every acknowledged
// id once, at the offset its answer gave, and nothing twice.
func requireExactlyOnce(t *testing.T, n *node, queue string, acked map[string]uint64) fetchAnswer {
	t.Helper()
	got := n.fetchAll(queue, "Default")
	seen := map[string]uint64{}
	for _, r := range got.Entries[0].Records {
		if at, dup := seen[r.TransactionID]; dup {
			t.Fatalf("node %d holds %s twice, at offsets %d and %d", n.id, r.TransactionID, at, r.Offset)
		}
		seen[r.TransactionID] = r.Offset
	}
	for id, offset := range acked {
		if at, ok := seen[id]; !ok || at != offset {
			t.Fatalf("node %d: acknowledged %s (offset %d) is at %d (held: %v)", n.id, id, offset, at, ok)
		}
	}
	return got
}

// requireSameRecords checks that two nodes hold the same partition,
// record for record.
func requireSameRecords(t *testing.T, a, b fetchAnswer, what string) {
	t.Helper()
	ra, rb := a.Entries[0].Records, b.Entries[0].Records
	if len(ra) != len(rb) {
		t.Fatalf("%s: %d records against %d", what, len(ra), len(rb))
	}
	for i := range ra {
		if ra[i].Offset != rb[i].Offset || ra[i].TransactionID != rb[i].TransactionID || ra[i].MessageID != rb[i].MessageID ||
			string(ra[i].Payload) != string(rb[i].Payload) {
			t.Fatalf("%s: record %d differs: %+v against %+v", what, i, ra[i], rb[i])
		}
	}
}

// requireFaultStop waits for n to stop by itself and checks its exit
// status and that its log says, in one line, what failed where.
func requireFaultStop(t *testing.T, n *node, want ...string) string {
	t.Helper()
	select {
	case <-n.done():
	case <-time.After(30 * time.Second):
		t.Fatalf("node %d still runs 30 s after the fault\n%s", n.id, n.logTail())
	}
	if code := n.cmd.ProcessState.ExitCode(); code != 3 {
		t.Errorf("node %d exited with status %d, want 3", n.id, code)
	}
	log, _ := os.ReadFile(n.logPath)
	var lines []string
	for l := range strings.Lines(string(log)) {
		if strings.Contains(l, "disk fault: ") || strings.Contains(l, "damage found: ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("node %d logged %d fault lines, want 1:\n%s", n.id, len(lines), n.logTail())
	}
	for _, w := range want {
		if !strings.Contains(lines[0], w) {
			t.Fatalf("node %d's fault line does not say %q:\n%s", n.id, w, lines[0])
		}
	}
	if strings.Contains(string(log), "goroutine ") && strings.Contains(string(log), "panic") {
		t.Errorf("node %d died with a stack dump:\n%s", n.id, n.logTail())
	}
	return lines[0]
}

// A follower whose disk fails a write or an fsync stops with one line
// naming the file and the error, the other two keep acknowledging, and
// once the disk works again it restarts and holds what the leader holds,
// record for record. Without the stop, raft answered the failed append
// and wrote the same entries again on the leader's retry: an fsync
// retried after it failed.
func TestFollowerDiskEIOStopsItAndItCatchesUp(t *testing.T) {
	for _, c := range []struct {
		name  string
		ops   powerloss.Op
		match func(string) bool
		line  []string
	}{
		{"fsync of the raft log", powerloss.OpFsync, raftLogFiles, []string{"disk fault: fsync ", "raft/wal/", ".wal: input/output error; stopping"}},
		{"write of the raft log", powerloss.OpWrite, raftLogFiles, []string{"disk fault: write ", "raft/wal/", ": input/output error; stopping"}},
		{"write of a segment file", powerloss.OpWrite, segmentFiles, []string{"disk fault: write ", "state/segments/", ".seg: input/output error; stopping"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := newCluster(t, 3)
			disks := faultyDisks(t, cl)
			cl.start()
			load := startPushLoad(cl, "eio", 2)
			load.waitMore(t, 200, 20*time.Second, nil)

			victim := cl.followers()[0]
			disks[victim.id].Fail(c.ops, c.match)
			requireFaultStop(t, victim, c.line...)
			load.waitMore(t, 400, 30*time.Second, nil) // the other two go on
			acked := load.end(t)

			disks[victim.id].Clear()
			victim.start()
			cl.waitCaughtUp(victim)
			leader := cl.leader()
			want := requireExactlyOnce(t, leader, "eio", acked)
			requireSameRecords(t, requireExactlyOnce(t, victim, "eio", acked), want, fmt.Sprintf("node %d against the leader", victim.id))
			t.Logf("%d messages acknowledged; node %d holds all %d records after its restart", len(acked), victim.id, len(want.Entries[0].Records))
		})
	}
}

// A leader whose disk fails an fsync of its raft log stops; another node
// is elected, and every push and produce acknowledged before, during and
// after is there exactly once: a push retried through the failover
// answers "duplicate" with its first offset, the idempotent producer's
// retries are not written twice.
func TestLeaderDiskEIOStopsItAndLosesNoAcknowledgedWrite(t *testing.T) {
	cl := newCluster(t, 3)
	disks := faultyDisks(t, cl)
	cl.start()
	kc := kafkaClient(t, cl.kafkaAddrs(), kgo.DefaultProduceTopic("eio-k"), kgo.ProducerLinger(0))
	createTopic(t, kc, "eio-k", 1, nil)

	load := startPushLoad(cl, "eio", 2)
	var produced sync.Map // acknowledged value → true
	var producedN atomic.Int64
	stopProduce := make(chan struct{})
	var pwg sync.WaitGroup
	pwg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stopProduce:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			v := "k-" + strconv.Itoa(i)
			if err := kc.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err == nil {
				produced.Store(v, true)
				producedN.Add(1)
			}
			cancel()
		}
	})
	load.waitMore(t, 200, 20*time.Second, nil)

	old := cl.leader()
	disks[old.id].Fail(powerloss.OpFsync, raftLogFiles)
	requireFaultStop(t, old, "disk fault: fsync ", "raft/wal/", ": input/output error; stopping")
	leader := cl.leader()
	beforeK := producedN.Load()
	load.waitMore(t, 400, 30*time.Second, leader.logTail)
	waitFor(t, 30*time.Second, func() error {
		if producedN.Load() < beforeK+50 {
			return fmt.Errorf("%d records produced since the leader stopped", producedN.Load()-beforeK)
		}
		return nil
	}, leader.logTail)
	acked := load.end(t)
	close(stopProduce)
	pwg.Wait()
	leader = cl.leader()
	t.Logf("node %d stopped; node %d leads; %d pushes and %d produces acknowledged", old.id, leader.id, len(acked), producedN.Load())

	requireExactlyOnce(t, leader, "eio", acked)
	// A retry of any acknowledged push answers its first offset.
	var retry []pushItem
	for id := range acked {
		retry = append(retry, pushItem{Queue: "eio", TransactionID: id, Payload: id})
		if len(retry) == 100 {
			break
		}
	}
	for _, a := range cl.pushUntilAccepted(20*time.Second, retry...) {
		if a.Status != "duplicate" || a.Offset == nil || *a.Offset != acked[a.TransactionID] {
			t.Fatalf("retry of acknowledged %s answered %+v, want duplicate at %d", a.TransactionID, a, acked[a.TransactionID])
		}
	}

	total := int(highWatermark(t, leader, "eio-k"))
	seen := map[string]bool{}
	for _, r := range consumeN(t, []string{leader.kafkaAddr}, "eio-k", total) {
		if seen[string(r.Value)] {
			t.Fatalf("record %s is in the topic twice", r.Value)
		}
		seen[string(r.Value)] = true
	}
	produced.Range(func(v, _ any) bool {
		if !seen[v.(string)] {
			t.Fatalf("acknowledged record %s is missing", v)
		}
		return true
	})

	// The old leader, its disk sound again, catches up.
	disks[old.id].Clear()
	old.start()
	cl.waitCaughtUp(old)
	requireSameRecords(t, requireExactlyOnce(t, old, "eio", acked), leader.fetchAll("eio", "Default"), "the old leader against the new")
}

// A bit flipped under a running follower, in a segment file or in a raft
// log entry, is found when the follower reads it to answer a fetch: it
// answers no data from it, stops with one line naming the file, and leaves
// the marker; its next start moves the data aside, repairs it from the
// peers (though the start-up check reads neither), and it serves every
// message again.
func TestDamageFoundByARunningFollowerIsRepairedFromPeers(t *testing.T) {
	for name, damage := range map[string]func(t *testing.T, dir string) (line string){
		"bit flip in a segment file": func(t *testing.T, dir string) string {
			flipByte(t, largestQueueSegment(t, dir), -1)
			return "state/segments/"
		},
		"bit flip in a raft log entry": func(t *testing.T, dir string) string {
			files, _ := filepath.Glob(filepath.Join(dir, "raft", "wal", "*.wal"))
			for _, path := range files {
				b, _ := os.ReadFile(path)
				if at := strings.Index(string(b), "canary-0777"); at >= 0 {
					flipByte(t, path, at+3)
					return "raft/wal"
				}
			}
			t.Fatalf("the pushed payload is not in the raft log files %v", files)
			return ""
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := startCluster(t, 3)
			waitLogFormat(t, c.leader(), 5) // pushed payloads stay in the raft log (refs)
			pushCanaries(c, 0, 2000)
			// Move the canaries' entries out of raft's cache of its newest
			// entries, so a read goes to the disk.
			for i := range 80 {
				c.pushUntilAccepted(20*time.Second, pushItem{Queue: "other", TransactionID: fmt.Sprint("o-", i), Payload: i})
			}
			victim := c.followers()[0]
			c.waitCaughtUp(victim)
			want := c.leader().fetchAll("dmg", "Default")
			where := damage(t, victim.dataDir)

			// The fetch gets no answer with data from the damaged record.
			var got fetchAnswer
			req := map[string]any{"entries": []map[string]any{{"queue": "dmg", "partition": "Default", "offset": 0, "maxBytes": 16 << 20}}}
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
				if status := postJSON(t, victim.url("/api/v1/fetch"), req, &got); status != http.StatusOK {
					break
				}
				if len(got.Entries[0].Records) == 2000 {
					requireSameRecords(t, fetchAnswer{Entries: []fetchEntryAnswer{{Records: got.Entries[0].Records}}}, want, "a fetch from the damaged node")
				}
				if victim.hasExited() {
					break
				}
				got = fetchAnswer{}
			}
			line := requireFaultStop(t, victim, "damage found: read ", where, "stopping without serving it")
			t.Logf("node %d: %s", victim.id, strings.TrimSpace(line))
			marker := filepath.Join(victim.dataDir, "state", "damage-found")
			if _, err := os.Stat(marker); err != nil {
				t.Fatalf("no marker: %v", err)
			}
			pushCanaries(c, 2000, 2100)

			victim.start()
			c.waitCaughtUp(victim)
			log, _ := os.ReadFile(victim.logPath)
			if !strings.Contains(string(log), "the data directory is damaged") || !strings.Contains(string(log), "found while the node ran") {
				t.Fatalf("node %d did not repair itself:\n%s", victim.id, victim.logTail())
			}
			if aside, _ := filepath.Glob(filepath.Join(victim.dataDir, "damaged-*")); len(aside) != 1 {
				t.Fatalf("damaged files not moved aside: %v", aside)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the marker is still in place after the repair")
			}
			requireSameRecords(t, victim.fetchAll("dmg", "Default"), c.leader().fetchAll("dmg", "Default"), "the repaired node against the leader")
			if got := idSet(victim.fetchAll("dmg", "Default")); len(got) != 2100 {
				t.Fatalf("repaired node %d holds %d messages, want 2100", victim.id, len(got))
			}
		})
	}
}

// largestQueueSegment is the largest segment file of a queue's stream
// under dir (dedup logs, streams 2^63 and up, are not read by a fetch).
func largestQueueSegment(t *testing.T, dir string) string {
	t.Helper()
	var best string
	var size int64 = -1
	files, _ := filepath.Glob(filepath.Join(dir, "state", "segments", "*", "*.seg"))
	for _, path := range files {
		id, err := strconv.ParseUint(filepath.Base(filepath.Dir(path)), 10, 64)
		if err != nil || id >= 1<<63 {
			continue
		}
		if info, err := os.Stat(path); err == nil && info.Size() > size {
			best, size = path, info.Size()
		}
	}
	if best == "" {
		t.Fatalf("no queue segment under %s (%v)", dir, files)
	}
	return best
}
