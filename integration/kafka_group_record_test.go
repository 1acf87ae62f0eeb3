package integration

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/command"
)

// recordMember is a kgo group member of TestGroupKeepsItsGenerationAcrossALeaderKill.
type recordMember struct {
	cl          *kgo.Client
	owned       atomic.Int64 // partitions it owns
	lost        atomic.Int64 // partitions lost or revoked since counting began
	counting    atomic.Bool
	committedAt atomic.Int64 // UnixNano of its last commit accepted whole
}

// newRecordMember starts a member of group "keepers" consuming "kept" and
// committing every 500 ms.
func newRecordMember(t *testing.T, ctx context.Context, brokers []string) *recordMember {
	m := &recordMember{}
	change := func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
		for _, ps := range parts {
			m.owned.Add(-int64(len(ps)))
			if m.counting.Load() {
				m.lost.Add(int64(len(ps)))
			}
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup("keepers"), kgo.ConsumeTopics("kept"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
			for _, ps := range parts {
				m.owned.Add(int64(len(ps)))
			}
		}),
		kgo.OnPartitionsLost(change), kgo.OnPartitionsRevoked(change),
		kgo.AutoCommitInterval(500*time.Millisecond),
		kgo.AutoCommitCallback(func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				return
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode != 0 {
						return
					}
				}
			}
			m.committedAt.Store(time.Now().UnixNano())
		}))
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	t.Cleanup(func() { <-done; cl.Close() })
	return m
}

// committedSince reports whether m had a commit accepted after at: the
// coordinator knew it, in its generation.
func (m *recordMember) committedSince(at time.Time) bool {
	return time.Unix(0, m.committedAt.Load()).After(at)
}

// A classic group's generation is recorded (log format 6), so a new leader
// coordinates the group where the old one left it: after a leader kill the
// members commit on in their generation (or, for one whose heartbeat kgo
// saw refused by the dead leader, the next one). Before, the new leader
// knew no member: every member lost its partitions and the group started
// again from generation 1 under the failover grace, and under repeated
// leader kills (the chaos test) a group could stop consuming for as long
// as the kills went on.
func TestGroupKeepsItsGenerationAcrossALeaderKill(t *testing.T) {
	c := startCluster(t, 3)
	requireLogFormat(t, c.leader(), int(command.MaxLogFormat))
	brokers := c.kafkaAddrs()
	producer := kafkaClient(t, brokers, kgo.DefaultProduceTopic("kept"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, producer, "kept", 4, nil)

	// A producer sends to each partition in turn, so every member has
	// records to consume and commit.
	ctx, stop := context.WithCancel(context.Background())
	var producing sync.WaitGroup
	defer func() { stop(); producing.Wait() }()
	producing.Add(1)
	go func() {
		defer producing.Done()
		for i := 0; ctx.Err() == nil; i++ {
			producer.Produce(ctx, &kgo.Record{Partition: int32(i % 4), Value: []byte(strconv.Itoa(i))}, func(*kgo.Record, error) {})
			time.Sleep(5 * time.Millisecond)
		}
	}()

	// One member, then a second: kgo's cooperative balancer takes two
	// more generations to hand the newcomer its share, so the group is
	// past generation 1 before the kill.
	first := newRecordMember(t, ctx, brokers)
	waitFor(t, 60*time.Second, func() error {
		if n := first.owned.Load(); n != 4 {
			return fmt.Errorf("first member owns %d partitions, want 4", n)
		}
		return nil
	})
	second := newRecordMember(t, ctx, brokers)
	members := []*recordMember{first, second}
	var settled time.Time
	var before int32
	waitFor(t, 60*time.Second, func() error {
		a, b := first.owned.Load(), second.owned.Load()
		_, g1 := first.cl.GroupMetadata()
		_, g2 := second.cl.GroupMetadata()
		if a == 0 || b == 0 || a+b != 4 || g1 != g2 {
			settled = time.Time{}
			return fmt.Errorf("members own %d and %d partitions in generations %d and %d, want all 4 split in one", a, b, g1, g2)
		}
		if settled.IsZero() {
			settled, before = time.Now(), g1
		}
		for i, m := range members {
			if !m.committedSince(settled) {
				return fmt.Errorf("member %d has not committed since the group settled", i)
			}
		}
		return nil
	})
	if before < 3 {
		t.Fatalf("the group settled in generation %d: too early to tell a kept generation from a new group", before)
	}

	leader := c.leader()
	for _, m := range members {
		m.counting.Store(true)
	}
	killedAt := time.Now()
	leader.kill9()
	waitFor(t, 60*time.Second, func() error {
		for i, m := range members {
			if !m.committedSince(killedAt) {
				return fmt.Errorf("member %d has not committed since the kill", i)
			}
		}
		return nil
	})
	took := time.Since(killedAt)
	for i, m := range members {
		if _, after := m.cl.GroupMetadata(); after < before {
			t.Fatalf("member %d commits in generation %d after the kill, the group was in %d: the new leader started the group anew", i, after, before)
		}
	}
	t.Logf("both members committing again %v after the leader was killed, from generation %d on; partitions lost or revoked: %d and %d (kgo drops a member whose heartbeat meets the dead leader's refused connection)",
		took.Round(10*time.Millisecond), before, first.lost.Load(), second.lost.Load())
}
