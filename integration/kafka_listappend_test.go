package integration

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/waggle-mq/waggle/integration/txncheck"
)

// The Kafka list-append workload, after Jepsen's analyses of Kafka-API
// brokers: transactional producers append unique values to partitions of
// two topics, two consume-transform-produce pipelines (one per direction)
// move values between the topics in transactions that also commit their
// group offsets, and plain readers of both isolation levels read every
// partition, all while the nemesis kills, cuts off and pauses nodes. txncheck
// turns the history into a dependency graph and looks for every anomaly
// Kafka's transactions forbid.

// listAppend configures one run of the workload.
type listAppend struct {
	run     time.Duration // how long the writers run
	faults  bool          // the nemesis: a cluster fault every few seconds
	binary  string        // the waggle binary; the package's when empty
	env     []string      // more environment for every node
	writers int
}

var laTopics = []string{"la-a", "la-b"}

const laPartitions = 3

// laValue makes a value: hop counts how many pipelines moved it, so the
// pipelines stop after two hops instead of feeding each other forever.
func laValue(hop int, id string) string { return fmt.Sprintf("h%d:%s", hop, id) }

func laHop(v string) int {
	h, _, _ := strings.Cut(strings.TrimPrefix(v, "h"), ":")
	n, _ := strconv.Atoi(h)
	return n
}

// laRecorder collects the history from every goroutine of a run.
type laRecorder struct {
	mu   sync.Mutex
	txns []txncheck.Txn
}

func (r *laRecorder) add(t txncheck.Txn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.txns = append(r.txns, t)
}

func (r *laRecorder) count(o txncheck.Outcome) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, t := range r.txns {
		if t.Outcome == o {
			n++
		}
	}
	return n
}

func laPartition(rnd *rand.Rand, topic string) txncheck.Partition {
	return txncheck.Partition{Topic: topic, Partition: int32(rnd.IntN(laPartitions))}
}

func observed(r *kgo.Record, at time.Time) txncheck.Observation {
	return txncheck.Observation{Record: txncheck.Record{
		Partition: txncheck.Partition{Topic: r.Topic, Partition: r.Partition}, Offset: r.Offset, Value: string(r.Value)}, At: at}
}

// laWriter runs one transactional producer until ctx ends: each
// transaction appends one to four values to random partitions of both
// topics and commits, or aborts one time in four. A failed end leaves the
// outcome unknown; the producer is then made anew under the same
// transactional id, which fences and settles whatever was open.
func laWriter(t *testing.T, ctx context.Context, brokers []string, id int, rec *laRecorder) {
	rnd := rand.New(rand.NewPCG(uint64(id), 7))
	txnID := fmt.Sprintf("la-w%d", id)
	newClient := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID(txnID),
			kgo.TransactionTimeout(10*time.Second), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RetryTimeout(20*time.Second), kgo.RequestTimeoutOverhead(5*time.Second))
		if err != nil {
			t.Error(err)
		}
		return cl
	}
	cl := newClient()
	defer func() { cl.Close() }()
	for n := 0; ctx.Err() == nil; n++ {
		// The transaction runs to its end even when ctx ends meanwhile.
		opCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		txn := txncheck.Txn{ID: fmt.Sprintf("w%d-%d", id, n), Producer: txnID, Start: time.Now(), Outcome: txncheck.Unknown}
		var recs []*kgo.Record
		for k := range 1 + rnd.IntN(4) {
			p := laPartition(rnd, laTopics[rnd.IntN(len(laTopics))])
			v := laValue(0, fmt.Sprintf("%s-%d", txn.ID, k))
			txn.Writes = append(txn.Writes, txncheck.Write{Partition: p, Value: v, Offset: -1})
			recs = append(recs, &kgo.Record{Topic: p.Topic, Partition: p.Partition, Value: []byte(v)})
		}
		err := cl.BeginTransaction()
		produced := err == nil
		if produced {
			// The results come in the order the partitions answered.
			for _, r := range cl.ProduceSync(opCtx, recs...) {
				if r.Err != nil {
					produced = false
					continue
				}
				i := slices.IndexFunc(txn.Writes, func(w txncheck.Write) bool { return w.Value == string(r.Record.Value) })
				txn.Writes[i].Offset = r.Record.Offset
			}
		}
		commit := produced && rnd.IntN(4) != 0
		txn.EndCalled = time.Now()
		if err == nil {
			err = cl.EndTransaction(opCtx, kgo.TransactionEndTry(commit))
		}
		cancel()
		if err != nil {
			rec.add(txn) // unknown: the final log decides
			cl.Close()
			cl = newClient()
			continue
		}
		txn.End = time.Now()
		txn.Outcome = txncheck.Aborted
		if commit {
			txn.Outcome = txncheck.Committed
		}
		rec.add(txn)
	}
}

