package integration

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A topic with retention.ms drops whole segments of records older than
// that under continuous produce: the log start offset moves (ListOffsets
// earliest; a Fetch below it answers OFFSET_OUT_OF_RANGE as Kafka does),
// the segment files go from the disk, every record from the start on reads
// back at its offset, and no record younger than the retention is dropped.
func TestKafkaRetentionDropsExpiredSegments(t *testing.T) {
	const retention = 3 * time.Second
	n := startSingle(t)
	cl := kafkaClient(t, []string{n.kafkaAddr}, kgo.DefaultProduceTopic("ret"), kgo.ProducerLinger(0))
	createTopic(t, cl, "ret", 1, map[string]string{
		"retention.ms": strconv.Itoa(int(retention.Milliseconds())), "segment.ms": "1000"})
	earliest := func() int64 { return earliestOffset(t, cl, "ret") }

	// sentAt[i] is taken before record i is produced: its append time is
	// later, so a record with sentAt after (now - retention) must be kept.
	var sentAt []time.Time
	start := time.Now()
	for time.Since(start) < 20*time.Second {
		sentAt = append(sentAt, time.Now())
		produceSync(t, cl, &kgo.Record{Value: []byte(strconv.Itoa(len(sentAt) - 1))})
		if time.Since(start) > 6*time.Second && earliest() > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if earliest() <= 0 {
		t.Fatalf("after %v of produce with retention %v, the log still starts at 0", time.Since(start), retention)
	}

	// Retention is switched off before the read-back, or it would go on
	// dropping records under the consumer. A pass that read the old setting
	// may still land just after the change: wait until the start holds.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("-1")}}, "ret")
	if err == nil {
		_, err = rs.On("ret", nil)
	}
	if err != nil {
		t.Fatalf("switch retention off: %v", err)
	}
	checkedAt := time.Now()
	var first int64
	waitFor(t, 10*time.Second, func() error {
		was := earliest()
		time.Sleep(300 * time.Millisecond)
		if first = earliest(); first != was {
			return fmt.Errorf("the log start still moves: %d then %d", was, first)
		}
		return nil
	})
	for i := range first {
		if !sentAt[i].Before(checkedAt.Add(-retention)) {
			t.Fatalf("record %d, produced %v before the check, was dropped (retention %v)", i, checkedAt.Sub(sentAt[i]), retention)
		}
	}

	// Below the start: out of range. From it: every record, in order.
	id := topicIDOf(t, cl, "ret")
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MaxBytes = 100, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = "ret", id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, 0, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset < first {
		t.Fatalf("fetch at 0 below the start %d: error %d, log start %d", first, p.ErrorCode, p.LogStartOffset)
	}
	recs := consumeN(t, []string{n.kafkaAddr}, "ret", len(sentAt)-int(first))
	for i, r := range recs {
		if want := first + int64(i); r.Offset != want || string(r.Value) != fmt.Sprint(want) {
			t.Fatalf("record %d: offset %d value %q, want offset and value %d", i, r.Offset, r.Value, want)
		}
	}

	// The dropped segments' files are gone: the topic's stream no longer
	// starts at position 0.
	waitFor(t, 10*time.Second, func() error {
		files, _ := filepath.Glob(filepath.Join(n.dataDir, "state", "segments", "*", "*.seg"))
		for _, f := range files {
			if filepath.Base(f) == fmt.Sprintf("%020d.seg", 0) {
				return fmt.Errorf("the first segment file is still there: %v", files)
			}
		}
		if len(files) == 0 {
			return fmt.Errorf("no segment files at all")
		}
		return nil
	})
}

// A queue with retentionSeconds drops whole expired segments; a consumer
// group that had not read the dropped messages jumps to the queue's new
// start on its next pop, and the jump shows: in the group's cursor
// (expired) and in waggle_group_expired_messages.
func TestQueueRetentionJumpsAGroupPastDroppedMessages(t *testing.T) {
	n := queueWithFiveMessages(t, "qr", map[string]any{"retentionSeconds": 2})
	status, got := n.pop(t, "qr", map[string]string{"consumerGroup": "g", "batch": "1"})
	if status != http.StatusOK || len(got.Messages) != 1 || got.Messages[0].Offset != 0 {
		t.Fatalf("first pop: status %d %+v", status, got.Messages)
	}
	code, acked := n.ackAll(t, "g", got.Messages, "completed")
	if code != http.StatusOK {
		t.Fatalf("ack: status %d", code)
	}
	requireAcked(t, acked, 1)

	// Keep pushing (a segment rolls on an append) until retention has
	// dropped the first segment.
	var start uint64
	pushed := 5
	waitFor(t, 20*time.Second, func() error {
		n.push(pushItem{Queue: "qr", TransactionID: fmt.Sprint("later-", pushed), Payload: pushed})
		pushed++
		var q queueAnswer
		getJSON(t, n.url("/api/v1/resources/queues/qr"), &q)
		if start = q.Partitions[0].StartOffset; start < 5 {
			return fmt.Errorf("the queue still starts at %d", start)
		}
		return nil
	})
	status, got = n.pop(t, "qr", map[string]string{"consumerGroup": "g", "batch": "1"})
	if status != http.StatusOK || len(got.Messages) != 1 || got.Messages[0].Offset != start {
		t.Fatalf("pop after retention: status %d %+v, want the message at the new start %d", status, got.Messages, start)
	}
	var g struct {
		Cursors []struct {
			Queue   string `json:"queue"`
			Offset  int64  `json:"offset"`
			Expired int64  `json:"expired"`
		} `json:"cursors"`
	}
	getJSON(t, n.url("/api/v1/consumer-groups/g"), &g)
	want := int64(start) - 1 // offsets 1 .. start-1 were never read
	if len(g.Cursors) != 1 || g.Cursors[0].Expired != want {
		t.Fatalf("group g after the jump: %+v, want %d expired", g.Cursors, want)
	}
	line := fmt.Sprintf("waggle_group_expired_messages{group=\"g\",partition=\"Default\",queue=\"qr\"} %d\n", want)
	if m := metricsText(t, n); !strings.Contains(m, line) {
		t.Fatalf("the metrics lack %q", line)
	}
}

// retention.bytes keeps the newest bytes of a topic and drops the oldest
// segments beyond them, however young; DescribeConfigs reports the
// retention in force, set or not (the node's --kafka-retention default).
func TestKafkaRetentionBytesKeepsTheNewestBytes(t *testing.T) {
	n := withArgs(newNode(t, 1), []string{"--kafka-retention", "36h"})
	n.start()
	n.waitLeader()
	cl := kafkaClient(t, []string{n.kafkaAddr}, kgo.DefaultProduceTopic("rb"), kgo.ProducerLinger(0))
	const keep, valueSize = 200_000, 1000
	createTopic(t, cl, "rb", 1, map[string]string{"retention.bytes": strconv.Itoa(keep), "segment.bytes": "65536"})
	configs := describeTopicConfigs(t, cl, "rb")
	for name, want := range map[string]string{"retention.bytes": "200000", "retention.ms": "129600000", "segment.bytes": "65536"} {
		if configs[name] != want {
			t.Errorf("DescribeConfigs %s = %q, want %q", name, configs[name], want)
		}
	}

	const total = 1000
	for i := 0; i < total; i += 50 {
		var recs []*kgo.Record
		for j := i; j < i+50; j++ {
			v := make([]byte, valueSize)
			rand.Read(v)
			copy(v, strconv.Itoa(j)+":")
			recs = append(recs, &kgo.Record{Value: v})
		}
		produceSync(t, cl, recs...)
	}
	// Retention passes run on the leader's ticks, one may have run while
	// the records were still arriving: wait until they keep no more than
	// keep plus the active and one sealed segment. At least keep bytes
	// stay all along (each record is a little over valueSize).
	var first int64
	waitFor(t, 20*time.Second, func() error {
		first = earliestOffset(t, cl, "rb")
		if kept := total - first; kept < keep/valueSize-10 {
			t.Fatalf("%d records kept of %d (starts at %d): retention dropped more than the newest %d bytes", kept, total, first, keep)
		} else if kept > (keep+2*65536)/valueSize {
			return fmt.Errorf("%d records kept of %d (starts at %d): want about %d (retention.bytes %d)", kept, total, first, keep/valueSize, keep)
		}
		return nil
	})
	recs := consumeN(t, []string{n.kafkaAddr}, "rb", int(total-first))
	for i, r := range recs {
		if want := first + int64(i); r.Offset != want || !strings.HasPrefix(string(r.Value), fmt.Sprint(want, ":")) {
			t.Fatalf("record %d: offset %d, want %d with its value", i, r.Offset, want)
		}
	}
}

// describeTopicConfigs answers a topic's configs by name.
func describeTopicConfigs(t *testing.T, cl *kgo.Client, topic string) map[string]string {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("DescribeConfigs %s: %+v, %v", topic, resp, err)
	}
	out := map[string]string{}
	for _, c := range resp.Resources[0].Configs {
		if c.Value != nil {
			out[c.Name] = *c.Value
		}
	}
	return out
}

