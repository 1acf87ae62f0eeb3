package integration

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// readPartition reads partition 0 of topic from its log start to its high
// watermark with plain Fetch requests (so it knows when it is at the end,
// across compacted gaps and empty batches), returning the records by key
// (a nil value is a tombstone) and how many it read.
func readPartition(t *testing.T, addr, topic string) (map[string][]byte, int, error) {
	t.Helper()
	cl := kafkaClient(t, []string{addr}, kgo.MaxVersions(kversion.V3_0_0())) // Fetch by topic name
	defer cl.Close()
	byKey, n, _, err := fetchPartition(cl, func(ctx context.Context, req kmsg.Request) (kmsg.Response, error) { return cl.Request(ctx, req) }, topic)
	return byKey, n, err
}

// readLeaderPartition is readPartition from the leader of cluster c,
// with the codecs of the batches read.
func readLeaderPartition(t *testing.T, c *cluster, topic string) (byKey map[string][]byte, n int, codecs []int8, err error) {
	t.Helper()
	cl := kafkaClient(t, c.kafkaAddrs(), kgo.MaxVersions(kversion.V3_0_0()))
	defer cl.Close()
	leader := cl.Broker(int(c.leader().id))
	return fetchPartition(cl, leader.RetriableRequest, topic)
}

// fetchPartition reads partition 0 of topic with send, from offset 0 to
// its end, and answers the last value of each key, the records read and
// the compression codec of each batch.
func fetchPartition(cl *kgo.Client, send func(context.Context, kmsg.Request) (kmsg.Response, error), topic string) (map[string][]byte, int, []int8, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, 0, nil, err
	}
	end, _ := ends.Lookup(topic, 0)
	out, n := map[string][]byte{}, 0
	var codecs []int8
	for off := int64(0); off < end.Offset; {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MaxBytes = 100, 8<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes = off, 4<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := send(ctx, req)
		if err != nil {
			return nil, 0, nil, err
		}
		p := &kresp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return nil, 0, nil, fmt.Errorf("fetch at %d: %w", off, err)
		}
		for raw := p.RecordBatches; len(raw) > 0; {
			var b kmsg.RecordBatch
			if b.ReadFrom(raw) != nil {
				break
			}
			codecs = append(codecs, int8(b.Attributes&0x07))
			raw = raw[12+b.Length:]
		}
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: off, Topic: topic}, p, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			return nil, 0, nil, fp.Err
		}
		for _, r := range fp.Records {
			out[string(r.Key)] = r.Value
			n++
		}
		if next <= off {
			return nil, 0, nil, fmt.Errorf("fetch at %d did not move on (high watermark %d)", off, end.Offset)
		}
		off = next
	}
	return out, n, codecs, nil
}

// topicBytes is the bytes a node keeps for a topic, as DescribeLogDirs
// reports them: its segments and the batches they keep in the raft log.
func topicBytes(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	dirs, err := adm.DescribeAllLogDirs(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == topic {
				total += p.Size
			}
		})
	})
	return total
}

// A compacted topic keeps the newest record of each key: 100,000 updates
// over 1,000 keys read back as 1,000 records with their latest values, the
// segments that held the rest are removed, produce goes on meanwhile, and
// tombstones go after delete.retention.ms.
func TestKafkaCompactKeepsTheLatestPerKey(t *testing.T) {
	n := startSingle(t)
	waitLogFormat(t, n, 2)
	const topic, keys, updates = "compacted", 1000, 100_000
	cl := kafkaClient(t, []string{n.kafkaAddr}, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, topic, 1, map[string]string{
		"cleanup.policy": "compact", "segment.ms": "1000", "segment.bytes": "1048576",
		"min.cleanable.dirty.ratio": "0.001", "delete.retention.ms": "1000",
	})
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	rc, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := rc.On(topic, nil); err != nil || !hasConfig(c.Configs, "cleanup.policy", "compact") || !hasConfig(c.Configs, "delete.retention.ms", "1000") {
		t.Fatalf("DescribeConfigs: %+v %v", c, err)
	}

	// A record without a key is refused, as Kafka refuses it.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("no key")}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("produce without a key: %v, want INVALID_RECORD", err)
	}

	latest := map[string][]byte{}
	start := time.Now()
	var recs []*kgo.Record
	for i := range updates {
		v := make([]byte, 100)
		rand.Read(v)
		k := fmt.Sprintf("key-%04d", i%keys)
		latest[k] = v
		recs = append(recs, &kgo.Record{Key: []byte(k), Value: v})
		if len(recs) == 5000 {
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	produced := topicBytes(t, adm, topic)
	t.Logf("produced %d updates in %v; the topic holds %d bytes", updates, time.Since(start), produced)

	// Produce keeps working while compaction runs: each update answers
	// within 2 s.
	for i := range 20 {
		v := make([]byte, 100)
		rand.Read(v)
		k := fmt.Sprintf("key-%04d", i*37%keys)
		latest[k] = v
		t0 := time.Now()
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(k), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(t0); d > 2*time.Second {
			t.Fatalf("a produce during compaction took %v", d)
		}
	}

	check := func(want map[string][]byte) func() error {
		return func() error {
			got, count, err := readPartition(t, n.kafkaAddr, topic)
			if err != nil {
				return err
			}
			if count != len(want) {
				return fmt.Errorf("read %d records, want %d", count, len(want))
			}
			for k, v := range want {
				if g, ok := got[k]; !ok || string(g) != string(v) {
					return fmt.Errorf("key %s: not its latest value", k)
				}
			}
			return nil
		}
	}
	waitFor(t, 30*time.Second, check(latest), n.logTail)
	t.Logf("compacted to %d records after %v", keys, time.Since(start))
	// The space of what compaction dropped comes back: the segments
	// before the last cut are removed.
	waitFor(t, 15*time.Second, func() error {
		if b := topicBytes(t, adm, topic); b > produced/4 {
			return fmt.Errorf("the topic holds %d bytes, %d before compaction", b, produced)
		}
		return nil
	})
	t.Logf("the topic holds %d bytes, %d before compaction", topicBytes(t, adm, topic), produced)

	// Tombstones: delete 100 keys; after delete.retention.ms and another
	// pass neither they nor the values they deleted are read.
	recs = recs[:0]
	for i := range 100 {
		k := fmt.Sprintf("key-%04d", i)
		delete(latest, k)
		recs = append(recs, &kgo.Record{Key: []byte(k)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, check(latest), n.logTail)
	t.Logf("tombstones gone after %v", time.Since(start))
}

func hasConfig(cs []kadm.Config, name, value string) bool {
	for _, c := range cs {
		if c.Key == name && c.Value != nil && *c.Value == value {
			return true
		}
	}
	return false
}
