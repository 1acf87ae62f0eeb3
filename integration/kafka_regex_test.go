package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Two KIP-848 members subscribe by pattern through a follower of a
// three-node cluster; the broker resolves the pattern (kgo sends it as
// SubscribedTopicRegex). They consume every record of the matching topics
// and none of the others, a matching topic created later reaches them
// without a restart, and a deleted one leaves the group's assignment.
func TestKIP848RegexSubscriptionFollowsTopics(t *testing.T) {
	c := startCluster(t, 3, "--kafka-consumer-heartbeat-interval", "250ms", "--kafka-consumer-session-timeout", "10s")
	brokers := []string{c.followers()[0].kafkaAddr}
	admin := kafkaClient(t, brokers)
	createTopic(t, admin, "rx-orders-eu", 3, nil)
	createTopic(t, admin, "rx-payments", 2, nil)
	createTopic(t, admin, "x-rx-orders-eu", 1, nil) // the pattern is anchored: not matched
	produced := map[string]int{}
	produce := func(topic string, n int) {
		var recs []*kgo.Record
		for range n {
			recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s/%d", topic, produced[topic])})
			produced[topic]++
		}
		produceSync(t, admin, recs...)
	}
	produce("rx-orders-eu", 90)
	produce("rx-payments", 40)
	produce("x-rx-orders-eu", 10)

	const group = "rx-group"
	var seen sync.Map
	errs := make(chan error, 16)
	startRegexConsumer := func(name string) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ClientID(name),
			kgo.ConsumerGroup(group), kgo.ConsumeRegex(), kgo.ConsumeTopics("^rx-orders-.*$"),
			kgo.Balancers(kgo.StickyBalancer()), kgo.ServerSideBalancer(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				fs.EachError(func(topic string, p int32, err error) {
					if !errors.Is(err, context.Canceled) {
						select {
						case errs <- fmt.Errorf("%s: %s[%d]: %w", name, topic, p, err):
						default:
						}
					}
				})
				fs.EachRecord(func(r *kgo.Record) { seen.Store(string(r.Value), name) })
			}
		}()
		t.Cleanup(func() { cancel(); <-done; cl.Close() })
	}
	startRegexConsumer("rx0")
	startRegexConsumer("rx1")

	seenOf := func(prefix string) int {
		n := 0
		seen.Range(func(k, _ any) bool {
			if strings.HasPrefix(k.(string), prefix+"/") {
				n++
			}
			return true
		})
		return n
	}
	expect := func(what string, want map[string]int) {
		t.Helper()
		waitFor(t, 30*time.Second, func() error {
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
			}
			for topic, n := range want {
				if got := seenOf(topic); got != n {
					g := describe848(t, admin, group)
					desc := fmt.Sprintf("%s epoch %d/%d", g.State, g.Epoch, g.AssignmentEpoch)
					for _, m := range g.Members {
						desc += fmt.Sprintf("; %s@%d owns %v targets %v", m.ClientID, m.MemberEpoch, m.Assignment.TopicPartitions, m.TargetAssignment.TopicPartitions)
					}
					return fmt.Errorf("%s: %d of %s's records consumed, want %d (%s)", what, got, topic, n, desc)
				}
			}
			return nil
		})
	}
	expect("start", map[string]int{"rx-orders-eu": 90})

	// A matching topic created now is picked up by the running members.
	createTopic(t, admin, "rx-orders-us", 2, nil)
	produce("rx-orders-us", 30)
	expect("created topic", map[string]int{"rx-orders-eu": 90, "rx-orders-us": 30})

	// Both members share the matching topics' five partitions.
	waitFor(t, 15*time.Second, func() error {
		g := describe848(t, admin, group)
		if g.ErrorCode != 0 {
			return fmt.Errorf("describe: error %d", g.ErrorCode)
		}
		if len(g.Members) != 2 {
			return fmt.Errorf("%d members", len(g.Members))
		}
		total := 0
		for _, m := range g.Members {
			if m.SubscribedTopicRegex == nil || *m.SubscribedTopicRegex == "" {
				return fmt.Errorf("member %s described without its pattern", m.MemberID)
			}
			for _, tp := range m.Assignment.TopicPartitions {
				if !strings.HasPrefix(tp.Topic, "rx-orders-") {
					return fmt.Errorf("member %s assigned %s", m.MemberID, tp.Topic)
				}
				total += len(tp.Partitions)
			}
		}
		if total != 5 {
			return fmt.Errorf("%d partitions assigned, want 5", total)
		}
		return nil
	})

	// A deleted topic leaves the assignment.
	if _, err := kadm.NewClient(admin).DeleteTopic(context.Background(), "rx-orders-eu"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, func() error {
		total := 0
		for _, m := range describe848(t, admin, group).Members {
			for _, tp := range m.TargetAssignment.TopicPartitions {
				if tp.Topic == "rx-orders-eu" {
					return fmt.Errorf("member %s still targets the deleted topic", m.MemberID)
				}
				total += len(tp.Partitions)
			}
		}
		if total != 2 {
			return fmt.Errorf("%d partitions targeted, want rx-orders-us's 2", total)
		}
		return nil
	})
	produce("rx-orders-us", 10)
	expect("after the delete", map[string]int{"rx-orders-us": 40, "rx-payments": 0, "x-rx-orders-eu": 0})
}

// franz-go's own regex tests against a three-node cluster reached
// through a follower: the client-side regex (with exclusions and the
// internal topic), a share group's regex skipping internal topics, and a
// KIP-848 group whose pattern the broker resolves. A skip fails.
func TestFranzGoRegexSuite(t *testing.T) {
	c := startCluster(t, 3)
	runFranzGoTests(t, c.followers()[0], "1000", "TestConsumeRegex", "TestConsumeRegexShareSkipsInternal", "Test848RegexBrokerResolves")
}
