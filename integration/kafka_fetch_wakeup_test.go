package integration

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Regression test for a lost wake-up: ReadPartition took the partition's
// append signal inside its read transaction, after badger's snapshot was
// open. A record committed between the two was invisible to the read, and
// its signal had already fired, so the long-poll fetch slept until MaxWait
// with data there. Each round starts a fetch (MaxWait 5 s) at the next
// offset and produces one record a random moment around it, so over the
// rounds the commit sweeps across the fetch's first read; every fetch must
// return within a second of the produce being acknowledged.
func TestKafkaLongPollFetchNeverSleepsThroughAnAppend(t *testing.T) {
	const (
		rounds  = 1000
		maxWait = 5 * time.Second
		limit   = time.Second
	)
	n := startSingle(t)
	brokers := []string{n.kafkaAddr}
	producer := kafkaClient(t, brokers, kgo.DefaultProduceTopic("wakeups"), kgo.ProducerLinger(0))
	createTopic(t, producer, "wakeups", 1, nil)
	fetcher := kafkaClient(t, brokers)
	topicID := topicIDOf(t, fetcher, "wakeups")
	ctx := context.Background()

	var worst time.Duration
	var slow []int
	start := time.Now()
	for i := range rounds {
		fetched := make(chan time.Time, 1)
		go func() {
			longPoll(t, ctx, fetcher, "wakeups", topicID, int64(i), maxWait)
			fetched <- time.Now()
		}()
		// Produce from 0.5 ms before to 2.5 ms after the fetch is sent:
		// about where a single node commits relative to the fetch's read.
		if d := time.Duration(rand.IntN(3000)-500) * time.Microsecond; d > 0 {
			time.Sleep(d)
		}
		produceSync(t, producer, &kgo.Record{Value: []byte("x")})
		acked := time.Now()
		wake := max((<-fetched).Sub(acked), 0)
		worst = max(worst, wake)
		if wake > limit {
			slow = append(slow, i)
			if len(slow) >= 3 {
				break // each one costs MaxWait; three make the point
			}
		}
	}
	t.Logf("%d rounds in %v; longest wake-up after the produce ack: %v", rounds, time.Since(start).Round(time.Millisecond), worst)
	if len(slow) > 0 {
		t.Fatalf("fetches in rounds %v slept through their append (longest %v, MaxWait %v)", slow, worst, maxWait)
	}
}

// topicIDOf looks a topic's id up through Metadata.
func topicIDOf(t testing.TB, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata for %s: %v %+v", topic, err, resp)
	}
	return resp.Topics[0].TopicID
}

// longPoll sends one Fetch for a single record at offset of partition 0,
// MinBytes 1, waiting up to maxWait, and requires the record in the answer.
func longPoll(t testing.TB, ctx context.Context, cl *kgo.Client, topic string, id [16]byte, offset int64, maxWait time.Duration) {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(maxWait.Milliseconds()), 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Errorf("fetch at %d: %v", offset, err)
		return
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Errorf("fetch at %d: error %d, %d bytes (high watermark %d)", offset, p.ErrorCode, len(p.RecordBatches), p.HighWatermark)
	}
}