// completedRetentionSeconds drops the messages every consumer group of a
// queue has finished, once older than that, and nothing a group has not
// finished.
func TestCompletedRetentionDropsWhatEveryGroupFinished(t *testing.T) {
	n := queueWithFiveMessages(t, "qc", map[string]any{"completedRetentionSeconds": 1})
	consume := func(group string, count int) {
		t.Helper()
		status, got := n.pop(t, "qc", map[string]string{"consumerGroup": group, "batch": strconv.Itoa(count)})
		if status != http.StatusOK || len(got.Messages) != count {
			t.Fatalf("pop for %s: status %d, %d messages", group, status, len(got.Messages))
		}
		if code, acked := n.ackAll(t, group, got.Messages, "completed"); code != http.StatusOK {
			t.Fatalf("ack for %s: status %d", group, code)
		} else {
			requireAcked(t, acked, count)
		}
	}
	consume("g1", 5)
	consume("g2", 3)
	start := func() uint64 {
		var q queueAnswer
		getJSON(t, n.url("/api/v1/resources/queues/qc"), &q)
		return q.Partitions[0].StartOffset
	}
	// The first segment rolls on the first append a second after it began:
	// later messages, which no group reads, go to newer segments.
	time.Sleep(1200 * time.Millisecond)
	pushed := 5
	pushOne := func() {
		n.push(pushItem{Queue: "qc", TransactionID: fmt.Sprint("later-", pushed), Payload: pushed})
		pushed++
	}
	// g2 has not finished offsets 3 and 4: the first segment stays, however
	// old (retention looks once a second).
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		pushOne()
		if s := start(); s != 0 {
			t.Fatalf("the queue starts at %d while g2 has not finished offset 3", s)
		}
		time.Sleep(200 * time.Millisecond)
	}
	consume("g2", 2)
	waitFor(t, 10*time.Second, func() error {
		pushOne()
		if s := start(); s != 5 {
			return fmt.Errorf("the queue starts at %d, want 5 (everything before it finished by both groups)", s)
		}
		return nil
	})
}

// queueWithFiveMessages starts a node, configures queue with options and
// pushes five messages to it (offsets 0 to 4).
func queueWithFiveMessages(t *testing.T, queue string, options map[string]any) *node {
	t.Helper()
	n := startSingle(t)
	if status := postJSON(t, n.url("/api/v1/configure"), map[string]any{"queue": queue, "options": options}, nil); status != http.StatusOK {
		t.Fatalf("configure %s: status %d", queue, status)
	}
	for i := range 5 {
		n.push(pushItem{Queue: queue, TransactionID: fmt.Sprint("early-", i), Payload: i})
	}
	return n
}
