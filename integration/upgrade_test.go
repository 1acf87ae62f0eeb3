package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The rolling upgrade of issue 16: a 3-node cluster of the newest release
// listed in RELEASES (built from its commit) has its nodes replaced one by
// one, followers first and the leader last, by the binary under test, on
// the same data directories, while HTTP pushes, an idempotent Kafka
// producer and a Kafka consumer group keep running. Afterwards every
// acknowledged write is stored once at its acknowledged offset, the dedup
// and producer state the old binary wrote still answers, and the group
// consumed to the end.

// Upgrade workload names.
const (
	upgradeQueue = "upgrade"
	upgradeTopic = "upgrade-k"
	upgradeGroup = "upgrade-g"
)

var upgradePartitions = []string{"p0", "p1", "p2", "p3"}

func TestRollingUpgrade(t *testing.T) {
	root, err := gitOutput("", "rev-parse", "--show-toplevel")
	if err != nil {
		t.Fatalf("find the repository: %v: %s", err, root)
	}
	rel := newestRelease(t, root)
	head, err := gitOutput(root, "rev-parse", "HEAD")
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v: %s", err, head)
	}
	if head == rel.commit {
		t.Logf("the newest release %s is HEAD itself (%s): upgrading from it to itself", rel.version, rel.commit[:7])
	}
	buildStart := time.Now()
	old := buildRelease(t, root, rel)
	t.Logf("built release %s (%s, %s) in %v", rel.version, rel.commit[:7], rel.date, time.Since(buildStart).Round(time.Millisecond))

	c := newCluster(t, 3)
	for _, n := range c.nodes {
		n.binary = old
	}
	c.start()
	brokers := c.kafkaAddrs()

	// Load: HTTP pushers and a Kafka producer until stopLoad, the group's
	// consumers until stopGroup (after they have read everything).
	load := &upgradeLoad{pushed: map[string]pushedMsg{}, unknown: map[string]bool{}, refused: map[string]bool{},
		kafkaAcked: map[int64]kafkaMsg{}, kafkaFailed: map[string]bool{}}
	stopLoad, stopGroup := make(chan struct{}), make(chan struct{})
	var loadWG, groupWG sync.WaitGroup
	for w := range 3 {
		loadWG.Add(1)
		go func() {
			defer loadWG.Done()
			load.pushLoop(c, w, stopLoad)
		}()
	}
	txns := &txnLoad{}
	loadWG.Add(1)
	go func() {
		defer loadWG.Done()
		txns.loop(c, stopLoad)
	}()
	producer := kafkaClient(t, brokers, kgo.DefaultProduceTopic(upgradeTopic), kgo.RecordRetries(math.MaxInt32),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.ProducerLinger(5*time.Millisecond))
	createTopic(t, producer, upgradeTopic, 1, nil)
	loadWG.Add(1)
	go func() {
		defer loadWG.Done()
		load.produceLoop(producer, stopLoad)
	}()
	groups := &groupCheck{consumed: map[int64]bool{}}
	groups.startGroupConsumers(c, &groupWG, stopGroup, upgradeGroup, upgradeTopic, 2)
	defer func() { // on a failure before the end, end the load before the nodes stop
		for _, ch := range []chan struct{}{stopLoad, stopGroup} {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
		loadWG.Wait()
		groupWG.Wait()
	}()

	waitFor(t, 30*time.Second, func() error {
		pushes, records := load.counts()
		groups.mu.Lock()
		consumed := len(groups.consumed)
		groups.mu.Unlock()
		if pushes < 100 || records < 100 || consumed < 50 {
			return fmt.Errorf("warming up: %d pushes, %d Kafka records acknowledged, %d consumed by the group", pushes, records, consumed)
		}
		return nil
	}, c.diagnose)
	// The new binary starts from the old one's snapshot as well as its log.
	c.snapshotAll()

	// The upgrade, one node at a time.
	gate := &logFormatGate{t: t, c: c}
	gate.watchMixed()
	var steps []upgradeStep
	upgraded := map[int]bool{}
	upgradeStart := time.Now()
	for range c.nodes {
		n, leader := nextToUpgrade(c, upgraded)
		step := upgradeStep{id: n.id, role: "follower", start: time.Now()}
		if leader {
			step.role = "leader"
		}
		n.stop()
		step.exited = time.Since(step.start)
		n.binary = waggleBinary
		if len(upgraded) == len(c.nodes)-1 {
			// The last old node is down: until it runs the new binary the
			// cluster is still mixed; from its start on, the format may rise.
			gate.endMixed()
		}
		n.start()
		c.waitCaughtUp(n)
		step.end = time.Now()
		upgraded[n.id] = true
		steps = append(steps, step)
		// Some load through the cluster as it is now before the next
		// node: the new binary applies the old leader's entries live, not
		// only in its catch-up.
		pushes, records := load.counts()
		waitFor(t, 30*time.Second, func() error {
			p, r := load.counts()
			if p < pushes+200 || r < records+200 {
				return fmt.Errorf("%d of 200 pushes and %d of 200 Kafka records acknowledged since node %d caught up", p-pushes, r-records, n.id)
			}
			return nil
		}, c.diagnose)
	}
	upgradeEnd := steps[len(steps)-1].end

	// Once the format has risen, entries are written in the new format:
	// some transactions and pushes in it too before the load ends.
	gate.checkRaised()
	before := txns.count()
	waitFor(t, 30*time.Second, func() error {
		if n := txns.count() - before; n < 20 {
			return fmt.Errorf("%d of 20 transactions acknowledged at the raised format", n)
		}
		return nil
	}, c.diagnose)
	close(stopLoad)
	loadWG.Wait()

	report := upgradeReport(rel, head, steps, load, upgradeStart, upgradeEnd)
	t.Logf("rolling upgrade:\n%s", report)
	// A loose bound: a node's restart may cost an election, never writes
	// refused for this long.
	if stall := load.pushClock.longestGap(upgradeStart, upgradeEnd); stall > 15*time.Second {
		t.Errorf("no push was acknowledged for %v during the upgrade", stall.Round(time.Millisecond))
	}

	l := c.leader()
	for _, n := range c.nodes {
		c.waitCaughtUp(n)
	}
	checkUpgradePushes(t, c, l, load)
	checkUpgradeRecords(t, l, load)
	txns.check(t, l)

	// The group kept going: it reads to the end of the topic, records
	// produced after the upgrade included, and commits that.
	hw := highWatermark(t, l, upgradeTopic)
	waitFor(t, 30*time.Second, func() error {
		if off, ok := committedOffset(c, l, upgradeGroup); !ok || off < hw {
			return fmt.Errorf("group %s committed %d (answered %v), the topic ends at %d", upgradeGroup, off, ok, hw)
		}
		return nil
	}, c.diagnose)
	close(stopGroup)
	groupWG.Wait()
	final, _ := committedOffset(c, l, upgradeGroup)
	for _, v := range groups.check(final) {
		t.Errorf("Kafka group: %s", v)
	}
	t.Logf("Kafka group: 2 members, %d assignments, %d records consumed, final committed offset %d of %d",
		groups.assignments, len(groups.consumed), final, hw)

	checkOldBinaryCannotJoin(t, c, old)
}

