package integration

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// partitionLeader is what Metadata says of a topic's partition 0.
func partitionLeader(t testing.TB, cl *kgo.Client, topic string) (leader, epoch int32, err error) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, -1, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) == 0 {
		return -1, -1, fmt.Errorf("metadata of %s: %+v", topic, resp.Topics)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return -1, -1, kerr.ErrorForCode(p.ErrorCode)
	}
	return p.Leader, p.LeaderEpoch, nil
}

// nodeTerm is a node's raft term as its /health reports it.
func nodeTerm(t testing.TB, n *node) uint64 {
	var h healthAnswer
	if getJSON(t, n.url("/health"), &h) != http.StatusOK {
		return 0
	}
	return h.Raft.Term
}

// waitEpochIsTerm waits until Metadata names the leader with its term as
// the leader epoch, and returns the epoch.
func waitEpochIsTerm(t testing.TB, c *cluster, cl *kgo.Client, topic string) (*node, int32) {
	t.Helper()
	var l *node
	var epoch int32
	waitFor(t, 30*time.Second, func() error {
		var err error
		if l, err = c.findLeader(); err != nil {
			return err
		}
		leader, e, err := partitionLeader(t, cl, topic)
		if err != nil {
			return err
		}
		if term := nodeTerm(t, l); leader != int32(l.id) || uint64(e) != term {
			return fmt.Errorf("metadata: leader %d epoch %d; node %d leads in term %d", leader, e, l.id, term)
		}
		epoch = e
		return nil
	})
	return l, epoch
}