// laPipeline runs one consume-transform-produce pipeline until ctx ends:
// a GroupTransactSession in group reads from one topic (read_committed)
// and, per record, appends a new value to a random partition of the other
// topic, committing the outputs and the group's offsets in one
// transaction. Every few seconds the session is closed and made anew, as
// a restarted consumer would be: it resumes from the offsets its
// transactions committed.
func laPipeline(t *testing.T, ctx context.Context, brokers []string, group, from, to string, rec *laRecorder) {
	rnd := rand.New(rand.NewPCG(uint64(len(group)), uint64(group[len(group)-1])))
	n := 0
	for ctx.Err() == nil {
		if !laSession(t, ctx, brokers, group, from, to, rec, rnd, &n) {
			return
		}
	}
}

// laSession runs one session of a pipeline for a few seconds; false when
// the session failed the test.
func laSession(t *testing.T, ctx context.Context, brokers []string, group, from, to string, rec *laRecorder, rnd *rand.Rand, n *int) bool {
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(brokers...),
		kgo.TransactionalID("la-"+group),
		kgo.TransactionTimeout(10*time.Second),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(from),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RequireStableFetchOffsets(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RetryTimeout(20*time.Second),
		kgo.SessionTimeout(10*time.Second),
		kgo.FetchMaxWait(300*time.Millisecond),
	)
	if err != nil {
		t.Error(err)
		return false
	}
	defer sess.Close()
	restart := time.Now().Add(4 * time.Second)
	for ; ctx.Err() == nil && time.Now().Before(restart); *n++ {
		txn := txncheck.Txn{ID: fmt.Sprintf("%s-%d", group, *n), Producer: "la-" + group, Group: group, Start: time.Now()}
		pollCtx, cancelPoll := context.WithTimeout(ctx, time.Second)
		fetches := sess.PollRecords(pollCtx, 50)
		cancelPoll()
		polled := time.Now()
		if fetches.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Errorf("%s: begin: %v", group, err)
			return false
		}
		opCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var mu sync.Mutex
		var wg sync.WaitGroup
		fetches.EachRecord(func(r *kgo.Record) {
			txn.Reads = append(txn.Reads, observed(r, polled))
			hop := laHop(string(r.Value))
			if hop >= 2 {
				return
			}
			p := laPartition(rnd, to)
			w := txncheck.Write{Partition: p, Value: laValue(hop+1, fmt.Sprintf("%s-%d", txn.ID, len(txn.Writes))), Offset: -1}
			i := len(txn.Writes)
			txn.Writes = append(txn.Writes, w)
			wg.Add(1)
			sess.Produce(opCtx, &kgo.Record{Topic: p.Topic, Partition: p.Partition, Value: []byte(w.Value)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err == nil {
					mu.Lock()
					txn.Writes[i].Offset = r.Offset
					mu.Unlock()
				}
			})
		})
		// EndCalled must bound every write of the transaction (the
		// checker's write order relies on it); End would flush too, but
		// only after the stamp.
		_ = sess.Client().Flush(opCtx) // a failure shows in End
		txn.EndCalled = time.Now()
		committed, err := sess.End(opCtx, kgo.TryCommit)
		wg.Wait()
		if err != nil {
			// Unknown. franz-go's recovery is End with TryAbort: it
			// reloads the producer id, fencing whatever may be open, and
			// rewinds to the committed offsets.
			txn.Outcome = txncheck.Unknown
			for tries := 0; err != nil && tries < 20; tries++ {
				time.Sleep(250 * time.Millisecond) // the client's retry pace
				_, err = sess.End(opCtx, kgo.TryAbort)
			}
			cancel()
			rec.add(txn)
			if err != nil {
				t.Errorf("%s: the session did not recover: %v", group, err)
				return false
			}
			continue
		}
		cancel()
		txn.End = time.Now()
		txn.Outcome = txncheck.Aborted
		if committed {
			txn.Outcome = txncheck.Committed
		}
		rec.add(txn)
	}
	return true
}

