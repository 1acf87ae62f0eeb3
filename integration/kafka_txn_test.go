package integration

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txnProducer is a franz-go transactional producer, closed with the test.
func txnProducer(t testing.TB, brokers []string, id string, opts ...kgo.Opt) *kgo.Client {
	return kafkaClient(t, brokers, append([]kgo.Opt{kgo.TransactionalID(id), kgo.TransactionTimeout(10 * time.Second)}, opts...)...)
}

// produceTxn writes values to topic in one transaction and ends it.
func produceTxn(t testing.TB, cl *kgo.Client, topic string, commit bool, values ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce in transaction: %v", err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit %v): %v", commit, err)
	}
}

func values(recs []*kgo.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}

// A read_committed consumer sees committed transactions only, never an
// aborted one's records; read_uncommitted sees both; neither sees the
// markers. An open transaction holds read_committed readers (and the
// end offset they are told) at its first record until it ends.
func TestKafkaTransactionsCommitAndAbort(t *testing.T) {
	n := startSingle(t)
	waitLogFormat(t, n, 2) // transactions are format 2 entries
	brokers := []string{n.kafkaAddr}
	admin := kafkaClient(t, brokers)
	createTopic(t, admin, "txn", 1, nil)
	p := txnProducer(t, brokers, "txn-a")

	produceTxn(t, p, "txn", true, "c1", "c2")
	produceTxn(t, p, "txn", false, "a1", "a2", "a3")
	produceTxn(t, p, "txn", true, "c3")

	committed := consumeN(t, brokers, "txn", 3, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if got := values(committed); !slices.Equal(got, []string{"c1", "c2", "c3"}) {
		t.Fatalf("read_committed read %v", got)
	}
	all := consumeN(t, brokers, "txn", 6)
	if got := values(all); !slices.Equal(got, []string{"c1", "c2", "a1", "a2", "a3", "c3"}) {
		t.Fatalf("read_uncommitted read %v", got)
	}

	// An open transaction: read_committed's end offset stops at its first
	// record (the last stable offset), read_uncommitted's does not.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "txn", Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(admin)
	endOf := func(level kgo.IsolationLevel) int64 {
		t.Helper()
		var offs kadm.ListedOffsets
		var err error
		if level == kgo.ReadCommitted() {
			offs, err = adm.ListCommittedOffsets(ctx, "txn")
		} else {
			offs, err = adm.ListEndOffsets(ctx, "txn")
		}
		if err != nil {
			t.Fatal(err)
		}
		o, _ := offs.Lookup("txn", 0)
		return o.Offset
	}
	// c1 c2 m | a1 a2 a3 m | c3 m | open: the open record is offset 9.
	if lso, hw := endOf(kgo.ReadCommitted()), endOf(kgo.ReadUncommitted()); lso != 9 || hw != 10 {
		t.Fatalf("with a transaction open: committed end %d, end %d; want 9 and 10", lso, hw)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if lso := endOf(kgo.ReadCommitted()); lso != 11 {
		t.Fatalf("after the commit: committed end %d, want 11 (past its marker)", lso)
	}
	committed = consumeN(t, brokers, "txn", 4, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if got := values(committed); !slices.Equal(got, []string{"c1", "c2", "c3", "open"}) {
		t.Fatalf("read_committed read %v", got)
	}
}

// A second producer with the same transactional id fences the first: the
// first's transaction is aborted and its further calls fail.
func TestKafkaTransactionFencing(t *testing.T) {
	n := startSingle(t)
	waitLogFormat(t, n, 2) // transactions are format 2 entries
	brokers := []string{n.kafkaAddr}
	createTopic(t, kafkaClient(t, brokers), "fence", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	old := txnProducer(t, brokers, "fenced-id")
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Topic: "fence", Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fresh := txnProducer(t, brokers, "fenced-id")
	produceTxn(t, fresh, "fence", true, "fresh")

	if err := old.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced producer committed")
	}
	got := consumeN(t, brokers, "fence", 1, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if v := values(got); !slices.Equal(v, []string{"fresh"}) {
		t.Fatalf("read_committed read %v, want only the new incarnation's record", v)
	}
}

// A producer that dies inside a transaction does not hold read_committed
// readers back for ever: the transaction is aborted once its timeout
// passes.
func TestKafkaTransactionTimeoutAborts(t *testing.T) {
	n := startSingle(t)
	waitLogFormat(t, n, 2) // transactions are format 2 entries
	brokers := []string{n.kafkaAddr}
	createTopic(t, kafkaClient(t, brokers), "hung", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := txnProducer(t, brokers, "hung-id", kgo.TransactionTimeout(2*time.Second))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "hung", Value: []byte("never")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The producer goes silent; a plain record after it becomes readable
	// once the abort moves the last stable offset.
	produceSync(t, kafkaClient(t, brokers), &kgo.Record{Topic: "hung", Value: []byte("after")})
	got := consumeN(t, brokers, "hung", 1, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if v := values(got); !slices.Equal(v, []string{"after"}) {
		t.Fatalf("read_committed read %v", v)
	}

}

// Records written inside a Kafka transaction reach HTTP readers only once
// it commits, and an aborted transaction's never: fetch by offset and pop
// both stop at an open transaction and pass over markers and aborted
// records.
func TestKafkaTransactionsAsSeenOverHTTP(t *testing.T) {
	n := startSingle(t)
	waitLogFormat(t, n, 2) // transactions are format 2 entries
	brokers := []string{n.kafkaAddr}
	createTopic(t, kafkaClient(t, brokers), "mixed", 1, nil)
	p := txnProducer(t, brokers, "http-view")
	produceTxn(t, p, "mixed", true, `"c1"`, `"c2"`)
	produceTxn(t, p, "mixed", false, `"a1"`)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "mixed", Value: []byte(`"o1"`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fetched := func() []string {
		var out []string
		for _, r := range n.fetchAll("mixed", "0").Entries[0].Records {
			out = append(out, string(r.Payload))
		}
		return out
	}
	popAll := func() []string {
		var out []string
		for {
			status, a := n.pop(t, "mixed", map[string]string{"consumerGroup": "http", "batch": "10", "wait": "false"})
			if status != http.StatusOK && status != http.StatusNoContent {
				t.Fatalf("pop: status %d", status)
			}
			if len(a.Messages) == 0 {
				return out
			}
			for _, m := range a.Messages {
				out = append(out, string(m.Data))
			}
			if status, res := n.ackAll(t, "http", a.Messages, "completed"); status != http.StatusOK {
				t.Fatalf("ack: status %d %+v", status, res)
			}
		}
	}
	if got := fetched(); !slices.Equal(got, []string{`"c1"`, `"c2"`}) {
		t.Fatalf("HTTP fetch with a transaction open read %v", got)
	}
	if got := popAll(); !slices.Equal(got, []string{`"c1"`, `"c2"`}) {
		t.Fatalf("HTTP pop with a transaction open read %v", got)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := fetched(); !slices.Equal(got, []string{`"c1"`, `"c2"`, `"o1"`}) {
		t.Fatalf("HTTP fetch after the commit read %v", got)
	}
	if got := popAll(); !slices.Equal(got, []string{`"o1"`}) {
		t.Fatalf("HTTP pop after the commit read %v", got)
	}
}

// The transaction admin APIs report an open transaction, then the same
// transaction committed, as Kafka does: DescribeTransactions and
// ListTransactions give the transactional id's state (Ongoing, then
// CompleteCommit) with the producer id and epoch the producer uses, its
// timeout and the partitions it writes to; ListTransactions' state and
// producer id filters select by them; DescribeProducers lists the producer
// on the partition with the first offset of its open transaction there,
// and -1 once it has committed.
func TestKafkaTransactionAdminAPIs(t *testing.T) {
	n := startSingle(t)
	waitLogFormat(t, n, 2) // transactions are format 2 entries
	brokers := []string{n.kafkaAddr}
	plain := kafkaClient(t, brokers)
	createTopic(t, plain, "desc", 1, nil)
	adm := kadm.NewClient(plain)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// p0 p1 | done m | o1 o2 o3: the open transaction starts at offset 4,
	// after another transactional id's committed one.
	produceSync(t, plain, &kgo.Record{Topic: "desc", Value: []byte("p0")}, &kgo.Record{Topic: "desc", Value: []byte("p1")})
	produceTxn(t, txnProducer(t, brokers, "desc-done"), "desc", true, "done")
	const timeout = 45 * time.Second // not the helper's default, so the answer must be this producer's
	p := txnProducer(t, brokers, "desc-open", kgo.TransactionTimeout(timeout))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	for _, v := range []string{"o1", "o2", "o3"} {
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: "desc", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce in transaction: %v", err)
		}
	}
	after := time.Now()
	pid, epoch, err := p.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	describe := func() kadm.DescribedTransaction {
		t.Helper()
		described, err := adm.DescribeTransactions(ctx, "desc-open")
		if err != nil {
			t.Fatalf("describe transactions: %v", err)
		}
		d, ok := described["desc-open"]
		if !ok || d.Err != nil {
			t.Fatalf("describe transactions: desc-open missing or failed: %+v", described)
		}
		if d.ProducerID != pid || d.ProducerEpoch != epoch || d.TimeoutMillis != int32(timeout.Milliseconds()) {
			t.Fatalf("described producer %d epoch %d timeout %dms; the producer uses %d epoch %d timeout %v",
				d.ProducerID, d.ProducerEpoch, d.TimeoutMillis, pid, epoch, timeout)
		}
		return d
	}
	list := func(pids []int64, states ...string) map[string]string {
		t.Helper()
		listed, err := adm.ListTransactions(ctx, pids, states)
		if err != nil {
			t.Fatalf("list transactions (producers %v, states %v): %v", pids, states, err)
		}
		out := map[string]string{}
		for id, l := range listed {
			out[id] = l.State
		}
		return out
	}
	requireList := func(got, want map[string]string) {
		t.Helper()
		if !maps.Equal(got, want) {
			t.Fatalf("listed %v, want %v", got, want)
		}
	}
	producers := func() kadm.DescribedProducers {
		t.Helper()
		var s kadm.TopicsSet
		s.Add("desc", 0)
		described, err := adm.DescribeProducers(ctx, s)
		if err != nil {
			t.Fatalf("describe producers: %v", err)
		}
		dp, ok := described["desc"].Partitions[0]
		if !ok || dp.Err != nil {
			t.Fatalf("describe producers: desc[0] missing or failed: %+v", described)
		}
		return dp.ActiveProducers
	}

	d := describe()
	if d.State != "Ongoing" {
		t.Fatalf("open transaction described as %q, want Ongoing", d.State)
	}
	var s kadm.TopicsSet
	s.Add("desc", 0)
	if !reflect.DeepEqual(d.Topics, s) {
		t.Fatalf("open transaction's partitions %v, want desc[0]", d.Topics)
	}
	// The replicated clock is the leader's wall clock; a second of slack
	// covers the millisecond rounding.
	if d.StartTimestamp < before.Add(-time.Second).UnixMilli() || d.StartTimestamp > after.Add(time.Second).UnixMilli() {
		t.Fatalf("start timestamp %d, want between %d and %d", d.StartTimestamp, before.UnixMilli(), after.UnixMilli())
	}

	requireList(list(nil), map[string]string{"desc-done": "CompleteCommit", "desc-open": "Ongoing"})
	requireList(list(nil, "Ongoing"), map[string]string{"desc-open": "Ongoing"})
	requireList(list(nil, "CompleteCommit"), map[string]string{"desc-done": "CompleteCommit"})
	requireList(list([]int64{pid}), map[string]string{"desc-open": "Ongoing"})
	listed, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	donePID := listed["desc-done"].ProducerID
	if lp := listed["desc-open"].ProducerID; lp != pid || donePID == pid {
		t.Fatalf("listed producer ids: desc-open %d (the producer uses %d), desc-done %d", lp, pid, donePID)
	}

	active := producers()
	open, ok := active[pid]
	if !ok {
		t.Fatalf("producer %d is not among desc[0]'s producers %+v", pid, active)
	}
	if open.ProducerEpoch != epoch || open.CurrentTxnStartOffset != 4 || open.LastSequence != 2 {
		t.Fatalf("open producer described as epoch %d, transaction start %d, last sequence %d; want epoch %d, start 4, sequence 2",
			open.ProducerEpoch, open.CurrentTxnStartOffset, open.LastSequence, epoch)
	}
	if done, ok := active[donePID]; !ok || done.CurrentTxnStartOffset != -1 {
		t.Fatalf("desc-done's producer %d described as %+v (present %v), want no transaction start (-1)", donePID, done, ok)
	}

	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// The commit moves the producer to its next epoch (transaction
	// version 2, EndTxn v5); its batches keep the epoch they were
	// written at, which describe reports below.
	writtenAt := epoch
	if pid2, epoch2, err := p.ProducerID(ctx); err != nil || pid2 != pid || epoch2 != epoch+1 {
		t.Fatalf("after the commit the producer uses %d epoch %d (%v), before %d epoch %d; want the next epoch", pid2, epoch2, err, pid, epoch)
	}
	epoch++ // what describe expects from here
	d = describe()
	if d.State != "CompleteCommit" || len(d.Topics) != 0 {
		t.Fatalf("committed transaction described as %q with partitions %v, want CompleteCommit and none", d.State, d.Topics)
	}
	requireList(list(nil, "Ongoing"), map[string]string{})
	requireList(list(nil, "CompleteCommit"), map[string]string{"desc-done": "CompleteCommit", "desc-open": "CompleteCommit"})
	committed, ok := producers()[pid]
	if !ok || committed.ProducerEpoch != writtenAt || committed.CurrentTxnStartOffset != -1 || committed.LastSequence != 2 {
		t.Fatalf("after the commit producer %d described as %+v (present %v); want epoch %d, no transaction start (-1), last sequence 2",
			pid, committed, ok, writtenAt)
	}
	got := consumeN(t, brokers, "desc", 6, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if v := values(got); !slices.Equal(v, []string{"p0", "p1", "done", "o1", "o2", "o3"}) {
		t.Fatalf("read_committed read %v", v)
	}
}

// A transaction begun before a kill -9 of the raft leader, every
// transaction's coordinator, commits on the new leader: the records the old
// leader acknowledged stay in it, EndTransaction(TryCommit) succeeds after
// the failover, a read_committed consumer on the surviving nodes reads
// each record exactly once and in order, and the producer's next
// transaction commits after them.
func TestKafkaTransactionCommitsThroughLeaderKill(t *testing.T) {
	const records = 20
	c := startCluster(t, 3)
	waitLogFormat(t, c.leader(), 2) // transactions are format 2 entries
	brokers := c.kafkaAddrs()
	createTopic(t, kafkaClient(t, brokers), "txn-failover", 1, nil)
	// The transaction must outlive the election and the client's retries.
	p := txnProducer(t, brokers, "txn-failover", kgo.TransactionTimeout(120*time.Second),
		kgo.RetryTimeout(60*time.Second), kgoLogger(t, "txn-producer"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range records {
		v := fmt.Sprintf("r%02d", i)
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: "txn-failover", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s in transaction: %v", v, err)
		}
		want = append(want, v)
	}

	victim := c.leader()
	victim.kill9()
	t.Logf("killed node %d, the leader, with %d records in the open transaction", victim.id, records)
	start := time.Now()
	endCtx, endCancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer endCancel()
	confirmed := true
	if err := p.EndTransaction(endCtx, kgo.TryCommit); err != nil {
		// An unconfirmed outcome: franz-go's documented recovery is an
		// abort, which leaves the commit done or undone (franz-go fences
		// the transaction by bumping its epoch when it could not reach the
		// dead coordinator); the read below says which, all or nothing.
		t.Logf("commit after the leader kill: %v (after %v); recovering with TryAbort", err, time.Since(start))
		if err := p.EndTransaction(endCtx, kgo.TryAbort); err != nil {
			t.Fatalf("abort after the failed commit: %v", err)
		}
		confirmed = false
	} else {
		t.Logf("committed %v after the kill", time.Since(start))
	}

	var survivors []string
	for _, n := range c.live() {
		survivors = append(survivors, n.kafkaAddr)
	}
	second := []string{"s0", "s1", "s2"}
	if !confirmed {
		produceTxn(t, p, "txn-failover", true, second...)
		cl := kafkaClient(t, survivors, kgo.ConsumeTopics("txn-failover"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		readCtx, readCancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer readCancel()
		var v []string
		for !slices.Contains(v, second[len(second)-1]) { // up to the second transaction's last record
			fs := cl.PollFetches(readCtx)
			if readCtx.Err() != nil {
				t.Fatalf("read_committed read %v before the deadline", v)
			}
			v = append(v, values(fs.Records())...)
		}
		if !slices.Equal(v, second) && !slices.Equal(v, append(want, second...)) {
			t.Fatalf("read_committed read %v after an unconfirmed commit, want %v or %v", v, second, append(want, second...))
		}
		return
	}
	got := consumeN(t, survivors, "txn-failover", records, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if v := values(got); !slices.Equal(v, want) {
		t.Fatalf("read_committed read %v after the failover, want %v", v, want)
	}

	produceTxn(t, p, "txn-failover", true, second...)
	want = append(want, second...)
	got = consumeN(t, survivors, "txn-failover", len(want), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if v := values(got); !slices.Equal(v, want) {
		t.Fatalf("read_committed read %v after the second transaction, want %v", v, want)
	}
}