// checkOldBinaryCannotJoin adds a node of the old release to the cluster,
// now at a format the old release cannot read: it must not become a voter
// (a voter that stops at the first entry it cannot read costs a quorum),
// and the cluster must go on taking writes.
func checkOldBinaryCannotJoin(t *testing.T, c *cluster, old string) {
	t.Helper()
	n := withArgs(newNode(t, len(c.nodes)+1), []string{"--join"})
	n.binary = old
	n.start()
	var e errorAnswer
	status := postJSON(t, c.leader().url("/api/v1/cluster/nodes"), map[string]any{"id": n.id, "raftAddr": n.raftAddr}, &e)
	if status != http.StatusConflict && status != http.StatusGatewayTimeout {
		t.Fatalf("adding a node of the old release: status %d %+v, want 409 log_format_too_old or 504 node_not_ready", status, e)
	}
	var cl clusterAnswer
	getJSON(t, c.leader().url("/api/v1/cluster"), &cl)
	for _, m := range cl.Members {
		if m.ID == n.id && m.Voter {
			t.Fatalf("the old release's node %d became a voter: %+v", n.id, cl)
		}
	}
	c.pushUntilAccepted(10*time.Second, pushItem{Queue: upgradeQueue, TransactionID: "after-old-join", Payload: "x"})
	t.Logf("a node of the old release was not made a voter: %d %s (%s)", status, e.Code, e.Error)
}

