package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The chaos test runs a workload against a cluster (3 nodes in TestChaos,
// 5 in TestChaosOnFiveNodes) while a nemesis injects faults, records every
// operation's outcome (ok, fail, or info: unknown), heals, reads
// everything back and checks waggle's promises:
//
//   - pushes with deterministic ids, retried until answered: no
//     acknowledged write lost, no id stored twice, offsets gapless, and a
//     retry of a stored id answers duplicate with the original offset;
//   - once gates: at most one winner per key;
//   - transactions pushing to two queues with a KV marker: all or nothing;
//   - a KV counter: exactly the acknowledged incrs.
//
// Pushes, once, transactions and incrs carry an Idempotency-Key and are
// sent again under it until answered (untilAnswered), so none is left
// unknown.
//
// WAGGLE_CHAOS_SECONDS sets the length (default 90 s in the regular run, so in .ci/run).
// WAGGLE_CHAOS_GROUPS=3 runs the cluster with three raft groups
// (--data-groups): the queues, namespaces and topic are placed on them by
// name, and each group's leader is a target of its own. The transaction's
// queues and namespace share the key "chaostxn", so they share a group.

type opOutcome int

const (
	opOK opOutcome = iota
	opFail
	opInfo // unknown: a timeout or a dropped connection
)

type historyEntry struct {
	Kind    string
	Key     string
	Outcome opOutcome
	Detail  string // offset or message id when ok
}

type history struct {
	mu      sync.Mutex
	entries []historyEntry
}

func (h *history) add(e historyEntry) {
	h.mu.Lock()
	h.entries = append(h.entries, e)
	h.mu.Unlock()
}

func (h *history) count(kind string, o opOutcome) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, e := range h.entries {
		if e.Kind == kind && e.Outcome == o {
			n++
		}
	}
	return n
}

// chaosClient sends to a random live node with a short timeout: a fault
// shows up as an unknown (info) outcome, never as a hang.
var chaosHTTP = &http.Client{Timeout: 3 * time.Second}

func chaosPost(c *cluster, path string, body any, out any) (int, error) {
	return chaosPostKeyed(c, path, "", body, out)
}

// chaosPostKeyed is chaosPost with an Idempotency-Key (none when empty).
func chaosPostKeyed(c *cluster, path, key string, body any, out any) (int, error) {
	live := c.live()
	if len(live) == 0 {
		return 0, fmt.Errorf("no live node")
	}
	n := live[rand.IntN(len(live))]
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, n.url(path), bytesReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := chaosHTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e errorAnswer
		json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, &apiError{status: resp.StatusCode, code: e.Code}
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return 0, err
		}
	}
	return resp.StatusCode, nil
}

// apiError is an error answer from the broker.
type apiError struct {
	status int
	code   string
}

func (e *apiError) Error() string { return fmt.Sprintf("status %d %s", e.status, e.code) }

