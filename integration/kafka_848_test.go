package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ownership records which KIP-848 member holds each partition, from kgo's
// assign and revoke callbacks, and every moment two held one together.
type ownership struct {
	mu         sync.Mutex
	owner      map[int32]string
	violations []string
	events     []string // every change, timed, for a failure's report
}

// event records a change; the caller holds o.mu.
func (o *ownership) event(format string, args ...any) {
	o.events = append(o.events, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
}

func (o *ownership) assigned(member string, ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.event("%s assigned %v", member, ps)
	for _, p := range ps {
		if cur, held := o.owner[p]; held && cur != member {
			o.violations = append(o.violations, fmt.Sprintf("partition %d assigned to %s while %s holds it", p, member, cur))
		}
		o.owner[p] = member
	}
}

func (o *ownership) released(member string, ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.event("%s released %v", member, ps)
	for _, p := range ps {
		if o.owner[p] == member {
			delete(o.owner, p)
		}
	}
}

// consumer848 is one member of a KIP-848 group (kgo's ServerSideBalancer).
type consumer848 struct {
	name   string
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	errs   chan error
}

func startConsumer848(t *testing.T, brokers []string, name, group, topic string, seen *sync.Map, own *ownership) *consumer848 {
	t.Helper()
	c := &consumer848{name: name, done: make(chan struct{}), errs: make(chan error, 16)}
	topicParts := func(m map[string][]int32) []int32 { return m[topic] }
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ClientID(name),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.StickyBalancer()), kgo.ServerSideBalancer(), // server assignor "uniform"
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.assigned(name, topicParts(m)) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			cl.CommitUncommittedOffsets(ctx) // before the partitions are handed on
			own.released(name, topicParts(m))
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.released(name, topicParts(m)) }),
	)
	if err != nil {
		t.Fatal(err)
	}
	c.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, context.Canceled) {
					select {
					case c.errs <- fmt.Errorf("%s: fetch %s[%d]: %w", name, topic, p, err):
					default:
					}
				}
			})
			for _, r := range fs.Records() {
				seen.Store(string(r.Value), name)
			}
			if len(fs.Records()) > 0 {
				if err := cl.CommitUncommittedOffsets(ctx); err != nil && !errors.Is(err, context.Canceled) {
					select {
					case c.errs <- fmt.Errorf("%s: commit: %w", name, err):
					default:
					}
				}
			}
		}
	}()
	t.Cleanup(c.stop)
	return c
}

// stop ends polling and closes the client, which leaves the group
// (MemberEpoch -1) after revoking its partitions.
func (c *consumer848) stop() {
	select {
	case <-c.done:
		return
	default:
	}
	c.cancel()
	<-c.done
	c.cl.Close()
}

// describe848 asks for the group with ConsumerGroupDescribe; a transport
// error (a node just killed) comes back as the group's error message.
func describe848(t *testing.T, cl kmsg.Requestor, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.ErrorCode, g.ErrorMessage = -1, kmsg.StringPtr(err.Error())
		return g
	}
	return resp.Groups[0]
}

// balanced checks the group is Stable with members each owning want
// partitions of the topic, every partition once.
func balanced(g kmsg.ConsumerGroupDescribeResponseGroup, members, partitions int) error {
	if g.ErrorCode != 0 || g.State != "Stable" || len(g.Members) != members {
		msg := ""
		if g.ErrorMessage != nil {
			msg = *g.ErrorMessage
		}
		return fmt.Errorf("group %s (error %d %s) with %d members, want Stable with %d", g.State, g.ErrorCode, msg, len(g.Members), members)
	}
	var all []int32
	for _, m := range g.Members {
		n := 0
		for _, t := range m.Assignment.TopicPartitions {
			all = append(all, t.Partitions...)
			n += len(t.Partitions)
		}
		if n != partitions/members {
			return fmt.Errorf("member %s owns %d partitions, want %d", m.MemberID, n, partitions/members)
		}
	}
	slices.Sort(all)
	if len(slices.Compact(all)) != partitions {
		return fmt.Errorf("partitions owned: %v", all)
	}
	return nil
}

func produceJobs(t *testing.T, cl *kgo.Client, from, to int) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(i % 101)), Value: []byte(fmt.Sprint("job-", i))})
	}
	produceSync(t, cl, recs...)
}

