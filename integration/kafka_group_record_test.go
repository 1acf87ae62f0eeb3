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

// A classic group's membership is recorded (log format 6), so a leader
// kill costs its members no rebalance: they heartbeat on to the new
// leader in their generation, keep their partitions and go on consuming.
// Before, the new leader knew no member: each lost its partitions, joined
// again and waited out the failover grace, and under repeated leader
// kills (the chaos test) a group could stop consuming for as long as the
// kills went on.
func TestGroupKeepsItsMembersAcrossALeaderKill(t *testing.T) {
	c := startCluster(t, 3)
	requireLogFormat(t, c.leader(), int(command.MaxLogFormat))
	brokers := c.kafkaAddrs()
	producer := kafkaClient(t, brokers, kgo.DefaultProduceTopic("kept"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, producer, "kept", 4, nil)

	// A producer numbers its records, sends them to each partition in
	// turn (every member has some to consume and commit), and notes when
	// each was sent.
	var sentAt sync.Map // value -> time.Time
	ctx, stop := context.WithCancel(context.Background())
	var producing sync.WaitGroup
	defer func() { stop(); producing.Wait() }()
	producing.Add(1)
	go func() {
		defer producing.Done()
		for i := 0; ctx.Err() == nil; i++ {
			v := strconv.Itoa(i)
			sentAt.Store(v, time.Now())
			producer.Produce(ctx, &kgo.Record{Partition: int32(i % 4), Value: []byte(v)}, func(*kgo.Record, error) {})
			time.Sleep(5 * time.Millisecond)
		}
	}()

	// Two members; every partition they lose or give up is counted, and
	// each notes when a commit of its last succeeded.
	var killed atomic.Bool
	var lostAfterKill atomic.Int64
	var lastSentSeen atomic.Int64 // UnixNano of the newest record's send time seen
	var committedAt [2]atomic.Int64
	for i := range 2 {
		onChange := func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
			if killed.Load() {
				for _, ps := range parts {
					lostAfterKill.Add(int64(len(ps)))
				}
			}
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup("keepers"), kgo.ConsumeTopics("kept"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(10*time.Second),
			kgo.HeartbeatInterval(500*time.Millisecond), kgo.OnPartitionsLost(onChange), kgo.OnPartitionsRevoked(onChange),
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
				committedAt[i].Store(time.Now().UnixNano())
			}))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ctx.Err() == nil {
				for _, r := range cl.PollFetches(ctx).Records() {
					if at, ok := sentAt.Load(string(r.Value)); ok {
						sent := at.(time.Time).UnixNano()
						for prev := lastSentSeen.Load(); sent > prev && !lastSentSeen.CompareAndSwap(prev, sent); prev = lastSentSeen.Load() {
						}
					}
				}
			}
		}()
		t.Cleanup(func() { stop(); <-done; cl.Close() })
	}
	consumedSince := func(at time.Time) error {
		if seen := time.Unix(0, lastSentSeen.Load()); !seen.After(at) {
			return fmt.Errorf("newest record consumed was sent at %s, not after %s", seen.Format(time.StampMilli), at.Format(time.StampMilli))
		}
		return nil
	}
	// Both members settled (a record sent after a quiet second arrives).
	settled := time.Now().Add(3 * time.Second)
	waitFor(t, 60*time.Second, func() error { return consumedSince(settled) })

	leader := c.leader()
	killed.Store(true)
	killedAt := time.Now()
	leader.kill9()
	waitFor(t, 60*time.Second, func() error { return consumedSince(killedAt) })
	resumed := time.Since(killedAt)
	// Fetching goes on at the partitions' new leader whatever the group;
	// a member's commit is what the new coordinator accepts only from a
	// member it knows, in its generation.
	waitFor(t, 60*time.Second, func() error {
		for i := range committedAt {
			if at := time.Unix(0, committedAt[i].Load()); !at.After(killedAt) {
				return fmt.Errorf("member %d last committed at %s, before the kill", i, at.Format(time.StampMilli))
			}
		}
		return nil
	})
	if n := lostAfterKill.Load(); n > 0 {
		t.Fatalf("the leader kill cost the members %d partitions (lost or revoked): the new leader did not know the group", n)
	}
	t.Logf("consuming again %v and both members committing %v after the leader was killed; no partition lost or revoked",
		resumed.Round(10*time.Millisecond), time.Since(killedAt).Round(10*time.Millisecond))
}
