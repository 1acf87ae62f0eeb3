package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestKafkaProduceConsumeKeyedRecordsWithHeaders(t *testing.T) {
	n := startSingle(t)
	brokers := []string{n.kafkaAddr}
	cl := kafkaClient(t, brokers)
	createTopic(t, cl, "orders", 3, nil)

	const total = 3000
	var recs []*kgo.Record
	for i := range total {
		recs = append(recs, &kgo.Record{
			Topic:   "orders",
			Key:     []byte(fmt.Sprintf("customer-%d", i%37)),
			Value:   []byte(fmt.Sprintf("order-%d", i)),
			Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte(fmt.Sprint(i))}, {Key: "src", Value: []byte("test")}},
		})
	}
	produceSync(t, cl, recs...)

	got := consumeN(t, brokers, "orders", total)
	seen := map[string]bool{}
	lastOffset := map[int32]int64{0: -1, 1: -1, 2: -1}
	keyPartition := map[string]int32{}
	for _, r := range got {
		if r.Offset != lastOffset[r.Partition]+1 {
			t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, lastOffset[r.Partition])
		}
		lastOffset[r.Partition] = r.Offset
		if p, ok := keyPartition[string(r.Key)]; ok && p != r.Partition {
			t.Fatalf("key %s in partitions %d and %d", r.Key, p, r.Partition)
		}
		keyPartition[string(r.Key)] = r.Partition
		if len(r.Headers) != 2 || r.Headers[1].Key != "src" || "order-"+string(r.Headers[0].Value) != string(r.Value) {
			t.Fatalf("record %s: headers %v value %s", recordKey(r), r.Headers, r.Value)
		}
		seen[string(r.Value)] = true
	}
	if len(seen) != total {
		t.Fatalf("%d distinct records consumed, want %d", len(seen), total)
	}
}

func TestKafkaEveryCompressionCodec(t *testing.T) {
	n := startSingle(t)
	brokers := []string{n.kafkaAddr}
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "codec-" + name
			// The topic does not exist: produce creates it (auto-create).
			cl := kafkaClient(t, brokers, kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
			var recs []*kgo.Record
			for i := range 200 {
				recs = append(recs, &kgo.Record{Key: []byte("k"), Value: []byte(fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("z", 50)))})
			}
			produceSync(t, cl, recs...)
			got := consumeN(t, brokers, topic, 200)
			for i, r := range got {
				if string(r.Value) != string(recs[i].Value) {
					t.Fatalf("record %d: %s, want %s", i, r.Value, recs[i].Value)
				}
			}
			// Over HTTP the broker itself must decompress the stored batches.
			f := n.fetchAll(topic, "0").Entries[0].Records
			if len(f) != 200 || string(f[199].Payload) != string(recs[199].Value) {
				t.Fatalf("HTTP read of %s batches: %d records, want the 200 produced", name, len(f))
			}
		})
	}
}

// A consumer waiting on an empty partition is woken by the append, not by
// its MaxWait running out.
func TestKafkaLongPollFetchWakesOnAppend(t *testing.T) {
	n := startSingle(t)
	brokers := []string{n.kafkaAddr}
	producer := kafkaClient(t, brokers, kgo.DefaultProduceTopic("waiting"))
	createTopic(t, producer, "waiting", 1, nil)
	consumer := kafkaClient(t, brokers, kgo.ConsumeTopics("waiting"), kgo.FetchMaxWait(20*time.Second))

	got := make(chan time.Time, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for {
			fs := consumer.PollFetches(ctx)
			if len(fs.Records()) > 0 || ctx.Err() != nil {
				got <- time.Now()
				return
			}
		}
	}()
	waitLongPolls(t, n, "fetch", 1) // the consumer's fetch waits: the append must wake it
	sent := time.Now()
	produceSync(t, producer, &kgo.Record{Value: []byte("wake up")})
	at := <-got
	latency := at.Sub(sent)
	t.Logf("append → consumer woken: %v (MaxWait 20 s)", latency)
	if latency > 3*time.Second {
		t.Fatalf("consumer got the record %v after it was produced: the fetch was not woken by the append", latency)
	}
}