// Three KIP-848 members share a 6-partition topic; one leaves half way and
// the two left take its partitions over, then the topic grows to 8 and the
// new partitions are assigned. No record is skipped, no partition is ever
// held by two members, and a new member of the group resumes from the
// committed offsets.
func TestKIP848ConsumerGroup(t *testing.T) {
	n := withArgs(newNode(t, 1), []string{"--kafka-consumer-heartbeat-interval", "250ms", "--kafka-consumer-session-timeout", "6s"})
	n.start()
	n.waitLeader()
	brokers := []string{n.kafkaAddr}
	const topic, group, partitions, half = "jobs848", "workers848", 6, 3000
	const total = 2*half + 40 // and 40 more once the topic has grown
	admin := kafkaClient(t, brokers, kgo.DefaultProduceTopic(topic))
	createTopic(t, admin, topic, partitions, nil)
	produceJobs(t, admin, 0, half)

	var seen sync.Map
	own := &ownership{owner: map[int32]string{}}
	consumers := []*consumer848{
		startConsumer848(t, brokers, "c0", group, topic, &seen, own),
		startConsumer848(t, brokers, "c1", group, topic, &seen, own),
		startConsumer848(t, brokers, "c2", group, topic, &seen, own),
	}
	checkErrs := func() error {
		for _, c := range consumers {
			select {
			case err := <-c.errs:
				t.Fatal(err)
			default:
			}
		}
		own.mu.Lock()
		defer own.mu.Unlock()
		if len(own.violations) > 0 {
			t.Fatalf("a partition had two owners: %v", own.violations)
		}
		return nil
	}
	waitFor(t, 15*time.Second, func() error {
		checkErrs()
		return balanced(describe848(t, admin, group), 3, partitions)
	}, func() string { return n.logTail() })
	waitFor(t, 15*time.Second, func() error {
		checkErrs()
		if c := countSeen(&seen); c < half {
			return fmt.Errorf("%d of %d consumed", c, half)
		}
		return nil
	})

	// ListGroups v5 and DescribeGroups show the group as a consumer group.
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.TypesFilter = []string{"consumer"}
	lresp, err := lreq.RequestWith(context.Background(), admin)
	if err != nil {
		t.Fatal(err)
	}
	if len(lresp.Groups) != 1 || lresp.Groups[0].Group != group || lresp.Groups[0].GroupType != "consumer" {
		t.Fatalf("ListGroups of type consumer: %+v", lresp.Groups)
	}
	if g := describeGroup(t, admin, group); g.ProtocolType != "consumer" || g.Protocol != "uniform" || len(g.Members) != 3 {
		t.Fatalf("DescribeGroups: %s/%s with %d members", g.ProtocolType, g.Protocol, len(g.Members))
	}

	consumers[0].stop() // leaves: its partitions move to c1 and c2
	consumers = consumers[1:]
	produceJobs(t, admin, half, 2*half)
	waitFor(t, 15*time.Second, func() error {
		checkErrs()
		if c := countSeen(&seen); c < 2*half {
			return fmt.Errorf("%d of %d consumed after a member left", c, 2*half)
		}
		return balanced(describe848(t, admin, group), 2, partitions)
	}, func() string { return n.logTail() })

	// The topic grows to 8 partitions: the members' heartbeats see it and
	// the two new partitions are assigned and read.
	preq := kmsg.NewPtrCreatePartitionsRequest()
	pt := kmsg.NewCreatePartitionsRequestTopic()
	pt.Topic, pt.Count = topic, partitions+2
	preq.Topics = append(preq.Topics, pt)
	presp, err := preq.RequestWith(context.Background(), admin)
	if err != nil || presp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create partitions: %v %+v", err, presp)
	}
	grown := kafkaClient(t, brokers, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := 2 * half; i < total; i++ {
		recs = append(recs, &kgo.Record{Partition: int32(partitions + i%2), Value: []byte(fmt.Sprint("job-", i))})
	}
	produceSync(t, grown, recs...)
	waitFor(t, 15*time.Second, func() error {
		checkErrs()
		if c := countSeen(&seen); c < total {
			return fmt.Errorf("%d of %d consumed after the topic grew", c, total)
		}
		return balanced(describe848(t, admin, group), 2, partitions+2)
	}, func() string { return n.logTail() })
	for _, c := range consumers {
		c.stop()
	}
	checkErrs()
	waitFor(t, 10*time.Second, func() error {
		if g := describe848(t, admin, group); g.ErrorCode != kerr.GroupIDNotFound.Code {
			return fmt.Errorf("group still %s with %d members after all left", g.State, len(g.Members))
		}
		return nil
	})

	// Committed offsets: every partition's is its end.
	freq := kmsg.NewPtrOffsetFetchRequest()
	freq.Group = group
	fresp, err := freq.RequestWith(context.Background(), admin)
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	for _, ft := range fresp.Topics {
		for _, p := range ft.Partitions {
			committed += p.Offset
		}
	}
	if committed != total {
		t.Fatalf("committed offsets add up to %d, want %d", committed, total)
	}

	// A new member resumes where the group left off: it reads only the
	// records produced after.
	var later sync.Map
	startConsumer848(t, brokers, "c3", group, topic, &later, &ownership{owner: map[int32]string{}})
	produceJobs(t, admin, total, total+60)
	waitFor(t, 15*time.Second, func() error {
		if c := countSeen(&later); c < 60 {
			return fmt.Errorf("%d of the 60 new records consumed", c)
		}
		return nil
	})
	var old []string
	later.Range(func(k, _ any) bool {
		var i int
		if fmt.Sscanf(k.(string), "job-%d", &i); i < total {
			old = append(old, k.(string))
		}
		return true
	})
	sort.Strings(old)
	if len(old) > 0 {
		t.Fatalf("the new member re-read %d committed records: %v", len(old), old[:min(5, len(old))])
	}
}