// laReader reads every partition from its start, assigned, until ctx ends.
func laReader(ctx context.Context, brokers []string, name string, committed bool) (*txncheck.Reader, error) {
	assign := map[string]map[int32]kgo.Offset{}
	for _, topic := range laTopics {
		assign[topic] = map[int32]kgo.Offset{}
		for p := range int32(laPartitions) {
			assign[topic][p] = kgo.NewOffset().AtStart()
		}
	}
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(assign), kgo.FetchMaxWait(300 * time.Millisecond),
		kgo.RetryTimeout(20 * time.Second)}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	rd := &txncheck.Reader{Name: name, ReadCommitted: committed}
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		at := time.Now()
		fs.EachRecord(func(r *kgo.Record) { rd.Seen = append(rd.Seen, observed(r, at)) })
	}
	return rd, nil
}

// laFinal reads every partition whole, read_committed, once no
// transaction is open (the last stable offsets have reached the high
// watermarks), and the groups' committed offsets.
func laFinal(t *testing.T, brokers []string) (map[txncheck.Partition][]txncheck.Record, map[string]map[txncheck.Partition]int64) {
	t.Helper()
	adm := kadm.NewClient(kafkaClient(t, brokers))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var ends kadm.ListedOffsets
	waitFor(t, 60*time.Second, func() error {
		var err error
		if ends, err = adm.ListEndOffsets(ctx, laTopics...); err != nil {
			return err
		}
		stable, err := adm.ListCommittedOffsets(ctx, laTopics...)
		if err != nil {
			return err
		}
		var open []string
		ends.Each(func(o kadm.ListedOffset) {
			if o.Err != nil {
				open = append(open, fmt.Sprintf("%s[%d]: %v", o.Topic, o.Partition, o.Err))
			} else if s, _ := stable.Lookup(o.Topic, o.Partition); s.Err != nil || s.Offset != o.Offset {
				open = append(open, fmt.Sprintf("%s[%d] stable at %d, end %d", o.Topic, o.Partition, s.Offset, o.Offset))
			}
		})
		if len(open) > 0 {
			return fmt.Errorf("transactions still open: %v", open)
		}
		return nil
	})
	final := map[txncheck.Partition][]txncheck.Record{}
	rd, err := laDrain(ctx, brokers, ends)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range rd.Seen {
		final[o.Partition] = append(final[o.Partition], o.Record)
	}
	groups := map[string]map[txncheck.Partition]int64{}
	for _, g := range []string{"la-g1", "la-g2"} {
		offs, err := adm.FetchOffsets(ctx, g)
		if err != nil {
			t.Fatalf("fetch offsets of %s: %v", g, err)
		}
		groups[g] = map[txncheck.Partition]int64{}
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil && o.At >= 0 {
				groups[g][txncheck.Partition{Topic: o.Topic, Partition: o.Partition}] = o.At
			}
		})
	}
	return final, groups
}

// laDrain reads every partition, read_committed, until a fetch has come
// back empty three times after the last record: the log's tail may be
// control records, which a consumer never sees, so the end offsets cannot
// say when the last record has been read.
func laDrain(ctx context.Context, brokers []string, ends kadm.ListedOffsets) (*txncheck.Reader, error) {
	assign := map[string]map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if assign[o.Topic] == nil {
			assign[o.Topic] = map[int32]kgo.Offset{}
		}
		assign[o.Topic][o.Partition] = kgo.NewOffset().AtStart()
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(assign),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	rd := &txncheck.Reader{Name: "final"}
	for empty := 0; empty < 3; {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("final read: %w after %d records", ctx.Err(), len(rd.Seen))
		}
		var ferr error
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				ferr = fmt.Errorf("final read %s[%d]: %w", topic, p, err)
			}
		})
		if ferr != nil {
			return nil, ferr
		}
		if fs.NumRecords() == 0 {
			empty++
			continue
		}
		empty = 0
		fs.EachRecord(func(r *kgo.Record) { rd.Seen = append(rd.Seen, observed(r, time.Now())) })
	}
	return rd, nil
}

