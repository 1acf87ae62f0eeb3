package integration

import (
	"bytes"
	"context"
	"fmt"
	"github.com/waggle-mq/waggle/command"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Kafka benchmarks run the same franz-go client code against a single
// waggle node (raft + badger on disk) and against franz-go's kfake with
// DataDir and SyncWrites (its on-disk, fsync-per-batch mode), in the same
// run, and report waggle/kfake ratios (WAGGLE_BENCH_NODES=3: a waggle
// cluster of three against one kfake broker). Random records of 100 bytes
// (WAGGLE_BENCH_RECORD_BYTES sets another size; WAGGLE_BENCH_COMPRESSIBLE=1:
// repeated bytes), acks=all, idempotent producer.
//
//	go test ./integration -run '^$' -bench Kafka -benchtime 200000x

const benchTopic = "bench"

// benchRecordBytes is the size of a benchmark record's value.
func benchRecordBytes() int {
	if v, err := strconv.Atoi(os.Getenv("WAGGLE_BENCH_RECORD_BYTES")); err == nil && v > 0 {
		return v
	}
	return 100
}

func startKfake(b *testing.B) []string {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(b.TempDir()), kfake.SyncWrites(), kfake.SeedTopics(1, benchTopic))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c.ListenAddrs()
}

// startWaggleForBench starts one node, or WAGGLE_BENCH_NODES of them as a
// cluster, with the benchmark topic, and returns the brokers and the node
// that leads.
func startWaggleForBench(b *testing.B) ([]string, *node) {
	brokers, leader, _ := startWaggleNodesForBench(b)
	return brokers, leader
}

// startWaggleNodesForBench is startWaggleForBench that also returns every
// node.
func startWaggleNodesForBench(b *testing.B) (brokers []string, leader *node, nodes []*node) {
	if size, _ := strconv.Atoi(os.Getenv("WAGGLE_BENCH_NODES")); size > 1 {
		c := startCluster(b, size)
		nodes, leader = c.nodes, c.leader()
	} else {
		leader = startSingle(b)
		nodes = []*node{leader}
	}
	for _, m := range nodes {
		brokers = append(brokers, m.kafkaAddr)
	}
	// A cluster raises its log format once every member has registered:
	// measure the steady state, not the first seconds.
	requireLogFormat(b, leader, int(command.MaxLogFormat))
	createTopic(b, kafkaClient(b, brokers), benchTopic, 1, benchTopicConfigs())
	return brokers, leader, nodes
}

// benchTopicConfigs are the bench topic's configs from
// WAGGLE_BENCH_TOPIC_CONFIGS ("compression.type=zstd,max.message.bytes=…").
func benchTopicConfigs() map[string]string {
	configs := map[string]string{}
	for _, kv := range strings.Split(os.Getenv("WAGGLE_BENCH_TOPIC_CONFIGS"), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			configs[k] = v
		}
	}
	return configs
}

// nodesWritten is the bytes the nodes have written to disk so far, in all.
func nodesWritten(b *testing.B, nodes []*node) int64 {
	var total int64
	for _, n := range nodes {
		total += writeBytes(b, n.cmd.Process.Pid)
	}
	return total
}

