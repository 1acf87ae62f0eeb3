package integration

import (
	"context"
	"net/http"
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