// release is one line of RELEASES.
type release struct {
	version, commit, date, summary string
}

var (
	releaseVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)
	commitHash     = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// newestRelease reads RELEASES at the repository's root and returns its
// last release (the file lists them oldest first).
func newestRelease(t *testing.T, root string) release {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "RELEASES"))
	if err != nil {
		t.Fatal(err)
	}
	var last release
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !releaseVersion.MatchString(f[0]) || !commitHash.MatchString(f[1]) {
			t.Fatalf("RELEASES line %d %q: want <version> <40-hex commit> <date> <summary>", i+1, line)
		}
		if _, err := time.Parse(time.DateOnly, f[2]); err != nil {
			t.Fatalf("RELEASES line %d: date %q: %v", i+1, f[2], err)
		}
		last = release{version: f[0], commit: f[1], date: f[2], summary: strings.Join(f[3:], " ")}
	}
	if last.commit == "" {
		t.Fatal("RELEASES lists no release")
	}
	return last
}

// gitOutput runs git in dir (the current directory when empty) and
// returns its output, trimmed.
func gitOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// buildRelease builds rel's cmd/waggle in a temporary worktree of the
// repository at root, removes the worktree and returns the binary. A
// commit missing from the repository (a shallow clone) fails the test: an
// upgrade test that skips itself would pass while checking nothing.
func buildRelease(t *testing.T, root string, rel release) string {
	t.Helper()
	if out, err := gitOutput(root, "cat-file", "-e", rel.commit+"^{commit}"); err != nil {
		t.Fatalf("release %s: commit %s is not in the repository at %s (a shallow clone? fetch the whole history: git fetch --unshallow): %v %s",
			rel.version, rel.commit, root, err, out)
	}
	src := filepath.Join(t.TempDir(), "src")
	if out, err := gitOutput(root, "worktree", "add", "--detach", src, rel.commit); err != nil {
		t.Fatalf("git worktree add %s: %v\n%s", rel.commit, err, out)
	}
	defer func() {
		if out, err := gitOutput(root, "worktree", "remove", "--force", src); err != nil {
			t.Errorf("git worktree remove %s: %v\n%s", src, err, out)
		}
	}()
	bin := filepath.Join(t.TempDir(), "waggle-"+rel.version)
	args := []string{"build", "-o", bin}
	if raceBuild {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./cmd/waggle")...)
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build release %s: %v\n%s", rel.version, err, out)
	}
	return bin
}

// nextToUpgrade picks a node not upgraded yet: a follower while one is
// left, the leader last.
func nextToUpgrade(c *cluster, upgraded map[int]bool) (n *node, leader bool) {
	l := c.leader()
	var left []*node
	for _, n := range c.nodes {
		if !upgraded[n.id] {
			left = append(left, n)
		}
	}
	for _, n := range left {
		if n != l {
			return n, false
		}
	}
	return l, true
}

// upgradeStep is one node's replacement.
type upgradeStep struct {
	id         int
	role       string // when it was stopped
	start, end time.Time
	exited     time.Duration // from SIGTERM to the old process's exit
}

// pushedMsg is an acknowledged HTTP push.
type pushedMsg struct {
	partition string
	offset    uint64
	payload   string
}

// kafkaMsg is an acknowledged Kafka record.
type kafkaMsg struct {
	key, value string
}

// upgradeLoad is the client traffic of the upgrade and what it was told.
type upgradeLoad struct {
	mu          sync.Mutex
	pushed      map[string]pushedMsg // transactionId → acknowledgement
	unknown     map[string]bool      // never answered and maybe applied
	refused     map[string]bool      // never answered and certainly not applied
	kafkaAcked  map[int64]kafkaMsg   // offset → record
	kafkaFailed map[string]bool      // values whose produce failed: maybe stored
	violations  []string             // answers no client should get
	pushClock   ackClock
	kafkaClock  ackClock
}

func (l *upgradeLoad) counts() (pushes, records int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pushed), len(l.kafkaAcked)
}