func TestKafkaListOffsets(t *testing.T) {
	n := startSingle(t)
	cl := kafkaClient(t, []string{n.kafkaAddr}, kgo.DefaultProduceTopic("timed"))
	createTopic(t, cl, "timed", 1, nil)
	base := time.UnixMilli(1_700_000_000_000)
	for i := range 5 { // one batch each, timestamps 0 s, 10 s, ... 40 s after base
		produceSync(t, cl, &kgo.Record{Value: []byte(fmt.Sprint(i)), Timestamp: base.Add(time.Duration(i) * 10 * time.Second)})
	}
	list := func(ts int64) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "timed"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = 0, ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	for _, tc := range []struct {
		name       string
		ts, offset int64
	}{
		{"earliest", -2, 0},
		{"latest", -1, 5},
		{"before the first", base.UnixMilli() - 1, 0},
		{"exactly the third", base.UnixMilli() + 20_000, 2},
		{"between third and fourth", base.UnixMilli() + 25_000, 3},
		{"after the last", base.UnixMilli() + 41_000, -1},
	} {
		p := list(tc.ts)
		if p.ErrorCode != 0 || p.Offset != tc.offset {
			t.Errorf("%s: offset %d (error %d), want %d", tc.name, p.Offset, p.ErrorCode, tc.offset)
		}
	}
}

// Topics made over Kafka are queues with dedup window 0; an HTTP queue
// keeps its window and is visible to Kafka clients.
func TestKafkaTopicsAreQueues(t *testing.T) {
	n := startSingle(t)
	cl := kafkaClient(t, []string{n.kafkaAddr})
	createTopic(t, cl, "from-kafka", 4, map[string]string{"retention.ms": "86400000"})
	var q queueAnswer
	if getJSON(t, n.url("/api/v1/resources/queues/from-kafka"), &q) != http.StatusOK || q.Options.DedupWindowSeconds != 0 {
		t.Fatalf("queue of a Kafka topic: %+v, want dedupWindowSeconds 0", q)
	}
	n.push(pushItem{Queue: "from-http", Partition: "0", TransactionID: "a", Payload: 1})
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range []string{"from-kafka", "from-http"} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, mt)
	}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 2 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 4 || resp.Topics[1].ErrorCode != 0 || len(resp.Topics[1].Partitions) != 1 {
		t.Fatalf("metadata: %+v", resp.Topics)
	}
	getJSON(t, n.url("/api/v1/resources/queues/from-http"), &q)
	if q.Options.DedupWindowSeconds != 3600 {
		t.Fatalf("HTTP queue window changed to %d", q.Options.DedupWindowSeconds)
	}
	// Creating it again over Kafka is TOPIC_ALREADY_EXISTS and changes nothing.
	again := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "from-http", 1, -1
	again.Topics = append(again.Topics, rt)
	cr, err := again.RequestWith(context.Background(), cl)
	if err != nil || cr.Topics[0].ErrorCode != 36 {
		t.Fatalf("re-creating an HTTP queue: %v, code %d; want 36", err, cr.Topics[0].ErrorCode)
	}
}

func TestHTTPAndKafkaReadEachOther(t *testing.T) {
	n := startSingle(t)
	brokers := []string{n.kafkaAddr}
	// HTTP → Kafka: a keyless record whose value is the JSON document.
	pushed := n.push(pushItem{Queue: "mixed", Partition: "0", TransactionID: "h-1", Payload: map[string]any{"from": "http", "n": 1}})[0]
	got := consumeN(t, brokers, "mixed", 1)[0]
	if got.Key != nil || string(got.Value) != `{"from":"http","n":1}` || got.Offset != int64(*pushed.Offset) {
		t.Fatalf("HTTP message read over Kafka: key %q value %s offset %d", got.Key, got.Value, got.Offset)
	}

	// Kafka → HTTP: key, headers and timestamp kept; a JSON value reads as
	// JSON, anything else as a base64 envelope.
	cl := kafkaClient(t, brokers, kgo.DefaultProduceTopic("mixed"))
	ts := time.UnixMilli(1_750_000_000_123)
	produceSync(t, cl,
		&kgo.Record{Key: []byte("k1"), Value: []byte(`{"from":"kafka"}`), Timestamp: ts, Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}},
		&kgo.Record{Key: []byte("k2"), Value: []byte{0xff, 0x00, 0x01}, Timestamp: ts},
	)
	var raw struct {
		Entries []struct {
			Records []struct {
				Offset  uint64          `json:"offset"`
				Payload json.RawMessage `json:"payload"`
				Key     []byte          `json:"key"`
				Headers []struct {
					Key   string `json:"key"`
					Value []byte `json:"value"`
				} `json:"headers"`
				Timestamp int64 `json:"ts"`
			} `json:"records"`
		} `json:"entries"`
	}
	postJSON(t, n.url("/api/v1/fetch"), map[string]any{"entries": []map[string]any{{"queue": "mixed", "partition": "0", "offset": 1}}}, &raw)
	recs := raw.Entries[0].Records
	if len(recs) != 2 {
		t.Fatalf("HTTP fetch of Kafka records: %d records", len(recs))
	}
	r := recs[0]
	if r.Offset != 1 || string(r.Key) != "k1" || string(r.Payload) != `{"from":"kafka"}` || r.Timestamp != ts.UnixMilli() ||
		len(r.Headers) != 1 || r.Headers[0].Key != "h" || string(r.Headers[0].Value) != "v" {
		t.Fatalf("Kafka record over HTTP: %+v (payload %s)", r, r.Payload)
	}
	var env struct{ Key, Value string }
	if err := json.Unmarshal(recs[1].Payload, &env); err != nil || env.Value != base64.StdEncoding.EncodeToString([]byte{0xff, 0, 1}) {
		t.Fatalf("binary value over HTTP: %s", recs[1].Payload)
	}
}