// laNemesis is the workload's cycle of faults, each healed before it
// returns: the raft leader is every transaction's and group's coordinator,
// so most hit it.
var laNemesis = []struct {
	name   string
	inject func(*cluster, *links)
}{
	{"kill -9 leader", func(c *cluster, _ *links) { // restarted once another leads
		l := c.leader()
		l.kill9()
		waitFor(c.t, 30*time.Second, func() error { _, err := c.findLeader(); return err })
		l.start()
	}},
	{"partition leader 3 s", func(c *cluster, l *links) { // cut off from both followers
		l.isolate(c, c.leader().id)
		time.Sleep(3 * time.Second)
		l.heal()
	}},
	{"SIGSTOP leader 2 s", func(c *cluster, _ *links) {
		l := c.leader()
		l.cmd.Process.Signal(syscall.SIGSTOP)
		time.Sleep(2 * time.Second)
		l.cmd.Process.Signal(syscall.SIGCONT)
	}},
	{"kill -9 all nodes", func(c *cluster, _ *links) {
		for _, n := range c.live() {
			n.kill9()
		}
		for _, n := range c.nodes {
			n.start()
		}
	}},
}

// runListAppend runs the workload on a fresh three-node cluster whose
// raft links can be cut, every client seeded with all three nodes, and
// checks the history.
func runListAppend(t *testing.T, cfg listAppend) (*txncheck.History, *txncheck.Report) {
	c, links := newPartitionableCluster(t, 3)
	for _, n := range c.nodes {
		n.binary, n.extraEnv = cfg.binary, cfg.env
	}
	c.start()
	waitLogFormat(t, c.leader(), 2) // transactions are format 2 entries
	brokers := c.kafkaAddrs()
	admin := kafkaClient(t, brokers)
	for _, topic := range laTopics {
		createTopic(t, admin, topic, laPartitions, nil)
	}

	rec := &laRecorder{}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	for i := range cfg.writers {
		wg.Go(func() { laWriter(t, ctx, brokers, i, rec) })
	}
	wg.Go(func() { laPipeline(t, ctx, brokers, "la-g1", "la-a", "la-b", rec) })
	wg.Go(func() { laPipeline(t, ctx, brokers, "la-g2", "la-b", "la-a", rec) })
	readers := make([]*txncheck.Reader, 2)
	for i, committed := range []bool{true, false} {
		wg.Go(func() {
			rd, err := laReader(ctx, brokers, fmt.Sprintf("reader(committed=%v)", committed), committed)
			if err != nil {
				t.Error(err)
			}
			readers[i] = rd
		})
	}

	faults := map[string]int{}
	deadline := time.Now().Add(cfg.run)
	for round := 0; time.Now().Before(deadline); round++ {
		time.Sleep(min(5*time.Second, time.Until(deadline)))
		if !cfg.faults || time.Until(deadline) < 5*time.Second {
			continue
		}
		fault := laNemesis[round%len(laNemesis)]
		fault.inject(c, links)
		faults[fault.name]++
		waitFor(t, 30*time.Second, func() error {
			_, err := c.findLeader()
			return err
		})
	}
	committedBefore := rec.count(txncheck.Committed)
	stop()
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	c.replicasAgree()
	if committedBefore < 20 {
		t.Fatalf("only %d transactions committed in %v: too little load to check", committedBefore, cfg.run)
	}

	h := &txncheck.History{Txns: rec.txns}
	for _, rd := range readers {
		if rd != nil {
			h.Readers = append(h.Readers, *rd)
		}
	}
	h.Final, h.GroupOffsets = laFinal(t, brokers)
	r := txncheck.Check(h)
	t.Logf("faults in %v: %v; %s", cfg.run, faults, r)
	return h, r
}