// pushLoop pushes ids u<w>-0, u<w>-1, … with random payloads to random
// partitions through random live nodes, retrying each until it is
// answered, as a client that wants its write stored would.
func (l *upgradeLoad) pushLoop(c *cluster, w int, stop <-chan struct{}) {
	for i := 0; ; i++ {
		id := fmt.Sprintf("u%d-%d", w, i)
		item := pushItem{Queue: upgradeQueue, Partition: upgradePartitions[rand.IntN(len(upgradePartitions))],
			TransactionID: id, Payload: randomText(16 + rand.IntN(200))}
		maybeApplied := false
		for attempt := 0; ; attempt++ {
			select {
			case <-stop:
				l.mu.Lock()
				if maybeApplied {
					l.unknown[id] = true
				} else if attempt > 0 {
					l.refused[id] = true
				}
				l.mu.Unlock()
				return
			default:
			}
			var out []pushAnswer
			status, err := chaosPost(c, "/api/v1/push", map[string]any{"items": []pushItem{item}}, &out)
			if err != nil || status != http.StatusCreated {
				maybeApplied = maybeApplied || !notApplied(err)
				time.Sleep(20 * time.Millisecond)
				continue
			}
			l.mu.Lock()
			// The first answer is queued; a retry's is queued or, when an
			// earlier attempt may have been applied, duplicate.
			if len(out) != 1 || out[0].Offset == nil || !(out[0].Status == "queued" || maybeApplied && out[0].Status == "duplicate") {
				l.violations = append(l.violations, fmt.Sprintf("push %s (attempt %d, earlier attempt maybe applied %v) answered %+v", id, attempt, maybeApplied, out))
			} else {
				l.pushed[id] = pushedMsg{partition: item.Partition, offset: *out[0].Offset, payload: item.Payload.(string)}
				l.pushClock.add()
			}
			l.mu.Unlock()
			break
		}
	}
}

// produceLoop produces keyed records with unique random values, about
// 500 a second at most, and waits for every answer once stopped.
func (l *upgradeLoad) produceLoop(cl *kgo.Client, stop <-chan struct{}) {
	var pending sync.WaitGroup
	defer pending.Wait()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(2 * time.Millisecond):
		}
		msg := kafkaMsg{key: fmt.Sprint("key-", i%16), value: fmt.Sprintf("v%d-%s", i, randomText(8))}
		pending.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Key: []byte(msg.key), Value: []byte(msg.value)}, func(r *kgo.Record, err error) {
			defer pending.Done()
			l.mu.Lock()
			defer l.mu.Unlock()
			if err != nil {
				l.kafkaFailed[msg.value] = true
				return
			}
			if prev, ok := l.kafkaAcked[r.Offset]; ok {
				l.violations = append(l.violations, fmt.Sprintf("Kafka acknowledged %q and %q both at offset %d", prev.value, msg.value, r.Offset))
			}
			l.kafkaAcked[r.Offset] = msg
			l.kafkaClock.add()
		})
	}
}

func randomText(n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[rand.IntN(len(letters))]
	}
	return string(b)
}

// upgradeReport tabulates the upgrade: per node how long the old process
// took to exit and the node to be caught up on the new binary, and the
// longest time without an acknowledgement while it was replaced.
func upgradeReport(rel release, head string, steps []upgradeStep, load *upgradeLoad, start, end time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s) → HEAD %s\n", rel.version, rel.commit[:7], head[:7])
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "node\twas\tSIGTERM→exit\tstop→caught up\tlongest push stall\tlongest Kafka stall")
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	for _, s := range steps {
		fmt.Fprintf(tw, "%d\t%s\t%v\t%v\t%v\t%v\n", s.id, s.role, ms(s.exited), ms(s.end.Sub(s.start)),
			ms(load.pushClock.longestGap(s.start, s.end)), ms(load.kafkaClock.longestGap(s.start, s.end)))
	}
	fmt.Fprintf(tw, "all\t\t\t%v\t%v\t%v\n", ms(end.Sub(start)), ms(load.pushClock.longestGap(start, end)), ms(load.kafkaClock.longestGap(start, end)))
	tw.Flush()
	load.mu.Lock()
	defer load.mu.Unlock()
	fmt.Fprintf(&b, "HTTP pushes: %d acknowledged, %d unknown, %d refused; Kafka records: %d acknowledged, %d failed",
		len(load.pushed), len(load.unknown), len(load.refused), len(load.kafkaAcked), len(load.kafkaFailed))
	return b.String()
}

