package integration

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupConsumer is one member of a consumer group that records what it
// read and commits after each poll.
type groupConsumer struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func startGroupConsumer(t *testing.T, brokers []string, group, topic string, seen *sync.Map) *groupConsumer {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(300*time.Millisecond), kgo.RebalanceTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gc := &groupConsumer{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(gc.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			for _, r := range fs.Records() {
				seen.Store(string(r.Value), true)
			}
			if len(fs.Records()) > 0 {
				cl.CommitUncommittedOffsets(ctx)
			}
		}
	}()
	t.Cleanup(gc.stop)
	return gc
}

// stop leaves the group (kgo sends LeaveGroup on Close).
func (gc *groupConsumer) stop() {
	select {
	case <-gc.done:
		return
	default:
	}
	gc.cancel()
	<-gc.done
	gc.cl.Close()
}

func countSeen(m *sync.Map) int {
	n := 0
	m.Range(func(_, _ any) bool { n++; return true })
	return n
}

func describeGroup(t *testing.T, cl *kgo.Client, group string) kmsg.DescribeGroupsResponseGroup {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Groups[0]
}

// Three consumers share six partitions; one leaves half way; the other two
// take its partitions over and nothing is skipped.
func TestConsumerGroupRebalanceSkipsNothing(t *testing.T) {
	n := startSingle(t)
	brokers := []string{n.kafkaAddr}
	admin := kafkaClient(t, brokers, kgo.DefaultProduceTopic("jobs"))
	createTopic(t, admin, "jobs", 6, nil)
	const total = 6000
	var recs []*kgo.Record
	for i := range total / 2 {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(i % 97)), Value: []byte(fmt.Sprint("job-", i))})
	}
	produceSync(t, admin, recs...)

	var seen sync.Map
	consumers := []*groupConsumer{
		startGroupConsumer(t, brokers, "workers", "jobs", &seen),
		startGroupConsumer(t, brokers, "workers", "jobs", &seen),
		startGroupConsumer(t, brokers, "workers", "jobs", &seen),
	}
	waitFor(t, 30*time.Second, func() error {
		g := describeGroup(t, admin, "workers")
		if g.State != "Stable" || len(g.Members) != 3 {
			return fmt.Errorf("group %s with %d members", g.State, len(g.Members))
		}
		return nil
	})
	waitFor(t, 30*time.Second, func() error {
		if c := countSeen(&seen); c < total/2 {
			return fmt.Errorf("%d of %d consumed", c, total/2)
		}
		return nil
	})

	consumers[0].stop() // leaves the group: the others rebalance
	recs = recs[:0]
	for i := total / 2; i < total; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(i % 97)), Value: []byte(fmt.Sprint("job-", i))})
	}
	produceSync(t, admin, recs...)
	waitFor(t, 30*time.Second, func() error {
		if c := countSeen(&seen); c < total {
			return fmt.Errorf("%d of %d consumed after a member left", c, total)
		}
		return nil
	})
	for i := range total {
		if _, ok := seen.Load(fmt.Sprint("job-", i)); !ok {
			t.Fatalf("job-%d was skipped", i)
		}
	}
	g := describeGroup(t, admin, "workers")
	if len(g.Members) != 2 {
		t.Fatalf("after one member left the group has %d members", len(g.Members))
	}
}