// fetchCode sends one Fetch of partition 0 at offset 0 with the given
// current leader epoch to a node, and returns the partition's error code.
func fetchCode(t testing.TB, cl *kgo.Client, nodeID int, topic string, epoch int32) int16 {
	t.Helper()
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(context.Background(), cl)
	if err != nil || len(mresp.Topics) != 1 {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, mresp.Topics[0].TopicID // by id from v13
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 0, 1<<20, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kresp, err := cl.Broker(nodeID).Request(ctx, req)
	if err != nil {
		t.Fatalf("fetch from node %d: %v", nodeID, err)
	}
	resp := kresp.(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch answer: %+v", resp.Topics)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// epochWrites counts the OffsetForLeaderEpoch requests a client sends.
type epochWrites struct{ n atomic.Int64 }

func (h *epochWrites) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.OffsetForLeaderEpoch.Int16() && err == nil {
		h.n.Add(1)
	}
}

// Leader epochs are raft terms: Metadata reports the leader's term and a
// higher one after the leader is killed, a fetch with the old epoch is
// fenced, OffsetForLeaderEpoch answers every epoch up to the current one
// with the high watermark, batches carry the term they were appended in,
// and a consumer that validates its position across the kill (KIP-320)
// reads every acknowledged record exactly once.
func TestKafkaLeaderEpochsAcrossLeaderKill(t *testing.T) {
	c := startCluster(t, 3)
	waitLogFormat(t, c.leader(), 2) // batches carry the term from log format 2 on
	brokers := c.kafkaAddrs()
	const topic = "epochs"
	cl := kafkaClient(t, brokers, kgo.DefaultProduceTopic(topic), kgo.RecordRetries(1000))
	createTopic(t, cl, topic, 1, nil)
	oldLeader, oldEpoch := waitEpochIsTerm(t, c, cl, topic)
	if oldEpoch < 1 {
		t.Fatalf("leader epoch %d", oldEpoch)
	}

	hook := &epochWrites{}
	consumer := kafkaClient(t, brokers, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.WithHooks(hook))
	var (
		mu       sync.Mutex
		consumed = map[string]int{}
		epochOf  = map[string]int32{}
		lossErr  error
	)
	consumeCtx, stopConsuming := context.WithCancel(context.Background())
	consumerDone := make(chan struct{})
	go func() {
		defer close(consumerDone)
		for consumeCtx.Err() == nil {
			fs := consumer.PollFetches(consumeCtx)
			mu.Lock()
			for _, e := range fs.Errors() {
				var loss *kgo.ErrDataLoss
				if errors.As(e.Err, &loss) {
					lossErr = e.Err
				}
			}
			for _, r := range fs.Records() {
				consumed[string(r.Value)]++
				epochOf[string(r.Value)] = r.LeaderEpoch
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { stopConsuming(); <-consumerDone })

	// A produce that spans the kill; the consumer reads as it goes.
	const total = 1500
	acked := map[string]bool{}
	var ackMu sync.Mutex
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for i := range total {
		if i == total/3 {
			// Let the consumer read some first, so it has an epoch to validate.
			waitFor(t, 30*time.Second, func() error {
				mu.Lock()
				defer mu.Unlock()
				if len(consumed) == 0 {
					return errors.New("nothing consumed yet")
				}
				return nil
			})
			oldLeader.kill9()
		}
		wg.Add(1)
		v := fmt.Sprint("r-", i)
		cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err == nil {
				ackMu.Lock()
				acked[v] = true
				ackMu.Unlock()
			}
		})
		if i%50 == 0 {
			time.Sleep(20 * time.Millisecond) // spread the run across the kill
		}
	}
	wg.Wait()
	if len(acked) != total {
		t.Fatalf("%d of %d records acknowledged", len(acked), total)
	}

	newLeader, newEpoch := waitEpochIsTerm(t, c, cl, topic)
	if newLeader == oldLeader || newEpoch <= oldEpoch {
		t.Fatalf("after the kill: node %d leads at epoch %d; before node %d at %d", newLeader.id, newEpoch, oldLeader.id, oldEpoch)
	}

	// KIP-320 fencing on Fetch: an older epoch is fenced, a newer unknown.
	if code := fetchCode(t, cl, newLeader.id, topic, oldEpoch); code != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("fetch with the old epoch %d: code %d, want FENCED_LEADER_EPOCH", oldEpoch, code)
	}
	if code := fetchCode(t, cl, newLeader.id, topic, newEpoch+1); code != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("fetch with a future epoch: code %d, want UNKNOWN_LEADER_EPOCH", code)
	}
	if code := fetchCode(t, cl, newLeader.id, topic, newEpoch); code != 0 {
		t.Fatalf("fetch with the current epoch: code %d", code)
	}

	// Every acknowledged record is read exactly once, and nothing else.
	waitFor(t, 60*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if lossErr != nil {
			t.Fatalf("the consumer reported data loss: %v", lossErr)
		}
		if len(consumed) < total {
			return fmt.Errorf("consumed %d of %d", len(consumed), total)
		}
		return nil
	})
	mu.Lock()
	for v, n := range consumed {
		if !acked[v] || n != 1 {
			mu.Unlock()
			t.Fatalf("record %s consumed %d times (acknowledged: %v)", v, n, acked[v])
		}
	}
	first, last := epochOf["r-0"], epochOf[fmt.Sprint("r-", total-1)]
	mu.Unlock()
	if first != oldEpoch || last != newEpoch {
		t.Fatalf("batches carry epochs %d (first) and %d (last), want the terms %d and %d", first, last, oldEpoch, newEpoch)
	}
	if hook.n.Load() == 0 {
		t.Fatal("the consumer never validated its position with OffsetForLeaderEpoch")
	}
	t.Logf("%d records across a leader kill (epoch %d to %d), each consumed once; %d OffsetForLeaderEpoch requests",
		total, oldEpoch, newEpoch, hook.n.Load())

	// OffsetForLeaderEpoch (kadm): every epoch up to the current one ends
	// at the high watermark; a future epoch is UNDEFINED (-1, -1).
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	if end.Offset != total {
		t.Fatalf("high watermark %d, want %d", end.Offset, total)
	}
	var req kadm.OffsetForLeaderEpochRequest
	for _, e := range []int32{oldEpoch, newEpoch, newEpoch + 1} {
		req = nil
		req.Add(topic, 0, e)
		var got kadm.OffsetForLeaderEpoch
		waitFor(t, 20*time.Second, func() error {
			resp, err := adm.OffsetForLeaderEpoch(ctx, req)
			if err != nil {
				return err
			}
			got = resp[topic][0]
			return got.Err
		})
		wantEpoch, wantEnd := e, int64(total)
		if e > newEpoch {
			wantEpoch, wantEnd = -1, -1
		}
		if got.LeaderEpoch != wantEpoch || got.EndOffset != wantEnd || got.NodeID != int32(newLeader.id) {
			t.Fatalf("OffsetForLeaderEpoch(%d): node %d epoch %d end %d; want node %d epoch %d end %d",
				e, got.NodeID, got.LeaderEpoch, got.EndOffset, newLeader.id, wantEpoch, wantEnd)
		}
	}
}