// checkUpgradePushes requires every acknowledged push stored once at its
// offset with its payload, the same on every node, nothing stored that no
// client may have written, and a re-push of acknowledged ids (written by
// the old binary and by the new) answered duplicate with the original
// offset.
func checkUpgradePushes(t *testing.T, c *cluster, l *node, load *upgradeLoad) {
	t.Helper()
	load.mu.Lock()
	defer load.mu.Unlock()
	for _, v := range load.violations {
		t.Errorf("during the upgrade: %s", v)
	}
	type storedMsg struct {
		partition string
		rec       fetchRecord
	}
	stored := map[string][]storedMsg{}
	for _, p := range upgradePartitions {
		recs := l.fetchAll(upgradeQueue, p).Entries[0].Records
		for i, r := range recs {
			if r.Offset != uint64(i) {
				t.Fatalf("%s/%s: record %d at offset %d", upgradeQueue, p, i, r.Offset)
			}
			stored[r.TransactionID] = append(stored[r.TransactionID], storedMsg{p, r})
		}
		for _, n := range c.nodes {
			if n == l {
				continue
			}
			other := n.fetchAll(upgradeQueue, p).Entries[0].Records
			if len(other) != len(recs) {
				t.Fatalf("%s/%s: node %d holds %d records, the leader %d", upgradeQueue, p, n.id, len(other), len(recs))
			}
			for i := range other {
				if other[i].TransactionID != recs[i].TransactionID || other[i].MessageID != recs[i].MessageID {
					t.Fatalf("%s/%s offset %d: node %d holds %s, the leader %s", upgradeQueue, p, i, n.id, other[i].TransactionID, recs[i].TransactionID)
				}
			}
		}
	}
	var problems []string
	for id, a := range load.pushed {
		s := stored[id]
		if len(s) != 1 {
			problems = append(problems, fmt.Sprintf("acknowledged %s (%s@%d) is stored %d times", id, a.partition, a.offset, len(s)))
			continue
		}
		var payload string
		json.Unmarshal(s[0].rec.Payload, &payload)
		if s[0].partition != a.partition || s[0].rec.Offset != a.offset || payload != a.payload {
			problems = append(problems, fmt.Sprintf("acknowledged %s at %s@%d is stored at %s@%d with payload %s",
				id, a.partition, a.offset, s[0].partition, s[0].rec.Offset, s[0].rec.Payload))
		}
	}
	unknownStored := 0
	for id, s := range stored {
		_, acked := load.pushed[id]
		switch {
		case len(s) > 1:
			problems = append(problems, fmt.Sprintf("%s is stored %d times", id, len(s)))
		case !acked && !load.unknown[id]:
			problems = append(problems, fmt.Sprintf("%s is stored at %s@%d, but no push of it may have been applied (refused: %v)",
				id, s[0].partition, s[0].rec.Offset, load.refused[id]))
		case load.unknown[id]:
			unknownStored++
		}
	}
	for i, p := range problems {
		if i == 10 {
			t.Errorf("… and %d more", len(problems)-i)
			break
		}
		t.Error(p)
	}

	// Re-push a sample of acknowledged ids, the first ones (written by
	// the old binary) and random others.
	var sample []string
	for w := range 3 {
		sample = append(sample, fmt.Sprintf("u%d-0", w), fmt.Sprintf("u%d-1", w))
	}
	for id := range load.pushed { // a random order
		if len(sample) == 20 {
			break
		}
		sample = append(sample, id)
	}
	repushed := 0
	for _, id := range sample {
		a, ok := load.pushed[id]
		if !ok {
			continue // a pusher's first pushes are acknowledged unless the load stopped first
		}
		repushed++
		got := c.pushUntilAccepted(10*time.Second, pushItem{Queue: upgradeQueue, Partition: a.partition, TransactionID: id, Payload: a.payload})[0]
		if got.Status != "duplicate" || got.Offset == nil || *got.Offset != a.offset {
			t.Errorf("re-push of %s (acknowledged at %s@%d) answered %+v, want duplicate at %d", id, a.partition, a.offset, got, a.offset)
		}
	}
	t.Logf("HTTP: %d acknowledged pushes checked against all 3 nodes; %d of %d unknown outcomes stored; %d acknowledged ids re-pushed",
		len(load.pushed), unknownStored, len(load.unknown), repushed)
}