// Membership lives in the leader's memory: a follower answers
// NOT_COORDINATOR, and after the leader dies the members find the new one,
// are told UNKNOWN_MEMBER_ID, join again with epoch 0 and go on from the
// replicated committed offsets. The new leader cannot know what a member
// that has not reached it yet still holds, so it assigns nothing to the
// re-formed group for its failover grace (kafka/failover.go): no
// partition ever has two owners across the change, and the members get
// them back once the grace is over.
func TestKIP848MembersRejoinAfterLeaderChange(t *testing.T) {
	// The session timeout leaves room for the default failover grace
	// (250 ms + 15 s): kgo reaches the new leader only after its heartbeat
	// retries back off, about 8 s after the kill.
	c := startCluster(t, 3, "--kafka-consumer-heartbeat-interval", "250ms", "--kafka-consumer-session-timeout", "20s")
	brokers := c.kafkaAddrs()
	const topic, group, partitions, batch = "jobs848ha", "workers848ha", 6, 600
	admin := kafkaClient(t, brokers, kgo.DefaultProduceTopic(topic))
	createTopic(t, admin, topic, partitions, nil)
	produceJobs(t, admin, 0, batch)

	var seen sync.Map
	own := &ownership{owner: map[int32]string{}}
	startConsumer848(t, brokers, "h0", group, topic, &seen, own)
	startConsumer848(t, brokers, "h1", group, topic, &seen, own)
	waitFor(t, 15*time.Second, func() error {
		if n := countSeen(&seen); n < batch {
			return fmt.Errorf("%d of %d consumed", n, batch)
		}
		return balanced(describe848(t, admin, group), 2, partitions)
	})

	// A follower does not coordinate.
	follower := c.followers()[0]
	fcl := kafkaClient(t, []string{follower.kafkaAddr})
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames = group, "probe", 10_000, []string{topic}
	resp, err := hb.RequestWith(context.Background(), fcl.Broker(follower.id))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("follower answered %v, want NOT_COORDINATOR", kerr.ErrorForCode(resp.ErrorCode))
	}

	own.mu.Lock()
	own.event("killing the leader")
	own.mu.Unlock()
	c.leader().kill9()
	c.leader() // a new one
	own.mu.Lock()
	own.event("a new leader")
	own.mu.Unlock()
	produceJobs(t, admin, batch, 2*batch)
	waitFor(t, 60*time.Second, func() error {
		if n := countSeen(&seen); n < 2*batch {
			return fmt.Errorf("%d of %d consumed after the leader change", n, 2*batch)
		}
		l, err := c.findLeader()
		if err != nil {
			return err
		}
		return balanced(describe848(t, admin.Broker(l.id), group), 2, partitions)
	}, c.diagnose)
	own.mu.Lock()
	defer own.mu.Unlock()
	if len(own.violations) > 0 {
		t.Fatalf("partitions with two owners across the leader change: %v\n%s", own.violations, strings.Join(own.events, "\n"))
	}
}
