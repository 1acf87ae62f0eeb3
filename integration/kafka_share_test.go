package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/command"
)

// franz-go's own share-group tests (TestShareGroupETL with its producer,
// acks of every kind, consumers joining and killed; acks on close; the
// share-group offset admin APIs), run against a three-node cluster
// reached through a follower. A skipped test counts as a failure: the
// suite skips when a broker does not advertise share groups.
// WAGGLE_SHARE_RECORDS sets the ETL's record count (default 50,000;
// franz-go's own default is 500,000).
func TestFranzGoShareGroupSuite(t *testing.T) {
	c := startCluster(t, 3)
	requireLogFormat(t, c.leader(), int(command.LogFormat7))
	out := runFranzGoTests(t, c.followers()[0], cmpOrEnv("WAGGLE_SHARE_RECORDS", "50000"),
		"TestShareGroupETL", "TestShareGroupAckOnClose", "TestShareGroupOffsetsAdmin")
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "share_test.go") && strings.Contains(line, "level ") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

// runFranzGoTests runs franz-go's own kgo integration tests against the
// node seed with KGO_TEST_RECORDS records, requires each to pass (a skip,
// which the suite makes when a broker lacks a feature, fails), and
// answers their output.
func runFranzGoTests(t *testing.T, seed *node, records string, tests ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-timeout=7m", "-v", "github.com/twmb/franz-go/pkg/kgo",
		"-run", "^("+strings.Join(tests, "|")+")$")
	cmd.Env = append(os.Environ(), "KGO_SEEDS="+seed.kafkaAddr, "KGO_TEST_RECORDS="+records, "KGO_LOG_LEVEL=none")
	out, err := cmd.CombinedOutput()
	verdicts := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^--- (PASS|FAIL|SKIP): (\w+)`).FindAllStringSubmatch(string(out), -1) {
		verdicts[m[2]] = m[1]
	}
	for _, name := range tests {
		if verdicts[name] != "PASS" {
			t.Errorf("%s: %q, want PASS", name, verdicts[name])
		}
	}
	if err != nil || t.Failed() {
		tail := string(out)
		if len(tail) > 6000 {
			tail = tail[len(tail)-6000:]
		}
		t.Fatalf("franz-go's tests %v (%d records): %v\n%s", tests, mustAtoi(records), err, tail)
	}
	return string(out)
}

func cmpOrEnv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func mustAtoi(s string) int { n, _ := strconv.Atoi(s); return n }

// setGroupConfigs sets a group's configs (IncrementalAlterConfigs, GROUP).
func setGroupConfigs(t testing.TB, cl *kgo.Client, group string, kv ...string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i+1 < len(kv); i += 2 {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = kv[i], kmsg.StringPtr(kv[i+1])
		r.Configs = append(r.Configs, cfg)
	}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(context.Background(), cl)
	if err == nil && resp.Resources[0].ErrorCode != 0 {
		err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("setting group configs of %s: %v", group, err)
	}
}

// produceToPartitions produces n records "<prefix>-i" round robin over
// partitions.
func produceToPartitions(t testing.TB, cl *kgo.Client, topic, prefix string, partitions int32, n int) {
	t.Helper()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: fmt.Appendf(nil, "%s-%d", prefix, i)})
	}
	produceSync(t, cl, recs...)
}

// shareConsumer runs a kgo share consumer; handle decides each record's
// acknowledgement.
type shareConsumer struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	errs   chan error
}

func startShareConsumer(t testing.TB, brokers []string, group, topic string, handle func(*kgo.Record) kgo.AckStatus, opts ...kgo.Opt) *shareConsumer {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sc := &shareConsumer{cl: cl, cancel: cancel, done: make(chan struct{}), errs: make(chan error, 16)}
	go func() {
		defer close(sc.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, context.Canceled) {
					select {
					case sc.errs <- fmt.Errorf("%s[%d]: %w", topic, p, err):
					default:
					}
				}
			})
			fs.EachRecord(func(r *kgo.Record) { r.Ack(handle(r)) })
		}
	}()
	t.Cleanup(sc.stop)
	return sc
}

func (sc *shareConsumer) stop() {
	select {
	case <-sc.done:
		return
	default:
	}
	sc.cancel()
	<-sc.done
	sc.cl.Close()
}

// A Kafka share consumer and an HTTP consumer of the same group split one
// topic's records between them, through a follower of three nodes: each
// record is finished once, by one of them. A record the share consumer
// rejects is a dead letter over HTTP, and its replay reaches the group
// again with the record's value.
func TestShareConsumerAndHTTPConsumerSplitATopic(t *testing.T) {
	c := startCluster(t, 3)
	requireLogFormat(t, c.leader(), int(command.LogFormat7))
	follower := c.followers()[0]
	brokers := []string{follower.kafkaAddr}
	const topic, group, partitions, total = "split", "splitters", 4, 400
	admin := kafkaClient(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, admin, topic, partitions, nil)
	setGroupConfigs(t, admin, group, "share.auto.offset.reset", "earliest")
	produceToPartitions(t, admin, topic, "r", partitions, total)

	var mu sync.Mutex
	seen := map[string][]string{} // partition/offset → who finished it
	values := map[string]bool{}   // every value seen
	finished := func(partition string, offset int64, value, by string) {
		mu.Lock()
		k := partition + "/" + strconv.FormatInt(offset, 10)
		seen[k] = append(seen[k], by)
		values[value] = true
		mu.Unlock()
	}
	sc := startShareConsumer(t, brokers, group, topic, func(r *kgo.Record) kgo.AckStatus {
		if string(r.Value) == "reject-me" {
			return kgo.AckReject
		}
		finished(strconv.Itoa(int(r.Partition)), r.Offset, string(r.Value), "kafka")
		return kgo.AckAccept
	}, kgo.ShareMaxRecords(5)) // small acquisitions leave partitions for the HTTP consumer

	count := func() (n, byHTTP, byKafka int) {
		mu.Lock()
		defer mu.Unlock()
		for _, by := range seen {
			n++
			for _, b := range by {
				if b == "http" {
					byHTTP++
				} else {
					byKafka++
				}
			}
		}
		return n, byHTTP, byKafka
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case err := <-sc.errs:
			t.Fatal(err)
		default:
		}
		status, ans := follower.pop(t, topic, map[string]string{"consumerGroup": group, "batch": "5", "wait": "true", "timeout": "500"})
		if status == http.StatusOK {
			for _, m := range ans.Messages {
				finished(m.Partition, int64(m.Offset), string(m.Data), "http")
			}
			if code, res := follower.ackAll(t, group, ans.Messages, "completed"); code != http.StatusOK {
				t.Fatalf("ack: %d %+v", code, res)
			}
		}
		if n, _, _ := count(); n >= total || time.Now().After(deadline) {
			break
		}
	}
	n, byHTTP, byKafka := count()
	t.Logf("%d records: %d finished over HTTP, %d by the share consumer", n, byHTTP, byKafka)
	if n != total || byHTTP+byKafka != total {
		mu.Lock()
		for v, by := range seen {
			if len(by) > 1 {
				t.Errorf("%s finished %d times: %v", v, len(by), by)
			}
		}
		mu.Unlock()
		t.Fatalf("%d distinct records finished %d times, want %d once each", n, byHTTP+byKafka, total)
	}
	if byHTTP == 0 || byKafka == 0 {
		t.Fatalf("one consumer got nothing: %d over HTTP, %d over Kafka", byHTTP, byKafka)
	}

	// A rejected record becomes a dead letter with its value; its replay
	// reaches the group again.
	produceSync(t, admin, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("reject-me")})
	var dl struct {
		Messages []struct {
			ID            string          `json:"id"`
			ConsumerGroup string          `json:"consumerGroup"`
			TransactionID string          `json:"transactionId"`
			Data          json.RawMessage `json:"data"`
		} `json:"messages"`
	}
	waitFor(t, 30*time.Second, func() error {
		if code := getJSON(t, follower.url("/api/v1/dlq?queue="+topic), &dl); code != http.StatusOK {
			return fmt.Errorf("GET /dlq: %d", code)
		}
		if len(dl.Messages) != 1 {
			return fmt.Errorf("%d dead letters", len(dl.Messages))
		}
		return nil
	})
	if m := dl.Messages[0]; m.ConsumerGroup != group || !strings.HasPrefix(m.TransactionID, "kafka:") || !strings.Contains(string(m.Data), "cmVqZWN0LW1l") {
		t.Fatalf("dead letter %+v, want the record rejected by group %s", m, group)
	}
	var replayed map[string]any
	if code := postJSON(t, follower.url("/api/v1/dlq/"+dl.Messages[0].ID+"/replay"), nil, &replayed); code != http.StatusOK {
		t.Fatalf("replay: %d %v", code, replayed)
	}
	// The copy is an HTTP message whose payload is the record as HTTP
	// readers see it (the value, base64, in an envelope: it is not JSON).
	waitFor(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		for v := range values {
			if strings.Contains(v, `"value":"cmVqZWN0LW1l"`) {
				return nil
			}
		}
		return errors.New("the replayed copy has not been consumed")
	})
}

// Share consumers across a leader kill, three nodes: every record is
// delivered and finished (the group's start offsets reach the end of
// every partition), none is delivered again once its accept was confirmed
// (the acknowledgement callback reported its partition done), and each
// record's delivery counts only grow, the leases and counts living in the
// replicated state, not the leader's memory. An accept answered with an
// error may still have been applied (its outcome is unknown), so only
// confirmed ones are held to never coming back. Run with six partitions
// and two consumers, and with one partition and three consumers, who
// must each get a share of it (members hold one partition's records side
// by side, as Kafka's share-partitions).
func TestShareConsumersAcrossLeaderKill(t *testing.T) {
	t.Run("six partitions", func(t *testing.T) { shareConsumersAcrossLeaderKill(t, 6, "s1", "s2") })
	t.Run("one partition", func(t *testing.T) { shareConsumersAcrossLeaderKill(t, 1, "s1", "s2", "s3") })
}

func shareConsumersAcrossLeaderKill(t *testing.T, partitions int32, consumers ...string) {
	c := startCluster(t, 3)
	requireLogFormat(t, c.leader(), int(command.LogFormat11))
	brokers := c.kafkaAddrs()
	const topic, group, total = "shared-ha", "sharers-ha", 3000
	admin := kafkaClient(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, admin, topic, partitions, nil)
	setGroupConfigs(t, admin, group, "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "3000")
	produceToPartitions(t, admin, topic, "v", partitions, total)

	var mu sync.Mutex
	counts := map[string][]int32{} // value → the delivery counts seen, in order
	confirmed := map[string]bool{} // value → its accept was confirmed
	got := map[string]int{}        // consumer → records delivered to it
	var violations []string
	consume := func(ctx context.Context, name string) {
		var results []kgo.ShareAckResult
		var rmu sync.Mutex
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ClientID(name),
			kgo.ShareMaxRecords(50), kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				rmu.Lock()
				results = append(results, rs...)
				rmu.Unlock()
			}))
		if err != nil {
			t.Error(err)
			return
		}
		defer cl.Close()
		for ctx.Err() == nil {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			fs := cl.PollFetches(pctx)
			cancel()
			var recs []*kgo.Record
			fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
			if len(recs) == 0 {
				continue
			}
			mu.Lock()
			for _, r := range recs {
				v := string(r.Value)
				if confirmed[v] {
					violations = append(violations, fmt.Sprintf("%s delivered again (count %d to %s) after its accept was confirmed", v, r.DeliveryCount(), name))
				}
				if seen := counts[v]; len(seen) > 0 && r.DeliveryCount() <= seen[len(seen)-1] {
					violations = append(violations, fmt.Sprintf("%s: delivery count %d after %v", v, r.DeliveryCount(), seen))
				}
				counts[v] = append(counts[v], r.DeliveryCount())
				got[name]++
				r.Ack(kgo.AckAccept)
			}
			mu.Unlock()
			rmu.Lock()
			results = results[:0]
			rmu.Unlock()
			fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := cl.FlushAcks(fctx)
			cancel()
			if err != nil {
				continue
			}
			rmu.Lock()
			ok := map[int32]bool{} // partitions whose acks all succeeded
			for _, res := range results {
				if _, seen := ok[res.Partition]; !seen {
					ok[res.Partition] = true
				}
				ok[res.Partition] = ok[res.Partition] && res.Err == nil
			}
			rmu.Unlock()
			mu.Lock()
			for _, r := range recs {
				if ok[r.Partition] {
					confirmed[string(r.Value)] = true
				}
			}
			mu.Unlock()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, name := range consumers {
		wg.Add(1)
		go func() { defer wg.Done(); consume(ctx, name) }()
	}
	defer func() { cancel(); wg.Wait() }()
	progress := func() (accepted int) {
		mu.Lock()
		defer mu.Unlock()
		return len(confirmed)
	}
	waitFor(t, 60*time.Second, func() error {
		if n := progress(); n < total/3 {
			return fmt.Errorf("%d of %d confirmed", n, total)
		}
		return nil
	})
	old := c.leader()
	old.kill9()
	t.Logf("killed leader node %d with %d of %d records confirmed", old.id, progress(), total)
	waitFor(t, 120*time.Second, func() error {
		mu.Lock()
		delivered := len(counts)
		mu.Unlock()
		if delivered < total {
			return fmt.Errorf("%d of %d delivered", delivered, total)
		}
		return shareGroupAtEnd(admin, group, topic, partitions)
	})
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	redelivered, maxCount := 0, int32(0)
	for _, seen := range counts {
		if len(seen) > 1 {
			redelivered++
		}
		maxCount = max(maxCount, seen[len(seen)-1])
	}
	t.Logf("%d records delivered (%v per consumer), %d of them confirmed accepted, %d delivered more than once, highest delivery count %d",
		len(counts), got, len(confirmed), redelivered, maxCount)
	for _, v := range violations {
		t.Error(v)
	}
	for _, name := range consumers {
		if got[name] == 0 {
			t.Errorf("consumer %s got no record of %d partitions shared by %d consumers", name, partitions, len(consumers))
		}
	}
	if len(counts) != total {
		t.Fatalf("%d distinct records delivered, want %d", len(counts), total)
	}
}

// shareGroupAtEnd reports why a share group has not finished every record
// of a topic (nil when its start offsets are the partitions' ends).
func shareGroupAtEnd(cl *kgo.Client, group, topic string, partitions int32) error {
	ends, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), topic)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	g.GroupID = group
	req.Groups = append(req.Groups, g)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		return err
	}
	start := map[int32]int64{}
	for _, t := range resp.Groups[0].Topics {
		for _, p := range t.Partitions {
			if t.Topic == topic {
				start[p.Partition] = p.StartOffset
			}
		}
	}
	for p := range partitions {
		end, ok := ends.Lookup(topic, p)
		if !ok || start[p] != end.Offset {
			return fmt.Errorf("partition %d: start offset %d, end %d", p, start[p], end.Offset)
		}
	}
	return nil
}

// share.isolation.level through a follower of three nodes: a share group
// at Kafka's default, read_uncommitted, receives an open transaction's
// records (with delivery count 1: they were not burned by acquisitions
// that could not send them), while a read_committed group receives them
// only once the transaction commits.
func TestShareIsolationLevels(t *testing.T) {
	c := startCluster(t, 3)
	requireLogFormat(t, c.leader(), int(command.LogFormat11))
	brokers := []string{c.followers()[0].kafkaAddr}
	const topic = "shared-txn"
	admin := kafkaClient(t, brokers)
	createTopic(t, admin, topic, 1, nil)
	setGroupConfigs(t, admin, "dirty", "share.auto.offset.reset", "earliest")
	setGroupConfigs(t, admin, "clean", "share.auto.offset.reset", "earliest", "share.isolation.level", "read_committed")

	producer := kafkaClient(t, brokers, kgo.TransactionalID("share-txn"), kgo.DefaultProduceTopic(topic))
	ctx := context.Background()
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := producer.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "t-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	share := func(group string) *kgo.Client {
		return kafkaClient(t, brokers, kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	}
	// poll gathers what cl receives for wait, accepting it.
	poll := func(cl *kgo.Client, wait time.Duration) map[string]int16 {
		got := map[string]int16{}
		deadline := time.Now().Add(wait)
		for time.Now().Before(deadline) && len(got) < 5 {
			pctx, cancel := context.WithDeadline(ctx, deadline)
			cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
				got[string(r.Value)] = int16(r.DeliveryCount())
				r.Ack(kgo.AckAccept)
			})
			cancel()
		}
		return got
	}
	dirty, clean := share("dirty"), share("clean")
	got := poll(dirty, 20*time.Second)
	if len(got) != 5 {
		t.Fatalf("read_uncommitted got %v of an open transaction's 5 records", got)
	}
	for v, n := range got {
		if n != 1 {
			t.Errorf("%s arrived with delivery count %d, want 1", v, n)
		}
	}
	if early := poll(clean, 3*time.Second); len(early) != 0 {
		t.Fatalf("read_committed got %v while the transaction is open", early)
	}
	if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if late := poll(clean, 20*time.Second); len(late) != 5 {
		t.Fatalf("read_committed got %v of 5 after the commit", late)
	}
}