// checkUpgradeRecords requires every acknowledged Kafka record readable
// once, at its offset, and every stored record one that was produced.
func checkUpgradeRecords(t *testing.T, l *node, load *upgradeLoad) {
	t.Helper()
	hw := highWatermark(t, l, upgradeTopic)
	recs := consumeN(t, []string{l.kafkaAddr}, upgradeTopic, int(hw))
	load.mu.Lock()
	defer load.mu.Unlock()
	byOffset := map[int64]*kgo.Record{}
	times := map[string]int{}
	var problems []string
	for _, r := range recs {
		if byOffset[r.Offset] != nil {
			problems = append(problems, fmt.Sprintf("offset %d read twice", r.Offset))
		}
		byOffset[r.Offset] = r
		times[string(r.Value)]++
	}
	for off, m := range load.kafkaAcked {
		r := byOffset[off]
		if r == nil || string(r.Key) != m.key || string(r.Value) != m.value {
			got := "nothing"
			if r != nil {
				got = fmt.Sprintf("%s=%s", r.Key, r.Value)
			}
			problems = append(problems, fmt.Sprintf("acknowledged %s=%s at offset %d reads %s", m.key, m.value, off, got))
		}
	}
	ackedValues := map[string]bool{}
	for _, m := range load.kafkaAcked {
		ackedValues[m.value] = true
	}
	failedStored := 0
	for v, n := range times {
		if n > 1 {
			problems = append(problems, fmt.Sprintf("value %s stored %d times", v, n))
		}
		switch {
		case load.kafkaFailed[v]:
			failedStored++
		case !ackedValues[v]:
			problems = append(problems, fmt.Sprintf("value %s is stored but was never produced", v))
		}
	}
	for i, p := range problems {
		if i == 10 {
			t.Errorf("… and %d more", len(problems)-i)
			break
		}
		t.Error(p)
	}
	t.Logf("Kafka: %d acknowledged records checked (high watermark %d); %d of %d failed produces stored",
		len(load.kafkaAcked), hw, failedStored, len(load.kafkaFailed))
}

// txnLoad is a client writing transactions (a push and a KV put each)
// through the upgrade: while the cluster is at the old release's log
// format they are entries the old leader writes and new nodes apply, after
// it rises they are the new format's.
type txnLoad struct {
	mu    sync.Mutex
	acked []int // transactions answered success
}

func (x *txnLoad) loop(c *cluster, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		id := fmt.Sprint("t-", i)
		var out txnAnswer
		status, err := chaosPost(c, "/api/v1/transaction", map[string]any{
			"operations": []map[string]any{{"type": "push", "items": []pushItem{{Queue: "upgrade-txn", TransactionID: id, Payload: id}}}},
			"kv":         []map[string]any{{"op": "put", "ns": "upgrade-txn", "key": id, "value": i, "forever": true}},
		}, &out)
		if err == nil && status == http.StatusOK && out.Success {
			x.mu.Lock()
			x.acked = append(x.acked, i)
			x.mu.Unlock()
		}
	}
}

func (x *txnLoad) count() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.acked)
}

// check reads every acknowledged transaction's KV row back from l.
func (x *txnLoad) check(t *testing.T, l *node) {
	t.Helper()
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.acked) < 10 {
		t.Fatalf("only %d transactions acknowledged during the upgrade", len(x.acked))
	}
	for _, i := range x.acked {
		var row struct {
			Value json.RawMessage `json:"value"`
		}
		if status := getJSON(t, l.url(fmt.Sprintf("/api/v1/kv/upgrade-txn/t-%d", i)), &row); status != http.StatusOK || string(row.Value) != fmt.Sprint(i) {
			t.Errorf("transaction t-%d was acknowledged; its KV row answers %d %s", i, status, row.Value)
		}
	}
	t.Logf("transactions: %d acknowledged, each KV row read back", len(x.acked))
}

// logFormatListing is the log format gate's part of GET /api/v1/cluster:
// the cluster's active raft log format and the highest each member
// understands; absent from a binary without the gate, meaning 1.
type logFormatListing struct {
	LogFormat *int `json:"logFormat"`
	Members   []struct {
		ID        int  `json:"id"`
		LogFormat *int `json:"logFormat"`
	} `json:"members"`
}

// logFormatGate checks that the cluster's log format stays the old
// release's while old binaries are members and rises to the new binary's
// once all run it.
type logFormatGate struct {
	t          *testing.T
	c          *cluster
	old        int // the old release's format: 1 when it reports none
	stop, done chan struct{}
	samples    int
	violations []string
}

