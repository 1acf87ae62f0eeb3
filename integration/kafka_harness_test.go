package integration

import (
	"context"
	"fmt"
	"hash/crc32"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaClient returns a franz-go client for the given brokers, closed with
// the test. Its producer is idempotent, franz-go's default.
func kafkaClient(t testing.TB, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.RetryTimeout(30 * time.Second),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates a topic through the Kafka API and requires success.
func createTopic(t testing.TB, cl *kgo.Client, name string, partitions int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, -1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	// A retriable answer (the topic's raft group has no leader yet, just
	// after the cluster started) is sent again, as Kafka's clients do; a
	// retry then finding the topic means the first try created it.
	retried := false
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		code := resp.Topics[0].ErrorCode
		switch {
		case code == 0, retried && code == kerr.TopicAlreadyExists.Code:
			return
		case kerr.IsRetriable(kerr.ErrorForCode(code)) && time.Now().Before(deadline):
			retried = true
			time.Sleep(200 * time.Millisecond)
		default:
			t.Fatalf("create topic %s: error code %d", name, code)
		}
	}
}

// consumeN reads n records from the start of topic with a fresh client.
func consumeN(t testing.TB, brokers []string, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := kafkaClient(t, brokers, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records from %s before the deadline", len(out), n, topic)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("fetch %s[%d]: %v", e.Topic, e.Partition, e.Err)
		}
		out = append(out, fs.Records()...)
	}
	if len(out) != n {
		t.Fatalf("consumed %d records from %s, want %d", len(out), topic, n)
	}
	return out
}

func produceSync(t testing.TB, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func recordKey(r *kgo.Record) string { return fmt.Sprintf("%s[%d]@%d", r.Topic, r.Partition, r.Offset) }

func crc32c(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// requireKcat returns kcat's path; .ci/run installs it, so its absence fails.
func requireKcat(t testing.TB) string {
	t.Helper()
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed (apt-get install -y kcat; .ci/run does this)")
	}
	return kcat
}

// newTopic creates a topic and produces values to it in one batch; the
// client it returns produces to that topic by default.
func newTopic(t testing.TB, addr, topic string, partitions int32, values ...string) *kgo.Client {
	t.Helper()
	cl := kafkaClient(t, []string{addr}, kgo.DefaultProduceTopic(topic))
	createTopic(t, cl, topic, partitions, nil)
	if len(values) > 0 {
		recs := make([]*kgo.Record, len(values))
		for i, v := range values {
			recs[i] = &kgo.Record{Value: []byte(v)}
		}
		produceSync(t, cl, recs...)
	}
	return cl
}

// groupMember starts a franz-go consumer in group on topic, reading from
// the start, and returns it once it has read a record: it has joined and
// been assigned partitions by then.
func groupMember(t testing.TB, brokers []string, group, topic string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl := kafkaClient(t, brokers, append([]kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for cl.PollFetches(ctx).NumRecords() == 0 {
		if ctx.Err() != nil {
			t.Fatalf("the member of group %s read nothing of %s", group, topic)
		}
	}
	return cl
}

// clientLog keeps the last lines a franz-go client logged at info level and
// shows them when the test fails, so a failure seen only in CI says what
// the client went through.
type clientLog struct {
	mu    sync.Mutex
	lines []string
}

// kgoLogger returns a kgo option that logs into a clientLog shown on failure.
func kgoLogger(t testing.TB, name string) kgo.Opt {
	l := &clientLog{}
	t.Cleanup(func() {
		if t.Failed() {
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Logf("client %s, its last log lines:\n%s", name, strings.Join(l.lines, "\n"))
		}
	})
	return kgo.WithLogger(kgo.BasicLogger(l, kgo.LogLevelInfo, func() string { return time.Now().Format("15:04:05.000 ") }))
}

// Write keeps one log line, dropping the oldest beyond 200.
func (l *clientLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 200 {
		l.lines = slices.Delete(l.lines, 0, 1)
	}
	l.lines = append(l.lines, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