// saveHistory writes h as JSON (a txncheck.History) where a failed run's
// history can be checked again: WAGGLE_TEST_LOG_DIR, or the temporary
// directory.
func saveHistory(t *testing.T, h *txncheck.History) {
	dir := cmp.Or(os.Getenv("WAGGLE_TEST_LOG_DIR"), os.TempDir())
	b, err := json.Marshal(h)
	if err == nil {
		path := filepath.Join(dir, fmt.Sprintf("listappend-history-%d.json", time.Now().Unix()))
		if err = os.WriteFile(path, b, 0o644); err == nil {
			t.Logf("history saved in %s (%d bytes)", path, len(b))
		}
	}
	if err != nil {
		t.Logf("saving the history: %v", err)
	}
}

// TestKafkaTransactionsListAppendUnderFaults runs the workload through the
// nemesis and requires no anomaly Kafka forbids.
// WAGGLE_LISTAPPEND_SECONDS runs it longer (CI: 60).
func TestKafkaTransactionsListAppendUnderFaults(t *testing.T) {
	seconds := 60
	if s, err := strconv.Atoi(os.Getenv("WAGGLE_LISTAPPEND_SECONDS")); err == nil {
		seconds = s
	}
	h, r := runListAppend(t, listAppend{run: time.Duration(seconds) * time.Second, faults: true, writers: 4})
	if n := r.Forbidden(); n > 0 {
		saveHistory(t, h)
		t.Fatalf("%d anomalies Kafka's transactions forbid:\n%s", n, r)
	}
	if r.Stats.Committed == 0 || r.Stats.Aborted == 0 || r.Stats.WR == 0 || r.Stats.Observations == 0 {
		t.Fatalf("the history lacks a part of the workload: %+v", r.Stats)
	}
}

var (
	faultyOnce   sync.Once
	faultyBinary string
	faultyErr    error
)

// buildFaulty builds, once, the waggle binary with the waggle_faults tag:
// a broker that has the bug WAGGLE_FAULT names (kafka/faults_on.go).
func buildFaulty(t *testing.T) string {
	faultyOnce.Do(func() {
		faultyBinary = waggleBinary + "-faults"
		args := []string{"build", "-tags", "waggle_faults", "-o", faultyBinary}
		if raceBuild {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "../cmd/waggle")...).CombinedOutput()
		if err != nil {
			faultyErr = fmt.Errorf("build with waggle_faults: %v\n%s", err, out)
		}
	})
	if faultyErr != nil {
		t.Fatal(faultyErr)
	}
	return faultyBinary
}

// TestListAppendCatchesBrokenBrokers runs the workload, without faults of
// the cluster, on brokers broken on purpose, one bug each, and requires
// the checker to report the anomaly the bug makes. A checker that passes
// a healthy broker proves little until it fails a broken one.
func TestListAppendCatchesBrokenBrokers(t *testing.T) {
	bugs := []struct {
		fault string
		want  []txncheck.Kind // at least one of them
	}{
		// read_committed fetches served as read_uncommitted: open and
		// aborted transactions' records reach committed readers.
		{"fetch-uncommitted", []txncheck.Kind{txncheck.AbortedRead, txncheck.IntermediateRead}},
		// One commit in 20 written as an abort, answered as a commit.
		{"commit-aborts", []txncheck.Kind{txncheck.Lost}},
		// One transactional offset commit in two stored one behind: a
		// restarted session consumes that record again.
		{"txn-offset-behind", []txncheck.Kind{txncheck.DoubleConsume}},
		// One fetch answer in 40 leaves out its first batch.
		{"fetch-skip-batch", []txncheck.Kind{txncheck.Skip, txncheck.MissedConsume}},
		// One produce answer in 50 names the wrong offset.
		{"produce-offset-off-by-one", []txncheck.Kind{txncheck.InconsistentOffset}},
	}
	binary := buildFaulty(t)
	for _, bug := range bugs {
		t.Run(bug.fault, func(t *testing.T) {
			_, r := runListAppend(t, listAppend{run: 15 * time.Second, writers: 4,
				binary: binary, env: []string{"WAGGLE_FAULT=" + bug.fault}})
			found := 0
			for _, k := range bug.want {
				found += r.Counts[k]
			}
			if found == 0 {
				t.Fatalf("the checker missed %s: none of %q reported\n%s", bug.fault, bug.want, r)
			}
		})
	}
}