// settleOld waits until the all-old cluster runs at the highest format its
// members read (a release that raises formats does so soon after start)
// and records it.
func (g *logFormatGate) settleOld() {
	g.t.Helper()
	waitFor(g.t, 30*time.Second, func() error {
		l, err := readLogFormat(g.c.leader())
		if err != nil {
			return err
		}
		member := 1
		for _, m := range l.Members {
			member = formatOr1(m.LogFormat)
		}
		cluster := formatOr1(l.LogFormat)
		if cluster != member {
			return fmt.Errorf("the old cluster runs log format %d, its members read %d", cluster, member)
		}
		g.old = cluster
		return nil
	})
	g.t.Logf("the old release's cluster runs log format %d", g.old)
}

// watchMixed asks every live node for the cluster's format, again and
// again, until endMixed (or the test's end).
func (g *logFormatGate) watchMixed() {
	g.settleOld()
	g.stop, g.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(g.done)
		for {
			select {
			case <-g.stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			for _, n := range g.c.live() {
				l, err := readLogFormat(n)
				if err != nil {
					continue // a node starting or stopping
				}
				g.samples++
				if f := formatOr1(l.LogFormat); f != g.old {
					g.violations = append(g.violations, fmt.Sprintf("node %d answered logFormat %d", n.id, f))
				}
			}
		}
	}()
	g.t.Cleanup(func() {
		select {
		case <-g.stop:
		default:
			close(g.stop)
		}
		<-g.done
	})
}

// readLogFormat asks n's GET /api/v1/cluster, with a short timeout.
func readLogFormat(n *node) (logFormatListing, error) {
	var l logFormatListing
	resp, err := chaosHTTP.Get(n.url("/api/v1/cluster"))
	if err != nil {
		return l, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return l, fmt.Errorf("GET /api/v1/cluster: status %d", resp.StatusCode)
	}
	return l, json.NewDecoder(resp.Body).Decode(&l)
}

// endMixed stops the watch and reports what it saw: every answer it got
// was given while an old binary was a member (all of them at first).
func (g *logFormatGate) endMixed() {
	g.t.Helper()
	close(g.stop)
	<-g.done
	for _, v := range g.violations {
		g.t.Errorf("log format rose while the cluster was mixed: %s", v)
	}
	if g.samples == 0 {
		g.t.Error("the log format was never read while old binaries were members")
	}
}

// checkRaised requires the cluster's format to reach the one every
// member reports within 30 s of the upgrade's end.
func (g *logFormatGate) checkRaised() {
	g.t.Helper()
	l, err := readLogFormat(g.c.leader())
	if err != nil {
		g.t.Fatalf("the leader: %v", err)
	}
	reported := false
	for _, m := range l.Members {
		reported = reported || m.LogFormat != nil
	}
	if !reported {
		g.t.Error("after the upgrade no member reports logFormat in GET /api/v1/cluster")
		return
	}
	var want int
	waitFor(g.t, 30*time.Second, func() error {
		l, err := readLogFormat(g.c.leader())
		if err != nil {
			return err
		}
		want = 0
		for _, m := range l.Members {
			if m.LogFormat == nil {
				return fmt.Errorf("member %d reports no logFormat", m.ID)
			}
			if want != 0 && *m.LogFormat != want {
				return fmt.Errorf("members report logFormat %d and %d", want, *m.LogFormat)
			}
			want = *m.LogFormat
		}
		if l.LogFormat == nil || *l.LogFormat != want {
			return fmt.Errorf("the cluster's logFormat is %v, every member understands %d", fmtIntPtr(l.LogFormat), want)
		}
		return nil
	})
	if want <= g.old {
		g.t.Errorf("the new binary reads log format %d, the old release %d: the gate was not exercised", want, g.old)
	}
	g.t.Logf("log format gate: %d in %d answers while old binaries were members, %d once all run the new binary", g.old, g.samples, want)
}

// formatOr1 is a reported log format; a binary that reports none reads 1.
func formatOr1(p *int) int {
	if p == nil {
		return 1
	}
	return *p
}

func fmtIntPtr(p *int) string {
	if p == nil {
		return "absent"
	}
	return fmt.Sprint(*p)
}