// produceRun produces n records as fast as the client allows and returns
// records/s and the p99 time from Produce to its acknowledgement.
func produceRun(b *testing.B, brokers []string, n int, opts ...kgo.Opt) (float64, time.Duration) {
	cl := kafkaClient(b, brokers, append([]kgo.Opt{kgo.DefaultProduceTopic(benchTopic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0), kgo.MaxBufferedRecords(10_000)}, opts...)...)
	src, size := benchPayloads(0), benchRecordBytes()
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	var failed error
	var mu sync.Mutex
	start := time.Now()
	for i := range n {
		wg.Add(1)
		t0 := time.Now()
		cl.Produce(context.Background(), &kgo.Record{Value: src.Bytes(size)}, func(_ *kgo.Record, err error) {
			lat[i] = time.Since(t0)
			if err != nil {
				mu.Lock()
				failed = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if failed != nil {
		b.Fatal(failed)
	}
	slices.Sort(lat)
	return float64(n) / elapsed.Seconds(), lat[n*99/100]
}

// consumeRun reads n records from the start and returns records/s.
func consumeRun(b *testing.B, brokers []string, n int, opts ...kgo.Opt) float64 {
	cl := kafkaClient(b, brokers, append([]kgo.Opt{kgo.ConsumeTopics(benchTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			b.Fatalf("consumed %d of %d", got, n)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			b.Fatal(errs[0].Err)
		}
		got += fs.NumRecords()
	}
	return float64(n) / time.Since(start).Seconds()
}

// BenchmarkKafkaProduce also reports the leader's CPU per record (its
// process's user and system time) and the bytes each waggle node and
// kfake wrote to disk per payload byte (kfake runs in this process, so its
// figure includes the test's own writes, which are none while it runs).
func BenchmarkKafkaProduce(b *testing.B) {
	waggle, leader, nodes := startWaggleNodesForBench(b)
	kf := startKfake(b)
	payload := float64(b.N) * float64(benchRecordBytes())
	b.ResetTimer()
	cpu0, w0 := cpuSeconds(b, leader), nodesWritten(b, nodes)
	wRate, wP99 := produceRun(b, waggle, b.N)
	cpu, written := cpuSeconds(b, leader)-cpu0, nodesWritten(b, nodes)-w0
	k0 := writeBytes(b, os.Getpid())
	kRate, kP99 := produceRun(b, kf, b.N)
	kWritten := writeBytes(b, os.Getpid()) - k0
	b.StopTimer()
	b.ReportMetric(cpu*1e6/float64(b.N), "waggle-leader-cpu-µs/rec")
	b.ReportMetric(float64(written)/float64(len(nodes))/payload, "waggle-write-amp")
	b.ReportMetric(float64(kWritten)/payload, "kfake-write-amp")
	b.ReportMetric(wRate, "waggle-recs/s")
	b.ReportMetric(kRate, "kfake-recs/s")
	b.ReportMetric(wRate/kRate, "ratio")
	b.ReportMetric(float64(wP99.Microseconds())/1000, "waggle-p99-ms")
	b.ReportMetric(float64(kP99.Microseconds())/1000, "kfake-p99-ms")
	b.ReportMetric(peakRSSMiB(b, leader), "waggle-peak-rss-MiB")
}

func BenchmarkKafkaConsume(b *testing.B) {
	waggle, _ := startWaggleForBench(b)
	kf := startKfake(b)
	produceRun(b, waggle, b.N)
	produceRun(b, kf, b.N)
	b.ResetTimer()
	wRate := consumeRun(b, waggle, b.N)
	kRate := consumeRun(b, kf, b.N)
	b.StopTimer()
	b.ReportMetric(wRate, "waggle-recs/s")
	b.ReportMetric(kRate, "kfake-recs/s")
	b.ReportMetric(wRate/kRate, "ratio")
}

// txnBatch is how many records one benchmark transaction writes.
const txnBatch = 100

// txnProduceRun writes n records in transactions of txnBatch records each,
// one transactional producer committing one after another, and returns
// records/s.
func txnProduceRun(b *testing.B, brokers []string, n int) float64 {
	cl := kafkaClient(b, brokers, kgo.DefaultProduceTopic(benchTopic), kgo.TransactionalID("bench-txn"),
		kgo.ProducerLinger(0), kgo.MaxBufferedRecords(10_000))
	src, size := benchPayloads(0), benchRecordBytes()
	ctx := context.Background()
	start := time.Now()
	for done := 0; done < n; {
		if err := cl.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		var failed error
		var mu sync.Mutex
		for range min(txnBatch, n-done) {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Value: src.Bytes(size)}, func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
				wg.Done()
			})
			done++
		}
		wg.Wait()
		if failed != nil {
			b.Fatal(failed)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

// BenchmarkKafkaTransactions: transactional produce (franz-go, 100 records
// per transaction) and a read_committed consumer of what it wrote, against
// waggle and kfake in the same run.
//
//	go test ./integration -run '^$' -bench KafkaTransactions -benchtime 100000x
func BenchmarkKafkaTransactions(b *testing.B) {
	waggle, leader := startWaggleForBench(b)
	waitLogFormat(b, leader, 2)
	kf := startKfake(b)
	b.ResetTimer()
	wProduce := txnProduceRun(b, waggle, b.N)
	kProduce := txnProduceRun(b, kf, b.N)
	committed := kgo.FetchIsolationLevel(kgo.ReadCommitted())
	wConsume := consumeRun(b, waggle, b.N, committed)
	kConsume := consumeRun(b, kf, b.N, committed)
	b.StopTimer()
	b.ReportMetric(wProduce, "waggle-produce-recs/s")
	b.ReportMetric(kProduce, "kfake-produce-recs/s")
	b.ReportMetric(wProduce/kProduce, "produce-ratio")
	b.ReportMetric(wConsume, "waggle-consume-recs/s")
	b.ReportMetric(kConsume, "kfake-consume-recs/s")
	b.ReportMetric(wConsume/kConsume, "consume-ratio")
}

// manyPartitions is the partition count of the many-partition benchmark.
const manyPartitions = 1000

// BenchmarkKafkaConsumeManyPartitions: one franz-go consumer (with a fetch
// session, KIP-227) reads b.N records spread over a 1,000-partition topic
// from waggle and from kfake; it reports the ratio and the waggle server's
// CPU per record.
//
//	go test ./integration -run '^$' -bench ConsumeManyPartitions -benchtime 200000x
func BenchmarkKafkaConsumeManyPartitions(b *testing.B) {
	n := startSingle(b)
	waggle := []string{n.kafkaAddr}
	createTopic(b, kafkaClient(b, waggle), "wide", manyPartitions, nil)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(b.TempDir()), kfake.SyncWrites(), kfake.SeedTopics(manyPartitions, "wide"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	kf := c.ListenAddrs()
	fill := func(brokers []string) {
		cl := kafkaClient(b, brokers, kgo.DefaultProduceTopic("wide"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		src, size := benchPayloads(0), benchRecordBytes()
		recs := make([]*kgo.Record, b.N)
		for i := range recs {
			recs[i] = &kgo.Record{Value: src.Bytes(size)}
		}
		produceSync(b, cl, recs...)
	}
	fill(waggle)
	fill(kf)
	consume := func(brokers []string) float64 {
		cl := kafkaClient(b, brokers, kgo.ConsumeTopics("wide"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		start, got := time.Now(), 0
		for got < b.N {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				b.Fatalf("consumed %d of %d", got, b.N)
			}
			got += fs.NumRecords()
		}
		return float64(b.N) / time.Since(start).Seconds()
	}
	b.ResetTimer()
	cpu0 := cpuSeconds(b, n)
	wRate := consume(waggle)
	cpu := cpuSeconds(b, n) - cpu0
	kRate := consume(kf)
	b.StopTimer()
	b.ReportMetric(wRate, "waggle-recs/s")
	b.ReportMetric(kRate, "kfake-recs/s")
	b.ReportMetric(wRate/kRate, "ratio")
	b.ReportMetric(cpu*1e6/float64(b.N), "waggle-cpu-µs/rec")
}

// cpuSeconds is the user and system CPU time a node's process has used.
func cpuSeconds(t testing.TB, n *node) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name (which ends with ')'): utime and stime
	// are the 12th and 13th, in clock ticks (100 a second on Linux).
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100
}

// BenchmarkKafkaFetchSessionsTrickle is where fetch sessions (KIP-227)
// pay: a consumer caught up on a 1,000-partition topic while records
// trickle in (b.N of them, 1 ms apart, round robin). Without a session
// every Fetch names, reads and answers all 1,000 partitions; with one it
// names and answers those with news. It reports the waggle server's CPU
// per record both ways, and the request and answer bytes per record.
//
//	go test ./integration -run '^$' -bench FetchSessionsTrickle -benchtime 3000x
func BenchmarkKafkaFetchSessionsTrickle(b *testing.B) {
	n := startSingle(b)
	brokers := []string{n.kafkaAddr}
	createTopic(b, kafkaClient(b, brokers), "trickle", manyPartitions, nil)
	producer := kafkaClient(b, brokers, kgo.DefaultProduceTopic("trickle"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(0))
	run := func(opts ...kgo.Opt) (cpuPerRec float64) {
		cl := kafkaClient(b, brokers, append([]kgo.Opt{kgo.ConsumeTopics("trickle"), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
			kgo.FetchMaxWait(500 * time.Millisecond)}, opts...)...)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		// Caught up first: markers are produced until one is read (the
		// first may land before the consumer has found the end).
		for got := 0; got == 0; {
			produceSync(b, producer, &kgo.Record{Value: []byte("start")})
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			got = cl.PollFetches(pctx).NumRecords()
			pcancel()
			if ctx.Err() != nil {
				b.Fatal("the consumer never caught up")
			}
		}
		done := make(chan int)
		go func() {
			got := 0
			for got < b.N && ctx.Err() == nil {
				got += cl.PollFetches(ctx).NumRecords()
			}
			done <- got
		}()
		cpu0 := cpuSeconds(b, n)
		src := benchPayloads(0)
		for range b.N {
			producer.Produce(ctx, &kgo.Record{Value: src.Bytes(100)}, nil)
			time.Sleep(time.Millisecond) // the trickle's pace, not a wait for a result
		}
		if got := <-done; got < b.N {
			b.Fatalf("consumed %d of %d", got, b.N)
		}
		return (cpuSeconds(b, n) - cpu0) / float64(b.N)
	}
	b.ResetTimer()
	with := run()
	without := run(kgo.DisableFetchSessions())
	b.StopTimer()
	b.ReportMetric(with*1e6, "cpu-µs/rec-with-sessions")
	b.ReportMetric(without*1e6, "cpu-µs/rec-without")
	b.ReportMetric(without/with, "saving-x")
}

// BenchmarkKafkaMetadataThroughFollower measures what a broker that does
// not lead pays to answer Metadata: for a topic it knows (a local read),
// for one no node has (the miss costs a catch-up with the leader: one
// HTTP round trip and a leader check), and for a topic created through
// the leader just before (the follower waits until it has applied it,
// which takes until the leader's next append tells it the entry is
// committed: 50-100 ms when nothing else is written, hashicorp/raft's
// CommitTimeout). On the leader for comparison. One request at a time, to
// one node, 3 nodes.
//
//	go test ./integration -run '^$' -bench MetadataThroughFollower -benchtime 200x
func BenchmarkKafkaMetadataThroughFollower(b *testing.B) {
	c := startCluster(b, 3)
	leader, follower := c.leader(), c.followers()[0]
	admin := kafkaClient(b, []string{leader.kafkaAddr})
	createTopic(b, admin, "known", 1, nil)
	c.waitCaughtUp(follower)
	ctx := context.Background()
	metadata := func(b *testing.B, cl *kgo.Broker, topic string, want int16) {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics, req.AllowAutoTopicCreation = append(req.Topics, rt), false
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.Topics[0].ErrorCode != want {
			b.Fatalf("metadata of %s: %v, code %d, want %d", topic, err, resp.Topics[0].ErrorCode, want)
		}
	}
	made := 0 // topics created so far: b.N runs start again from 0
	for _, on := range []*node{leader, follower} {
		role := map[bool]string{true: "leader", false: "follower"}[on == leader]
		cl := kafkaClient(b, []string{on.kafkaAddr}).Broker(on.id) // every request to this node
		b.Run("known/"+role, func(b *testing.B) {
			for range b.N {
				metadata(b, cl, "known", 0)
			}
		})
		b.Run("missing/"+role, func(b *testing.B) {
			for range b.N {
				metadata(b, cl, "missing", kerr.UnknownTopicOrPartition.Code)
			}
		})
		b.Run("created-elsewhere/"+role, func(b *testing.B) {
			req := kmsg.NewPtrCreateTopicsRequest()
			for range b.N {
				made++
				rt := kmsg.NewCreateTopicsRequestTopic()
				rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("made-%d", made), 1, -1
				req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
				b.StopTimer()
				if resp, err := req.RequestWith(ctx, admin); err != nil || resp.Topics[0].ErrorCode != 0 {
					b.Fatalf("create %s: %v %+v", rt.Topic, err, resp)
				}
				b.StartTimer()
				metadata(b, cl, rt.Topic, 0)
			}
		})
	}
}

// shareConsumeRun has consumers share group members read n records of
// the bench topic from its start, accepting each, and returns records/s.
// Every record is counted once (a redelivery would end the run short of
// its count, or past it: both fail).
func shareConsumeRun(b *testing.B, brokers []string, group string, n, consumers int) float64 {
	setGroupConfigs(b, kafkaClient(b, brokers), group, "share.auto.offset.reset", "earliest")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var mu sync.Mutex
	seen := make(map[string]bool, n)
	dup := ""
	var all bool
	start := time.Now()
	var wg sync.WaitGroup
	for range consumers {
		cl := kafkaClient(b, brokers, kgo.ShareGroup(group), kgo.ConsumeTopics(benchTopic))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) {
					k := fmt.Sprint(r.Partition, "/", r.Offset)
					if seen[k] {
						dup = k
					}
					seen[k] = true
					r.Ack(kgo.AckAccept)
				})
				if len(seen) >= n && !all {
					all = true
					cancel() // the others stop polling
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if !all || dup != "" {
		b.Fatalf("share consumers got %d of %d records (delivered twice: %q)", len(seen), n, dup)
	}
	return float64(n) / elapsed.Seconds()
}

// BenchmarkKafkaShareConsume: WAGGLE_BENCH_SHARE_CONSUMERS share group
// members (default 3) read one partition side by side, accepting every
// record, against waggle and kfake; with the leader's CPU per record and
// the bytes the nodes wrote per payload byte while they read (the
// acquisitions and acknowledgements are raft entries).
//
//	go test ./integration -run '^$' -bench KafkaShareConsume -benchtime 100000x
func BenchmarkKafkaShareConsume(b *testing.B) {
	consumers := 3
	if v, err := strconv.Atoi(os.Getenv("WAGGLE_BENCH_SHARE_CONSUMERS")); err == nil && v > 0 {
		consumers = v
	}
	waggle, leader, nodes := startWaggleNodesForBench(b)
	kf := startKfake(b)
	produceRun(b, waggle, b.N)
	produceRun(b, kf, b.N)
	payload := float64(b.N) * float64(benchRecordBytes())
	b.ResetTimer()
	cpu0, w0 := cpuSeconds(b, leader), nodesWritten(b, nodes)
	wRate := shareConsumeRun(b, waggle, "bench-share", b.N, consumers)
	cpu, written := cpuSeconds(b, leader)-cpu0, nodesWritten(b, nodes)-w0
	kRate := shareConsumeRun(b, kf, "bench-share", b.N, consumers)
	b.StopTimer()
	b.ReportMetric(cpu*1e6/float64(b.N), "waggle-leader-cpu-µs/rec")
	b.ReportMetric(float64(written)/float64(len(nodes))/payload, "waggle-write-amp")
	b.ReportMetric(wRate, "waggle-recs/s")
	b.ReportMetric(kRate, "kfake-recs/s")
	b.ReportMetric(wRate/kRate, "ratio")
}