// untilAnswered sends a write under its Idempotency-Key until it gets an
// answer: a success, or a refusal that says nothing was done (a 4xx). A
// timeout, a broken connection, no_leader or outcome_unknown leave the
// outcome open and are sent again under the same key, to any node: an
// applied write then answers its first outcome, and none is applied twice.
// It returns the answer's status (0: none before the deadline) and how
// many tries left the outcome open.
func untilAnswered(c *cluster, path, key string, body, out any) (status, open int) {
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); open++ {
		status, err := chaosPostKeyed(c, path, key, body, out)
		var api *apiError
		if err == nil {
			return status, open
		}
		if errors.As(err, &api) && api.status < 500 && api.status != http.StatusTooManyRequests {
			return api.status, open
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, open
}

// notApplied reports whether a failed request certainly changed nothing:
// it never reached a node, or the broker said so (no_leader, a 4xx).
// Anything else (a timeout, a broken connection, outcome_unknown) may
// have been applied.
func notApplied(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var api *apiError
	return errors.As(err, &api) && (api.code == "no_leader" || api.status < 500)
}

func TestChaos(t *testing.T) {
	runChaos(t, 90, nil, processFaults)
}

// chaosFault is one kind of fault the nemesis injects, healed before
// inject returns.
type chaosFault struct {
	name   string
	inject func()
}

// processFaults are the faults of processes and links: kill -9, SIGSTOP
// and partitions. pushed counts acknowledged pushes, so a fault can wait
// for writes to flow again.
func processFaults(c *cluster, links *links, pushed *atomic.Int64) []chaosFault {
	return []chaosFault{
		{"kill -9 leader", func() { killUntilWritesFlow(pushed, c.leader()) }},
		{"SIGSTOP leader 2 s", func() { pauseLeader(c, 2*time.Second) }},
		{"kill -9 follower", func() { // restarted after 1 s
			f := c.followers()[0]
			f.kill9()
			time.Sleep(time.Second)
			f.start()
		}},
		{"kill -9 all nodes", func() {
			for _, n := range c.live() {
				n.kill9()
			}
			for _, n := range c.nodes {
				n.start()
			}
		}},
		{"partition leader 3 s", func() { // cut off from both followers
			links.isolate(c, c.leader().id)
			time.Sleep(3 * time.Second)
			links.heal()
		}},
		{"partition follower 3 s", func() {
			links.isolate(c, c.followers()[0].id)
			time.Sleep(3 * time.Second)
			links.heal()
		}},
	}
}

// killUntilWritesFlow kills nodes with -9 together and starts them again
// once a push was acknowledged after the kill (or 20 s passed).
func killUntilWritesFlow(pushed *atomic.Int64, nodes ...*node) {
	before := pushed.Load()
	for _, n := range nodes {
		n.kill9()
	}
	waitProgress(pushed, before, 20*time.Second)
	for _, n := range nodes {
		n.start()
	}
}

// pauseLeader stops the leader's process (SIGSTOP) for d, then lets it go on.
func pauseLeader(c *cluster, d time.Duration) {
	l := c.leader()
	l.cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(d)
	l.cmd.Process.Signal(syscall.SIGCONT)
}

// runChaos runs the chaos workload on three nodes for seconds
// (WAGGLE_CHAOS_SECONDS overrides it; WAGGLE_CHAOS_GROUPS sets
// --data-groups) under the faults nemesis returns, then checks every
// answer. prepare, when set, adjusts the nodes before they first start.
func runChaos(t *testing.T, seconds int, prepare func(*cluster), nemesisOf func(*cluster, *links, *atomic.Int64) []chaosFault) {
	runChaosOn(t, chaosRun{nodes: 3, seconds: seconds, prepare: prepare, nemesis: nemesisOf})
}

// chaosRun describes one run of the chaos workload.
type chaosRun struct {
	nodes   int            // cluster size
	seconds int            // the faulty part; WAGGLE_CHAOS_SECONDS overrides it
	prepare func(*cluster) // adjusts the nodes before they first start (may be nil)
	// nemesis returns the faults, injected in turn (each at least once),
	// each healed before the next; pushed counts acknowledged pushes.
	nemesis func(c *cluster, links *links, pushed *atomic.Int64) []chaosFault
	// maxUnavailable, when set, fails the run if no push was acknowledged
	// for longer than it during the faulty part (a liveness bound).
	maxUnavailable time.Duration
	// extra are serve flags every node gets.
	extra []string
}

// runChaosOn runs the chaos workload on run.nodes nodes under run's
// nemesis, heals, checks every answer and returns the cluster.
func runChaosOn(t *testing.T, run chaosRun) *cluster {
	seconds := run.seconds
	if v, err := strconv.Atoi(os.Getenv("WAGGLE_CHAOS_SECONDS")); err == nil && v > 0 {
		seconds = v
	}
	extra := run.extra
	if g := os.Getenv("WAGGLE_CHAOS_GROUPS"); g != "" && extra == nil {
		extra = []string{"--data-groups", g}
	}
	c, links := newPartitionableCluster(t, run.nodes)
	if run.prepare != nil {
		run.prepare(c)
	}
	c.start(extra...)
	h := &history{}
	stop := make(chan struct{})
	var wg sync.WaitGroup

	// Pushers: each pushes ids p<w>-<i> in order, retrying each until it is
	// answered, and records the first and the retried answers.
	acked := sync.Map{} // id -> offset of its acknowledgement
	pushClock, kafkaClock := &ackClock{}, &ackClock{}
	var pushed atomic.Int64
	var openTries sync.Map // kind -> *atomic.Int64: tries whose outcome was open, retried under their key
	countOpen := func(kind string, n int) {
		v, _ := openTries.LoadOrStore(kind, new(atomic.Int64))
		v.(*atomic.Int64).Add(int64(n))
	}
	openCount := func(kind string) int64 {
		if v, ok := openTries.Load(kind); ok {
			return v.(*atomic.Int64).Load()
		}
		return 0
	}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("p%d-%d", w, i)
				var out []pushAnswer
				status, open := untilAnswered(c, "/api/v1/push", "push-"+id, map[string]any{"items": []pushItem{{Queue: "chaos", TransactionID: id, Payload: id}}}, &out)
				countOpen("push", open)
				if status != http.StatusCreated || len(out) != 1 {
					h.add(historyEntry{Kind: "push", Key: id, Outcome: opInfo, Detail: fmt.Sprint(status)})
					continue
				}
				off := *out[0].Offset
				if prev, ok := acked.Load(id); ok && prev.(uint64) != off {
					h.add(historyEntry{Kind: "push-conflict", Key: id, Outcome: opFail, Detail: fmt.Sprintf("%d then %d", prev, off)})
				}
				acked.Store(id, off)
				if out[0].Status != "duplicate" && out[0].Status != "queued" {
					h.add(historyEntry{Kind: "push", Key: id, Outcome: opFail, Detail: out[0].Status})
				}
				h.add(historyEntry{Kind: "push", Key: id, Outcome: opOK, Detail: strconv.FormatUint(off, 10)})
				pushed.Add(1)
				pushClock.add()
			}
		}()
	}

	// Once racers: 8 clients race on keys k-0, k-1, …; a winner is recorded
	// only on an answered won:true.
	winners := sync.Map{} // key -> count of won answers
	for racer := range 8 {
		untilStopped(&wg, stop, func(i int) {
			key := fmt.Sprint("k-", i/4) // four tries per key
			var out struct{ Won bool }
			status, open := untilAnswered(c, "/api/v1/kv/once", fmt.Sprintf("once-%d-%d", racer, i), map[string]any{"ns": "chaos", "key": key, "forever": true}, &out)
			countOpen("once", open)
			if status != http.StatusOK {
				h.add(historyEntry{Kind: "once", Key: key, Outcome: opInfo})
				return
			}
			h.add(historyEntry{Kind: "once", Key: key, Outcome: opOK, Detail: strconv.FormatBool(out.Won)})
			if out.Won {
				v, _ := winners.LoadOrStore(key, new(atomic.Int32))
				v.(*atomic.Int32).Add(1)
			}
		})
	}

	// Transactions: each pushes t-<i> to queues chaos-a and chaos-b and
	// writes KV chaos-txn/t-<i>, all or nothing.
	var txns atomic.Int64
	untilStopped(&wg, stop, func(i int) {
		id := fmt.Sprint("t-", i)
		var out txnAnswer
		status, open := untilAnswered(c, "/api/v1/transaction", "txn-"+id, map[string]any{
			"operations": []map[string]any{
				{"type": "push", "items": []pushItem{{Queue: "chaostxn.a", TransactionID: id, Payload: id}}},
				{"type": "push", "items": []pushItem{{Queue: "chaostxn.b", TransactionID: id, Payload: id}}},
			},
			"kv": []map[string]any{{"op": "put", "ns": "chaostxn", "key": id, "value": id, "forever": true}},
		}, &out)
		countOpen("txn", open)
		switch {
		case status != http.StatusOK:
			h.add(historyEntry{Kind: "txn", Key: id, Outcome: opInfo})
		case out.Success:
			h.add(historyEntry{Kind: "txn", Key: id, Outcome: opOK})
			txns.Add(1)
		default:
			h.add(historyEntry{Kind: "txn", Key: id, Outcome: opFail, Detail: out.Reason})
		}
	})

	// A transaction reader: one fetch is one consistent view of a node's
	// store, and every transaction adds one message to each of chaos-a and
	// chaos-b or to neither, so in any read the two hold as many.
	var txnReads, partialReads atomic.Int64
	untilStopped(&wg, stop, func(int) {
		defer time.Sleep(10 * time.Millisecond)
		entry := func(q string) map[string]any {
			return map[string]any{"queue": q, "partition": "Default", "offset": 0, "maxBytes": 1}
		}
		var f fetchAnswer
		status, err := chaosPost(c, "/api/v1/fetch", map[string]any{"entries": []map[string]any{entry("chaostxn.a"), entry("chaostxn.b")}}, &f)
		if err != nil || status != http.StatusOK || len(f.Entries) != 2 {
			return // not answered, or the queues do not exist yet
		}
		txnReads.Add(1)
		if a, b := f.Entries[0].HighWatermark, f.Entries[1].HighWatermark; a != b {
			partialReads.Add(1)
			h.add(historyEntry{Kind: "txn-read", Outcome: opFail, Detail: fmt.Sprintf("chaos-a %d, chaos-b %d", a, b)})
		}
	})

	// A KV counter: every acknowledged incr must count, and no more than
	// the acknowledged plus the unknown ones may (no lost or phantom write).
	var incrOK, incrFail, incrInfo atomic.Int64
	untilStopped(&wg, stop, func(i int) {
		var out struct{ OK bool }
		status, open := untilAnswered(c, "/api/v1/kv", fmt.Sprint("incr-", i), map[string]any{"operations": []map[string]any{{"op": "incr", "ns": "chaos", "key": "counter", "forever": true}}}, &out)
		countOpen("incr", open)
		switch {
		case status == 0:
			incrInfo.Add(1)
		case status == http.StatusOK && out.OK:
			incrOK.Add(1)
		default:
			incrFail.Add(1)
		}
	})

	diverged := c.watchDivergence(&wg, stop)

	// KV register clients: three per key, checked by porcupine at the end.
	reg := &registerHistory{start: time.Now()}
	for id := range 6 {
		rc := &registerClient{id: id, h: reg}
		untilStopped(&wg, stop, func(i int) { rc.step(c, i) })
	}

	// A franz-go idempotent producer writes numbered records to topic
	// chaos-k; acknowledged ones must be stored exactly once, in order.
	brokers := c.kafkaAddrs()
	producer := kafkaClient(t, brokers, kgo.DefaultProduceTopic("chaos-k"), kgo.RecordRetries(math.MaxInt32),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.ProducerLinger(5*time.Millisecond))
	createTopic(t, producer, "chaos-k", 1, nil)
	// The group's members outlive the faults: once healed, they must
	// consume and commit to the end of chaos-k.
	groups := &groupCheck{consumed: map[int64]bool{}}
	groupStop := make(chan struct{})
	var groupWG sync.WaitGroup
	groups.startGroupConsumers(c, &groupWG, groupStop, "chaos-g", "chaos-k", 2)
	var kmu sync.Mutex
	kafkaAcked := map[string]bool{}
	kafkaFailed := 0
	var kwg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				kwg.Wait()
				return
			default:
			}
			v := strconv.Itoa(i)
			kwg.Add(1)
			producer.Produce(context.Background(), &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
				defer kwg.Done()
				kmu.Lock()
				defer kmu.Unlock()
				if err != nil {
					kafkaFailed++
					return
				}
				kafkaAcked[v] = true
				kafkaClock.add()
			})
			if i%200 == 199 {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()

	// A topic with a short retention under the same faults: records go in
	// whole segments once older than it, never sooner (checked at the end
	// against when each acknowledged record was sent).
	const retention = 4 * time.Second
	createTopic(t, producer, "chaos-r", 1, map[string]string{"retention.ms": strconv.Itoa(int(retention.Milliseconds())), "segment.ms": "1000"})
	retainedSentAt := map[int64]time.Time{} // offset -> sent (before the produce call)
	wg.Add(1)
	go func() {
		defer wg.Done()
		var rwg sync.WaitGroup
		defer rwg.Wait()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			sent := time.Now()
			rwg.Add(1)
			producer.Produce(context.Background(), &kgo.Record{Topic: "chaos-r", Value: []byte("r")}, func(r *kgo.Record, err error) {
				defer rwg.Done()
				if err == nil {
					kmu.Lock()
					retainedSentAt[r.Offset] = sent
					kmu.Unlock()
				}
			})
		}
	}()

	// The nemesis: a fault every few seconds, healed before the next.
	faults := map[string]int{}
	// A quarter of the run without faults first: the throughput to compare
	// the faulty part with.
	runStart := time.Now()
	time.Sleep(time.Duration(seconds) * time.Second / 4)
	calmEnd := time.Now()
	var maxGap time.Duration
	faultTook := map[string]time.Duration{} // the longest injection (fault and heal) of each kind
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	nemesis := run.nemesis(c, links, &pushed)
	for round := 0; time.Now().Before(deadline) || round < len(nemesis); round++ {
		time.Sleep(1500 * time.Millisecond)
		fault := nemesis[round%len(nemesis)]
		start := time.Now()
		fault.inject()
		faults[fault.name]++
		healed := time.Now()
		faultTook[fault.name] = max(faultTook[fault.name], healed.Sub(start))
		if err := c.healed(links); err != nil {
			t.Errorf("after %q: %v", fault.name, err)
			break
		}
		waitProgress(&pushed, pushed.Load(), 30*time.Second)
		gap := time.Since(start)
		maxGap = max(maxGap, gap)
		if time.Since(healed) > 8*time.Second {
			t.Logf("slow recovery: %s at %s took %v, %v after it healed\n%s", fault.name, start.Format("15:04:05.000"), gap.Round(time.Millisecond),
				time.Since(healed).Round(time.Millisecond), c.diagnose())
		}
	}
	faultEnd := time.Now()
	close(stop)
	wg.Wait()
	switch found, summary := diverged.result(); {
	case found != "":
		t.Errorf("replicas diverged during the run: %s (%s)", found, summary)
	case diverged.compared == 0:
		t.Errorf("replicas were never compared during the run: %s", summary)
	default:
		t.Logf("replicas during the run: no divergence; %s", summary)
	}
	unavailable := pushClock.longestGap(calmEnd, faultEnd)
	t.Logf("throughput without faults: %.0f pushes/s, %.0f Kafka records/s; with faults: %.0f pushes/s, %.0f Kafka records/s; longest stretch without an acknowledged push %v",
		pushClock.rate(runStart, calmEnd), kafkaClock.rate(runStart, calmEnd), pushClock.rate(calmEnd, faultEnd), kafkaClock.rate(calmEnd, faultEnd),
		unavailable.Round(time.Millisecond))
	if run.maxUnavailable > 0 && unavailable > run.maxUnavailable {
		t.Errorf("no push acknowledged for %v during the faults (bound %v)", unavailable.Round(time.Millisecond), run.maxUnavailable)
	}
	var injected []string
	for _, f := range nemesis {
		if took, ok := faultTook[f.name]; ok {
			injected = append(injected, fmt.Sprintf("%s ×%d (longest %v)", f.name, faults[f.name], took.Round(100*time.Millisecond)))
			delete(faultTook, f.name)
		}
	}
	t.Logf("faults injected in %v: %s", faultEnd.Sub(calmEnd).Round(time.Second), strings.Join(injected, "; "))

	// Heal and read back from the leader.
	l := c.leader()
	for _, n := range c.live() {
		c.waitCaughtUp(n)
	}
	hwK := highWatermark(t, l, "chaos-k")
	groupCaughtUp, groupErr := groups.waitCommitted(c, l, "chaos-g", hwK, chaosGroupCatchUp)
	close(groupStop)
	groupWG.Wait()
	if groupErr != nil {
		t.Errorf("Kafka group after the faults: %v", groupErr)
	}
	c.replicasAgree()
	recs := l.fetchAll("chaos", "Default").Entries[0].Records
	stored := map[string]uint64{}
	for i, r := range recs {
		if r.Offset != uint64(i) {
			t.Fatalf("offset gap: record %d at offset %d", i, r.Offset)
		}
		if _, dup := stored[r.TransactionID]; dup {
			t.Fatalf("id %s stored twice", r.TransactionID)
		}
		stored[r.TransactionID] = r.Offset
	}
	// Retention dropped only records older than it.
	checkedAt := time.Now()
	first := earliestOffset(t, producer, "chaos-r")
	kmu.Lock()
	dropped := 0
	for off, sent := range retainedSentAt {
		if off < first {
			dropped++
			if !sent.Before(checkedAt.Add(-retention)) {
				t.Errorf("retention dropped record %d of chaos-r, sent %v before the check (retention %v)", off, checkedAt.Sub(sent), retention)
			}
		}
	}
	kmu.Unlock()
	if dropped == 0 && time.Since(runStart) > 4*retention {
		t.Errorf("retention dropped nothing of chaos-r in %v (log starts at %d)", time.Since(runStart), first)
	}
	t.Logf("retention: chaos-r starts at %d, %d acknowledged records dropped, %d kept", first, dropped, len(retainedSentAt)-dropped)
	lost := 0
	acked.Range(func(k, v any) bool {
		if off, ok := stored[k.(string)]; !ok || off != v.(uint64) {
			lost++
			t.Errorf("acknowledged %s at offset %d: stored at %d (%v)", k, v, off, ok)
		}
		return true
	})
	if n := h.count("push-conflict", opFail); n > 0 {
		t.Errorf("%d retries answered a different offset than the first answer", n)
	}
	// Every retry of a stored id answers duplicate with the original offset.
	for id, off := range stored {
		var out []pushAnswer
		if status, err := chaosPost(c, "/api/v1/push", map[string]any{"items": []pushItem{{Queue: "chaos", TransactionID: id, Payload: id}}}, &out); err == nil && status == http.StatusCreated {
			if out[0].Status != "duplicate" || *out[0].Offset != off {
				t.Fatalf("retry of stored %s after the run: %+v, want duplicate at %d", id, out[0], off)
			}
		}
		break // one probe through a random node; the full set was checked above
	}
	doubleWinners := 0
	winners.Range(func(k, v any) bool {
		if v.(*atomic.Int32).Load() > 1 {
			doubleWinners++
			t.Errorf("once key %s had %d winners", k, v.(*atomic.Int32).Load())
		}
		return true
	})
	a := idSet(l.fetchAll("chaostxn.a", "Default"))
	b := idSet(l.fetchAll("chaostxn.b", "Default"))
	partial := 0
	for id := range a {
		if !b[id] {
			partial++
		}
	}
	for id := range b {
		if !a[id] {
			partial++
		}
	}
	if partial > 0 {
		t.Errorf("%d transactions are visible in one queue but not the other", partial)
	}
	if n := partialReads.Load(); n > 0 || txnReads.Load() == 0 {
		t.Errorf("%d of %d reads during the run saw a transaction in one queue only", n, txnReads.Load())
	}

	// The counter lies between the acknowledged incrs and those plus the
	// unknown ones.
	var kvOut struct {
		Value json.RawMessage
	}
	getJSON(t, l.url("/api/v1/kv/chaos/counter"), &kvOut)
	counter, _ := strconv.ParseInt(string(kvOut.Value), 10, 64)
	if counter < incrOK.Load() || counter > incrOK.Load()+incrInfo.Load() {
		t.Errorf("counter %d outside [%d acknowledged, %d acknowledged + unknown]", counter, incrOK.Load(), incrOK.Load()+incrInfo.Load())
	}
	// Every write retried under its key until answered: none is left
	// unknown (and so the counter is exactly the acknowledged incrs).
	for _, kind := range []string{"push", "once", "txn"} {
		if n := h.count(kind, opInfo); n > 0 {
			t.Errorf("%d %s operations left unknown after retrying under their key", n, kind)
		}
	}
	if n := incrInfo.Load(); n > 0 {
		t.Errorf("%d incrs left unknown after retrying under their key", n)
	}

	// The KV register: some order of the operations explains every answer.
	checkStart := time.Now()
	linearizable := reg.check(t)
	t.Logf("porcupine checked %d register operations in %v", len(reg.ops), time.Since(checkStart).Round(time.Millisecond))
	if linearizable != porcupine.Ok {
		t.Errorf("KV register history of %d operations: %s", len(reg.ops), linearizable)
	}

	// Kafka: every acknowledged record once, in order.
	consumer := kafkaClient(t, []string{l.kafkaAddr}, kgo.ConsumeTopics("chaos-k"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	hw := highWatermark(t, l, "chaos-k")
	seenK := map[string]int{}
	last := -1
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for read := int64(0); read < hw && ctx.Err() == nil; {
		for _, r := range consumer.PollFetches(ctx).Records() {
			read++
			seenK[string(r.Value)]++
			v, _ := strconv.Atoi(string(r.Value))
			if v <= last {
				t.Errorf("Kafka record %d after %d: out of order", v, last)
			}
			last = v
		}
	}
	final, _ := committedOffset(c, l, "chaos-g")
	for _, v := range groups.check(final) {
		t.Errorf("Kafka group: %s", v)
	}
	t.Logf("Kafka group: 2 members, %d assignments, %d records consumed, final committed offset %d of %d, reached %v after the cluster healed; %d commit samples (node %d's view started over %d times, after wipes; last went up at %s; the faults ended at %s); %s",
		groups.assignments, len(groups.consumed), final, hwK, groupCaughtUp.Round(time.Millisecond), len(groups.commits), c.nodes[0].id, groups.viewsRestarted, groups.lastAdvance.Format("15:04:05.000"), faultEnd.Format("15:04:05.000"),
		groups.commitSummary())
	kafkaLost, kafkaDup := 0, 0
	for v := range kafkaAcked {
		if seenK[v] == 0 {
			kafkaLost++
		}
	}
	for _, n := range seenK {
		if n > 1 {
			kafkaDup++
		}
	}
	if kafkaLost > 0 || kafkaDup > 0 {
		t.Errorf("Kafka: %d acknowledged records lost, %d stored twice", kafkaLost, kafkaDup)
	}

	// Every replica, replaced ones too, holds what the leader holds.
	for _, n := range c.live() {
		if n != l {
			checkSameAsLeader(t, c, n, "node", recs)
		}
	}
	wipedIn := checkWipedFollowerCatchesUp(t, c, recs)

	report := fmt.Sprintf("reads during the run %d, partial %d; register %d ops (%d unknown, %d cas applied): %s; counter %d (incr ok %d, unknown %d); kafka acked %d / failed %d, stored %d, lost %d, dup %d; "+"chaos %ds: push ok %d / unknown %d; once ok %d / unknown %d; txn ok %d / fail %d / unknown %d; tries with an open outcome, retried under their key: push %d, once %d, txn %d, incr %d; faults %v; "+
		"stored %d, lost %d, duplicates 0, partial txns %d, double once winners %d; longest fault-to-progress %v; a wiped follower caught up in %v",
		txnReads.Load(), partialReads.Load(), len(reg.ops), reg.infos, reg.casWins(), linearizable, counter, incrOK.Load(), incrInfo.Load(), len(kafkaAcked), kafkaFailed, len(seenK), kafkaLost, kafkaDup,
		seconds, h.count("push", opOK), h.count("push", opInfo), h.count("once", opOK), h.count("once", opInfo),
		h.count("txn", opOK), h.count("txn", opFail), h.count("txn", opInfo), openCount("push"), openCount("once"), openCount("txn"), openCount("incr"), faults,
		len(stored), lost, partial, doubleWinners, maxGap.Round(time.Millisecond), wipedIn.Round(time.Millisecond))
	t.Log(report)
	outcomes := func(kind string) string {
		return fmt.Sprintf("%d / %d / %d", h.count(kind, opOK), h.count(kind, opFail), h.count(kind, opInfo))
	}
	t.Logf("operations ok / fail / info: push %s; once %s; txn %s; incr %d / %d / %d; register %d / - / %d; txn reads %d / %d partial / -; "+
		"Kafka produce %d / %d / -, consumed by the group %d; tries whose outcome was open, retried under their key: push %d, once %d, txn %d, incr %d",
		outcomes("push"), outcomes("once"), outcomes("txn"), incrOK.Load(), incrFail.Load(), incrInfo.Load(), len(reg.ops)-reg.infos, reg.infos,
		txnReads.Load(), partialReads.Load(), len(kafkaAcked), kafkaFailed, len(groups.consumed), openCount("push"), openCount("once"), openCount("txn"), openCount("incr"))
	return c
}

// checkWipedFollowerCatchesUp stops a follower, deletes its data directory
// (a lost disk), starts it empty and requires that it catch up from its
// peers (a snapshot with the segments streamed, then the log after it) and
// then hold the leader's records of the chaos queue, in order, and the same
// Kafka high watermarks. It returns how long the catch-up took.
func checkWipedFollowerCatchesUp(t *testing.T, c *cluster, leaderRecs []fetchRecord) time.Duration {
	t.Helper()
	wiped := c.followers()[0]
	c.wipe(wiped)
	start := time.Now()
	wiped.start()
	c.waitCaughtUp(wiped)
	took := time.Since(start)
	checkSameAsLeader(t, c, wiped, "wiped node", leaderRecs)
	return took
}

// checkSameAsLeader requires that n, caught up with no write under way,
// hold the leader's records of the chaos queue, in order, and the same
// Kafka high watermarks. what names n in a failure.
func checkSameAsLeader(t *testing.T, c *cluster, n *node, what string, leaderRecs []fetchRecord) {
	t.Helper()
	got := n.fetchAll("chaos", "Default").Entries[0].Records
	if len(got) != len(leaderRecs) {
		t.Fatalf("%s %d holds %d records of chaos after catching up, the leader %d", what, n.id, len(got), len(leaderRecs))
	}
	for i := range got {
		if got[i].TransactionID != leaderRecs[i].TransactionID || got[i].Offset != leaderRecs[i].Offset {
			t.Fatalf("%s %d, record %d: %s at %d, the leader has %s at %d", what, n.id, i,
				got[i].TransactionID, got[i].Offset, leaderRecs[i].TransactionID, leaderRecs[i].Offset)
		}
	}
	l := c.leader()
	for _, topic := range []string{"chaos-k", "chaos-r"} {
		if w, lw := highWatermark(t, n, topic), highWatermark(t, l, topic); w != lw {
			t.Errorf("%s %d: %s high watermark %d, the leader's %d", what, n.id, topic, w, lw)
		}
	}
}

// ackClock records when operations were acknowledged.
type ackClock struct {
	mu    sync.Mutex
	times []time.Time
}

func (a *ackClock) add() {
	a.mu.Lock()
	a.times = append(a.times, time.Now())
	a.mu.Unlock()
}

// rate is the acknowledgements per second between from and to.
func (a *ackClock) rate(from, to time.Time) float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, at := range a.times {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return float64(n) / to.Sub(from).Seconds()
}

// longestGap is the longest stretch between from and to with no
// acknowledgement: the worst unavailability a client saw.
func (a *ackClock) longestGap(from, to time.Time) time.Duration {
	a.mu.Lock()
	times := slices.Clone(a.times)
	a.mu.Unlock()
	slices.SortFunc(times, func(x, y time.Time) int { return x.Compare(y) })
	var gap time.Duration
	last := from
	for _, at := range times {
		if at.After(from) && at.Before(to) {
			gap = max(gap, at.Sub(last))
			last = at
		}
	}
	return max(gap, to.Sub(last))
}

// waitProgress waits until the pushers acknowledged more than before, or
// the timeout passes.
func waitProgress(pushed *atomic.Int64, before int64, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for pushed.Load() <= before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

func idSet(f fetchAnswer) map[string]bool {
	out := map[string]bool{}
	for _, r := range f.Entries[0].Records {
		out[r.TransactionID] = true
	}
	return out
}

// highWatermark is the next offset of a topic's partition 0, from HTTP.
func highWatermark(t *testing.T, n *node, topic string) int64 {
	var f fetchAnswer
	postJSON(t, n.url("/api/v1/fetch"), map[string]any{"entries": []map[string]any{{"queue": topic, "partition": "0", "offset": 0, "maxBytes": 1}}}, &f)
	return int64(f.Entries[0].HighWatermark)
}

// untilStopped runs step(0), step(1), … in a new goroutine until stop closes.
func untilStopped(wg *sync.WaitGroup, stop <-chan struct{}, step func(i int)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			step(i)
		}
	}()
}

// earliestOffset asks ListOffsets for partition 0's log start.
func earliestOffset(t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, -2
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("list offsets of %s: %v %+v", topic, err, resp)
	}
	return resp.Topics[0].Partitions[0].Offset
}
