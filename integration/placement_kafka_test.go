package integration

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/router"
)

// produceCounter counts the Produce requests a client sends to each broker.
type produceCounter struct {
	mu     sync.Mutex
	byNode map[int32]int
}

func (p *produceCounter) OnBrokerWrite(meta kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.Produce.Int16() && err == nil {
		p.mu.Lock()
		p.byNode[meta.NodeID]++
		p.mu.Unlock()
	}
}

// readGroupOnce has a franz-go member of consumer group group read want
// records of topics from its committed offsets (the start without), fails
// the test on a record read twice or a minute without want, commits and
// leaves, and answers the records' values.
func readGroupOnce(t testing.TB, brokers []string, group string, topics []string, want int) map[string]bool {
	t.Helper()
	g := kafkaClient(t, brokers, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgoLogger(t, group))
	defer g.Close()
	seen := map[string]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for len(seen) < want {
		fs := g.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the group read %d of %d records", len(seen), want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if seen[string(r.Value)] {
				t.Fatalf("the group read %s twice", r.Value)
			}
			seen[string(r.Value)] = true
		})
	}
	if err := g.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	return seen
}

// With three raft groups on three nodes, a topic's partitions are led by
// the leader of the topic's group: Metadata says so, a producer writing to
// 12 partitions of 4 topics sends to all three brokers, and the franz-go
// group consumer and kcat work unchanged. Offsets a consumer group commits
// are kept beside each topic, in its group, wherever that group's leader
// is. A transaction within a group commits; one that adds a topic of
// another group is refused. kill -9 of a group's leader loses nothing
// acknowledged.
func TestDataGroupsSpreadKafkaPartitionLeaders(t *testing.T) {
	c := startCluster(t, 3, "--data-groups", "3")
	waitGroupLeaders(t, c.nodes, 3, preferred)
	brokers := c.kafkaAddrs()
	topics := []string{nameIn(t, "events-", 0, 3), nameIn(t, "events-", 1, 3), nameIn(t, "events-", 2, 3), nameIn(t, "audit-", 1, 3)}
	counter := &produceCounter{byNode: map[int32]int{}}
	cl := kafkaClient(t, brokers, kgo.WithHooks(counter), kgoLogger(t, "producer"))
	for _, topic := range topics {
		createTopic(t, cl, topic, 3, nil)
	}

	// Metadata: each topic's partitions are led by its group's leader.
	waitFor(t, 20*time.Second, func() error {
		req := kmsg.NewPtrMetadataRequest()
		for _, topic := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			return err
		}
		for i, mt := range resp.Topics {
			want := int32(i%3) + 1 // topics[3] is in group 1, led by node 2
			if i == 3 {
				want = 2
			}
			for _, p := range mt.Partitions {
				if p.Leader != want {
					return fmt.Errorf("%s[%d] led by %d, want %d", *mt.Topic, p.Partition, p.Leader, want)
				}
			}
		}
		return nil
	})

	const perPartition = 50
	var recs []*kgo.Record
	for _, topic := range topics {
		for p := range int32(3) {
			for i := range perPartition {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%s/%d/%d", topic, p, i))})
			}
		}
	}
	manual := kafkaClient(t, brokers, kgo.WithHooks(counter), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceSync(t, manual, recs...)
	counter.mu.Lock()
	sent := fmt.Sprint(counter.byNode)
	reached := len(counter.byNode)
	counter.mu.Unlock()
	if reached != 3 {
		t.Fatalf("produce requests by broker: %s; want all 3 brokers", sent)
	}
	t.Logf("produce requests by broker: %s", sent)

	// __consumer_offsets is served by the broker Metadata names for it.
	if ends, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), "__consumer_offsets"); err != nil || ends.Error() != nil {
		t.Fatalf("end offsets of __consumer_offsets: %v %v", err, ends.Error())
	}

	// A franz-go group consumer reads the 12 partitions whole, commits,
	// and a second member of the group resumes after the commits.
	total := len(recs)
	readGroup := func(want int) map[string]bool { return readGroupOnce(t, brokers, "readers", topics, want) }
	if got := readGroup(total); len(got) != total {
		t.Fatalf("the group read %d records, want %d", len(got), total)
	}
	// The group's coordinator is the leader of the raft group its name
	// places it in.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "readers"
	coord, err := fc.RequestWith(context.Background(), cl)
	if want := int32(router.Group("readers", 3)) + 1; err != nil || coord.ErrorCode != 0 || coord.NodeID != want {
		t.Fatalf("FindCoordinator(readers): %+v, %v; want node %d", coord, err, want)
	}
	var more []*kgo.Record
	for i, topic := range topics {
		more = append(more, &kgo.Record{Topic: topic, Partition: int32(i % 3), Value: []byte("more-" + topic)})
	}
	produceSync(t, manual, more...)
	if got := readGroup(len(more)); len(got) != len(more) || !got["more-"+topics[1]] {
		t.Fatalf("after its commits the group read %v, want only the %d new records", got, len(more))
	}

	// kcat through node 1 to a topic that node 2 leads.
	kcat := requireKcat(t)
	produce := exec.Command(kcat, "-b", c.nodes[0].kafkaAddr, "-P", "-t", topics[1], "-p", "0")
	produce.Stdin = strings.NewReader("kcat-1\nkcat-2\n")
	if out, err := runWithTimeout(t, produce, 30*time.Second); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	out, err := runWithTimeout(t, exec.Command(kcat, "-b", c.nodes[0].kafkaAddr, "-C", "-t", topics[1], "-p", "0", "-o", "beginning", "-e", "-q"), 30*time.Second)
	if err != nil || strings.Count(string(out), "\n") != perPartition+2 || !strings.HasSuffix(string(out), "kcat-1\nkcat-2\n") {
		t.Fatalf("kcat -C read %d lines (%v), want %d ending with kcat's two", strings.Count(string(out), "\n"), err, perPartition+2)
	}

	// A transaction is its id's group's: "gtx.app" and "gtx.out" share one.
	createTopic(t, cl, "gtx.out", 1, nil)
	txn := kafkaClient(t, brokers, kgo.TransactionalID("gtx.app"), kgo.DefaultProduceTopic("gtx.out"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		txn.Produce(ctx, &kgo.Record{Value: []byte("tx-" + strconv.Itoa(i))}, nil)
	}
	if err := txn.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("a transaction within one group: %v", err)
	}
	if got := consumeN(t, brokers, "gtx.out", 5, kgo.FetchIsolationLevel(kgo.ReadCommitted())); len(got) != 5 {
		t.Fatalf("read %d committed records", len(got))
	}
	foreign := topics[0]
	if router.Group(foreign, 3) == router.Group("gtx", 3) {
		foreign = topics[1]
	}
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var perr error
	produced := make(chan struct{})
	txn.Produce(ctx, &kgo.Record{Topic: foreign, Value: []byte("across")}, func(_ *kgo.Record, err error) { perr = err; close(produced) })
	<-produced
	if !errors.Is(perr, kerr.InvalidTxnState) {
		t.Fatalf("a transaction adding %s of another group: %v, want INVALID_TXN_STATE", foreign, perr)
	}
	_ = txn.EndTransaction(ctx, kgo.TryAbort)

	// kill -9 of node 2, which leads group 1: produce goes on, nothing
	// acknowledged is lost.
	c.nodes[1].kill9()
	survivors := []string{c.nodes[0].kafkaAddr, c.nodes[2].kafkaAddr}
	after := kafkaClient(t, survivors, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgoLogger(t, "after-kill"))
	var late []*kgo.Record
	for _, topic := range topics {
		late = append(late, &kgo.Record{Topic: topic, Partition: 2, Value: []byte("late-" + topic)})
	}
	start := time.Now()
	produceSync(t, after, late...)
	t.Logf("produce to the 4 topics acknowledged %v after the kill", time.Since(start).Round(time.Millisecond))
	for _, topic := range topics {
		want := 3*perPartition + 2 // and "more-" and "late-"
		if topic == topics[1] {
			want += 2 // kcat's
		}
		got := consumeN(t, survivors, topic, want)
		last := map[int32]string{}
		for _, r := range got {
			last[r.Partition] = string(r.Value)
		}
		if last[2] != "late-"+topic {
			t.Fatalf("%s[2] ends with %q, want the record acknowledged after the kill", topic, last[2])
		}
	}
}