// A kgo producer keeps going through a leader kill: it finds the new
// leader from Metadata, and every acknowledged record is there afterwards.
func TestKafkaProducerSurvivesLeaderKill(t *testing.T) {
	c := startCluster(t, 3)
	brokers := c.kafkaAddrs()
	cl := kafkaClient(t, brokers, kgo.DefaultProduceTopic("ha"), kgo.RecordRetries(1000))
	createTopic(t, cl, "ha", 1, nil)

	var (
		mu    sync.Mutex
		acked = map[string]bool{}
		wg    sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const total = 2000
	for i := range total {
		if i == total/3 {
			c.leader().kill9()
		}
		wg.Add(1)
		v := fmt.Sprint("r-", i)
		cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err == nil {
				mu.Lock()
				acked[v] = true
				mu.Unlock()
			}
		})
		if i%100 == 0 {
			time.Sleep(20 * time.Millisecond) // spread the run across the kill
		}
	}
	wg.Wait()
	if len(acked) < total*9/10 {
		t.Fatalf("only %d of %d records acknowledged", len(acked), total)
	}
	l := c.leader()
	c.waitCaughtUp(l)
	// The values are not JSON, so HTTP shows each in a base64 envelope.
	stored := map[string]bool{}
	for _, r := range l.fetchAll("ha", "0").Entries[0].Records {
		var env struct{ Value []byte }
		if err := json.Unmarshal(r.Payload, &env); err != nil {
			t.Fatalf("record %d: payload %s", r.Offset, r.Payload)
		}
		stored[string(env.Value)] = true
	}
	for v := range acked {
		if !stored[v] {
			t.Fatalf("acknowledged record %s is missing", v)
		}
	}
	t.Logf("%d records acknowledged across a leader kill, all present (%d stored)", len(acked), len(stored))
}

// A fetch may start inside a stored batch: the batch is returned whole and
// clients skip the records before their offset; over HTTP the broker does.
func TestFetchFromAnOffsetInsideABatch(t *testing.T) {
	n := startSingle(t)
	newTopic(t, n.kafkaAddr, "inside", 1, "0", "1", "2", "3", "4") // one batch of five

	consumer := kafkaClient(t, []string{n.kafkaAddr}, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"inside": {0: kgo.NewOffset().At(2)}}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < 3 && ctx.Err() == nil {
		got = append(got, consumer.PollFetches(ctx).Records()...)
	}
	if len(got) != 3 || got[0].Offset != 2 || string(got[0].Value) != "2" {
		t.Fatalf("consumed from offset 2: %d records, first %+v", len(got), got)
	}
	var f fetchAnswer
	postJSON(t, n.url("/api/v1/fetch"), map[string]any{"entries": []map[string]any{{"queue": "inside", "partition": "0", "offset": 3}}}, &f)
	if r := f.Entries[0].Records; len(r) != 2 || r[0].Offset != 3 {
		t.Fatalf("HTTP fetch from offset 3: %+v", r)
	}
}