// Committed offsets are replicated: after the leader (the coordinator) is
// killed, a consumer of the same group resumes exactly after what was
// committed.
func TestCommittedOffsetsSurviveLeaderKill(t *testing.T) {
	c := startCluster(t, 3)
	brokers := c.kafkaAddrs()
	admin := kafkaClient(t, brokers, kgo.DefaultProduceTopic("resume"))
	createTopic(t, admin, "resume", 2, nil)
	var recs []*kgo.Record
	for i := range 1000 {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint("before-", i))})
	}
	produceSync(t, admin, recs...)

	var first sync.Map
	gc := startGroupConsumer(t, brokers, "resumers", "resume", &first)
	waitFor(t, 30*time.Second, func() error {
		if n := countSeen(&first); n < 1000 {
			return fmt.Errorf("%d of 1000 consumed", n)
		}
		return nil
	})
	// Wait until the commits cover everything, then stop the consumer.
	waitFor(t, 20*time.Second, func() error {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = "resumers"
		resp, err := req.RequestWith(context.Background(), admin)
		if err != nil {
			return err
		}
		sum := int64(0)
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				sum += p.Offset
			}
		}
		if sum != 1000 {
			return fmt.Errorf("committed offsets add up to %d, want 1000", sum)
		}
		return nil
	})
	gc.stop()

	// The same positions over HTTP: the group's cursors with lag 0.
	var hg struct {
		Name    string
		Cursors []struct {
			Queue, Partition string
			Offset, Lag      int64
		}
	}
	if status := getJSON(t, c.leader().url("/api/v1/consumer-groups/resumers"), &hg); status != http.StatusOK || len(hg.Cursors) != 2 {
		t.Fatalf("HTTP view of the group: status %d %+v", status, hg)
	}
	for _, cur := range hg.Cursors {
		if cur.Queue != "resume" || cur.Lag != 0 || cur.Offset == 0 {
			t.Fatalf("HTTP cursor %+v: want the committed end of the partition, lag 0", cur)
		}
	}

	c.leader().kill9()
	c.leader()
	var after []*kgo.Record
	for i := range 10 {
		after = append(after, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint("after-", i))})
	}
	produceSync(t, admin, after...)

	var second sync.Map
	startGroupConsumer(t, brokers, "resumers", "resume", &second)
	waitFor(t, 30*time.Second, func() error {
		if n := countSeen(&second); n < 10 {
			return fmt.Errorf("%d of the 10 new records consumed", n)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond) // anything re-read from before would arrive with them
	second.Range(func(k, _ any) bool {
		if !strings.HasPrefix(k.(string), "after-") {
			t.Errorf("after failover the group re-read %s: committed offsets were lost", k)
		}
		return true
	})
}

// A Kafka consumer group and an HTTP consumer group of the same name share
// their position on a queue, both ways.
func TestKafkaAndHTTPGroupsShareCursors(t *testing.T) {
	n := startSingle(t)
	var values []string
	for i := range 10 {
		values = append(values, fmt.Sprintf(`{"i":%d}`, i))
	}
	cl := newTopic(t, n.kafkaAddr, "shared", 1, values...)

	// Kafka commits 6 for group "same" (a simple commit: no member).
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "same", -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "shared"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, 6
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	cresp, err := commit.RequestWith(context.Background(), cl)
	if err != nil || cresp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %v %+v", err, cresp)
	}

	// The HTTP group "same" continues from 6 and completes the rest.
	status, got := n.pop(t, "shared", map[string]string{"consumerGroup": "same", "batch": "10"})
	if status != http.StatusOK || len(got.Messages) != 4 || got.Messages[0].Offset != 6 || got.Messages[0].TransactionID != "kafka:6" {
		t.Fatalf("HTTP pop after a Kafka commit at 6: %d %+v", status, got)
	}
	_, res := n.ackAll(t, "same", got.Messages, "completed")
	requireAcked(t, res, 4)

	// And Kafka sees the HTTP group's position.
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = "same"
	fresp, err := fetch.RequestWith(context.Background(), cl)
	if err != nil || len(fresp.Topics) != 1 || fresp.Topics[0].Partitions[0].Offset != 10 {
		t.Fatalf("Kafka OffsetFetch after the HTTP group completed: %v %+v", err, fresp)
	}
}

// A Kafka group's members, their assignment and the group's state show in
// the HTTP group answer and in `waggle group describe`, asked of a follower
// too (the membership lives on the leader, which answers).
func TestGroupDescribeShowsKafkaMembers(t *testing.T) {
	c := startCluster(t, 3)
	brokers := c.kafkaAddrs()
	admin := kafkaClient(t, brokers)
	createTopic(t, admin, "members-t", 3, nil)
	produceSync(t, admin, &kgo.Record{Topic: "members-t", Value: []byte("x")})
	groupMember(t, brokers, "members-g", "members-t", kgo.ClientID("describe-me"))

	follower := c.followers()[0]
	var g struct {
		Kafka *struct {
			State, Protocol string
			Members         []struct {
				MemberID, ClientID string
				Assignment         []struct {
					Topic      string
					Partitions []int32
				}
			}
		}
	}
	waitFor(t, 20*time.Second, func() error {
		if status := getJSON(t, follower.url("/api/v1/consumer-groups/members-g"), &g); status != http.StatusOK {
			return fmt.Errorf("status %d", status)
		}
		if g.Kafka == nil || g.Kafka.State != "Stable" || len(g.Kafka.Members) != 1 {
			return fmt.Errorf("kafka membership %+v, want one member of a Stable group", g.Kafka)
		}
		m := g.Kafka.Members[0]
		if m.ClientID != "describe-me" || len(m.Assignment) != 1 || m.Assignment[0].Topic != "members-t" || len(m.Assignment[0].Partitions) != 3 {
			return fmt.Errorf("member %+v, want client describe-me assigned members-t's 3 partitions", m)
		}
		return nil
	})
	out, err := runWithTimeout(t, exec.Command(waggleBinary, "--server", follower.httpAddr, "group", "describe", "members-g"), 30*time.Second)
	if err != nil || !strings.Contains(string(out), "Kafka classic group: Stable") || !strings.Contains(string(out), "members-t[0 1 2]") {
		t.Fatalf("group describe: %v\n%s", err, out)
	}
}