// DescribeLogDirs names the node's data directory and each partition's
// size, which grows by what is produced.
func TestKafkaDescribeLogDirs(t *testing.T) {
	n := startSingle(t)
	const topic = "sized"
	cl := kafkaClient(t, []string{n.kafkaAddr}, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
	createTopic(t, cl, topic, 2, nil)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var asked kadm.TopicsSet
	asked.Add(topic, 0, 1)
	sizes := func() (int64, int64, string) {
		t.Helper()
		all, err := adm.DescribeAllLogDirs(ctx, asked)
		if err != nil {
			t.Fatal(err)
		}
		dirs := all[int32(n.id)]
		if len(dirs) != 1 {
			t.Fatalf("log dirs: %+v", all)
		}
		for name, d := range dirs {
			if d.Err != nil {
				t.Fatal(d.Err)
			}
			p0, ok0 := dirs.Lookup(name, topic, 0)
			p1, ok1 := dirs.Lookup(name, topic, 1)
			if !ok0 || !ok1 {
				t.Fatalf("partitions missing from %+v", d)
			}
			return p0.Size, p1.Size, name
		}
		return 0, 0, ""
	}
	before0, before1, dir := sizes()
	if want, _ := filepath.Abs(n.dataDir); dir != want {
		t.Fatalf("log dir %q, want the data directory %q", dir, want)
	}
	// 1 MB of random (incompressible) values, all to partition 0.
	var recs []*kgo.Record
	for range 64 {
		v := make([]byte, 16<<10)
		rand.Read(v)
		recs = append(recs, &kgo.Record{Value: v, Partition: 0})
	}
	produceTo := kafkaClient(t, []string{n.kafkaAddr}, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	produceSync(t, produceTo, recs...)
	after0, after1, _ := sizes()
	if after0-before0 < 1<<20 || after1 != before1 {
		t.Fatalf("sizes went from %d, %d to %d, %d after 1 MB to partition 0", before0, before1, after0, after1)
	}

	// v4 adds the volume's total and usable bytes.
	req := kmsg.NewPtrDescribeLogDirsRequest()
	kresp, err := cl.Broker(n.id).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := kresp.(*kmsg.DescribeLogDirsResponse)
	if resp.Version < 4 || len(resp.Dirs) != 1 || resp.Dirs[0].TotalBytes <= 0 || resp.Dirs[0].UsableBytes <= 0 ||
		resp.Dirs[0].UsableBytes > resp.Dirs[0].TotalBytes {
		t.Fatalf("v%d log dirs: %+v", resp.Version, resp.Dirs)
	}
	t.Logf("partition 0: %d -> %d bytes; volume %d bytes, %d usable", before0, after0, resp.Dirs[0].TotalBytes, resp.Dirs[0].UsableBytes)
}

// Metadata lists __consumer_offsets, marked internal, among all topics; it
// is an empty log that clients cannot write, create, delete or turn into a
// queue, and kcat -L still works.
func TestKafkaMetadataListsInternalTopic(t *testing.T) {
	n := startSingle(t)
	cl := kafkaClient(t, []string{n.kafkaAddr})
	createTopic(t, cl, "plain", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl) // null topics: all
	if err != nil {
		t.Fatal(err)
	}
	internal := map[string]bool{}
	for _, mt := range resp.Topics {
		internal[*mt.Topic] = mt.IsInternal
		if *mt.Topic == "__consumer_offsets" && (len(mt.Partitions) != 1 || mt.Partitions[0].Leader != int32(n.id) || mt.Partitions[0].LeaderEpoch < 1) {
			t.Fatalf("__consumer_offsets: %+v", mt)
		}
	}
	if isInt, ok := internal["__consumer_offsets"]; !ok || !isInt || internal["plain"] || len(internal) != 2 {
		t.Fatalf("topics (internal or not): %v", internal)
	}

	// Writes are refused, as Kafka refuses client writes to it.
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "__consumer_offsets", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("produce to __consumer_offsets: %v, want INVALID_TOPIC_EXCEPTION", err)
	}
	adm := kadm.NewClient(cl)
	if cr, err := adm.CreateTopic(ctx, 1, -1, nil, "__consumer_offsets"); !errors.Is(cmpErr(err, cr.Err), kerr.TopicAlreadyExists) {
		t.Fatalf("create __consumer_offsets: %v %v", err, cr.Err)
	}
	if dr, err := adm.DeleteTopics(ctx, "__consumer_offsets"); err != nil || !errors.Is(dr["__consumer_offsets"].Err, kerr.InvalidTopicException) {
		t.Fatalf("delete __consumer_offsets: %v %+v", err, dr)
	}
	if getJSON(t, n.url("/api/v1/resources/queues/__consumer_offsets"), nil) != http.StatusNotFound {
		t.Fatal("a queue named __consumer_offsets exists")
	}
	// An empty log.
	for _, list := range []func(context.Context, ...string) (kadm.ListedOffsets, error){adm.ListStartOffsets, adm.ListEndOffsets} {
		offs, err := list(ctx, "__consumer_offsets")
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := offs.Lookup("__consumer_offsets", 0); !ok || o.Err != nil || o.Offset != 0 {
			t.Fatalf("offsets of __consumer_offsets: %+v", offs)
		}
	}

	kcat := requireKcat(t)
	meta, err := exec.Command(kcat, "-b", n.kafkaAddr, "-L").CombinedOutput()
	if err != nil || !strings.Contains(string(meta), `topic "plain" with 1 partitions`) || !strings.Contains(string(meta), `topic "__consumer_offsets" with 1 partitions`) {
		t.Fatalf("kcat -L: %v\n%s", err, meta)
	}
}

// cmpErr is the first non-nil of errs.
func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// A librdkafka consumer (kcat) reads across a leader kill: every record
// produced before and after it, once each. (kcat's librdkafka 2.0.2
// predates its KIP-320 validation; this covers its metadata and fetch
// handling of the epoch change.)
func TestKcatConsumesAcrossLeaderKill(t *testing.T) {
	kcat := requireKcat(t)
	c := startCluster(t, 3)
	brokers := c.kafkaAddrs()
	const topic = "kcat-epochs"
	cl := kafkaClient(t, brokers, kgo.DefaultProduceTopic(topic), kgo.RecordRetries(1000))
	createTopic(t, cl, topic, 1, nil)
	produce := func(from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprint("k-", i))})
		}
		produceSync(t, cl, recs...)
	}
	produce(0, 300)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-b", strings.Join(brokers, ","), "-C", "-t", topic, "-o", "beginning", "-u", "-f", "%s\n") // -u: unbuffered output
	var out, errs syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	lines := func() []string { return strings.Fields(out.String()) }
	waitFor(t, 30*time.Second, func() error {
		if n := len(lines()); n < 300 {
			return fmt.Errorf("kcat read %d of 300", n)
		}
		return nil
	}, errs.String)
	c.leader().kill9()
	produce(300, 600)
	waitFor(t, 60*time.Second, func() error {
		if n := len(lines()); n < 600 {
			return fmt.Errorf("kcat read %d of 600", n)
		}
		return nil
	}, errs.String)
	seen := map[string]int{}
	for _, l := range lines() {
		seen[l]++
	}
	for i := range 600 {
		if v := fmt.Sprint("k-", i); seen[v] != 1 {
			t.Fatalf("kcat read %s %d times\n%s", v, seen[v], out.String())
		}
	}
	if len(seen) != 600 {
		t.Fatalf("kcat read %d distinct lines, want 600\n%s", len(seen), out.String())
	}
}
