package integration

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/waggle-mq/waggle/payload"
)

// The data-groups benchmarks measure what spreading raft groups' leaders
// over a 3-node cluster buys: the same load with 1, 2 and 3 groups. Every
// group has all three nodes as replicas, so every node stores every record
// whoever leads; what moves is the leader's own work (the client requests,
// proposing, sending to followers).
//
// On a shared machine the nodes compete for the same cores, so each
// benchmark reports every node's CPU time per record as well as the rate:
// the busiest node's share bounds the throughput when every node has cores
// of its own. WAGGLE_BENCH_NODE_CPU=0.25 caps each node at a quarter of a
// core (a cgroup CPU quota per node: equal per-node resources), so the
// measured rate itself shows the scaling.

// BenchmarkDataGroupsProduce measures Kafka produce throughput. Six topics
// of two partitions each are spread evenly over the groups (with one group
// all six are in it); three franz-go producers write random 100-byte
// records (incompressible), acks=all, idempotent. With producers=spread
// every producer writes all six topics, so each of its requests is split
// over every leader; with producers=own producer p writes topics p and p+3
// alone (with 3 groups: one group's), as separate kafka-producer-perf-test
// runs would.
//
//	go test ./integration -run '^$' -bench DataGroupsProduce -benchtime 300000x
func BenchmarkDataGroupsProduce(b *testing.B) {
	for _, layout := range []string{"spread", "own"} {
		for _, groups := range []int{1, 2, 3} {
			b.Run(fmt.Sprintf("producers=%s/groups=%d", layout, groups), func(b *testing.B) {
				c := startGroupsBench(b, groups)
				brokers := c.kafkaAddrs()
				admin := kafkaClient(b, brokers)
				var topics []string
				for i := range 6 {
					topics = append(topics, nameIn(b, fmt.Sprintf("bench%d-", i), uint32(i%groups), groups))
					createTopic(b, admin, topics[i], 2, nil)
				}
				// topic is producer p's i-th record's topic.
				topic := func(p, i int) string { return topics[(i+p)%len(topics)] }
				if layout == "own" {
					topic = func(p, i int) string { return topics[p+3*(i%2)] }
				}
				// Warm up: the leaders of every topic a producer writes
				// known to it.
				producers := make([]*kgo.Client, 3)
				for p := range producers {
					producers[p] = kafkaClient(b, brokers, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(10_000))
					for i := range len(topics) {
						produceSync(b, producers[p], &kgo.Record{Topic: topic(p, i), Value: []byte("warm-up")})
					}
				}
				cpu := measureNodeCPU(b, c)
				b.ResetTimer()
				produceRecords(b, producers, topic, nil)
				cpu.report(b, b.N, "rec")
			})
		}
	}
}

// produceRecords has the producers send b.N random records between them
// (benchRecordBytes each), producer p's i-th to topic(p, i), each held to
// pace(p) when that is set, and waits until all are acknowledged. It
// fails the benchmark on any error, reports the records a second, stops
// the timer and answers how long it took.
func produceRecords(b *testing.B, producers []*kgo.Client, topic func(p, i int) string, pace func(p int) pacer) time.Duration {
	start := time.Now()
	var acked, sending sync.WaitGroup
	var failed atomic.Pointer[error]
	for p, cl := range producers {
		share := b.N / len(producers)
		if p == 0 {
			share += b.N % len(producers)
		}
		sending.Go(func() {
			src, size := benchPayloads(p), benchRecordBytes()
			for i := range share {
				if pace != nil && i%50 == 0 {
					pace(p).wait(i)
				}
				acked.Add(1)
				cl.Produce(context.Background(), &kgo.Record{Topic: topic(p, i), Value: src.Bytes(size)}, func(_ *kgo.Record, err error) {
					if err != nil {
						failed.Store(&err)
					}
					acked.Done()
				})
			}
		})
	}
	sending.Wait()
	acked.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "recs/s")
	return elapsed
}

// BenchmarkDataGroupsPush measures HTTP push throughput: six queues spread
// evenly over the groups, twelve clients, each pushing batches of 100
// messages (random 100-byte payloads, unique transactionIds, dedup on) to
// one queue through the leader of the queue's group, as a client that
// knows the leaders would. An op is one push of 100 messages.
//
//	go test ./integration -run '^$' -bench DataGroupsPush -benchtime 3000x
func BenchmarkDataGroupsPush(b *testing.B) {
	const batch, clients = 100, 12
	for _, groups := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			c := startGroupsBench(b, groups)
			leaders := map[uint32]int{0: c.leader().id}
			if groups > 1 {
				var err error
				if leaders, err = groupLeaders(b, c.nodes[0]); err != nil {
					b.Fatal(err)
				}
			}
			var queues, urls []string
			for i := range 6 {
				g := uint32(i % groups)
				queues = append(queues, nameIn(b, fmt.Sprintf("push%d-", i), g, groups))
				urls = append(urls, c.nodes[leaders[g]-1].url("/api/v1/push"))
			}
			cpu := measureNodeCPU(b, c)
			b.ResetTimer()
			pushClients(b, clients, batch, func(k int) (string, string) { return queues[k%len(queues)], urls[k%len(urls)] }, nil)
			cpu.report(b, b.N*batch, "msg")
		})
	}
}

// pushClients has clients HTTP clients push b.N batches of batch messages
// between them, client k to target(k) (a queue and the URL to push it
// to), each push held to pace when it is set. It reports the messages a
// second and the pushes pushed back, stops the timer and answers how long
// the pushes took.
func pushClients(b *testing.B, clients, batch int, target func(k int) (queue, url string), pace *pacer) time.Duration {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 30 * time.Second}
	var throttled, next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for k := range clients {
		wg.Go(func() {
			var body bytes.Buffer
			src := benchPayloads(k)
			queue, url := target(k)
			for op := next.Add(1) - 1; op < int64(b.N); op = next.Add(1) - 1 {
				if pace != nil {
					pace.wait(int(op))
				}
				writePushBody(&body, queue, op, batch, src)
				if err := postPush(hc, url, body.Bytes(), &throttled); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N*batch)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(throttled.Load()), "pushed-back")
	return elapsed
}

// writePushBody writes into body a push of batch messages to queue, with
// op's unique transactionIds and random 100-byte payloads from src.
func writePushBody(body *bytes.Buffer, queue string, op int64, batch int, src *payload.Source) {
	body.Reset()
	body.WriteString(`{"items":[`)
	for i := range batch {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(body, `{"queue":%q,"transactionId":"tx-%d-%d","payload":%s}`, queue, op, i, src.JSON(100))
	}
	body.WriteString(`]}`)
}

// startGroupsBench starts a 3-node cluster with groups raft groups, each
// led by its preferred node, every node capped at WAGGLE_BENCH_NODE_CPU
// cores when that is set.
func startGroupsBench(b *testing.B, groups int) *cluster {
	c := startCluster(b, 3, "--data-groups", strconv.Itoa(groups))
	if groups > 1 { // /health lists groups when there are several
		waitGroupLeaders(b, c.nodes, uint32(groups), preferred)
	}
	capNodes(b, c.nodes)
	return c
}

// capNodes caps each node at WAGGLE_BENCH_NODE_CPU cores when that is set.
func capNodes(b *testing.B, nodes []*node) {
	if v := os.Getenv("WAGGLE_BENCH_NODE_CPU"); v != "" {
		cores, err := strconv.ParseFloat(v, 64)
		if err != nil || cores <= 0 {
			b.Fatalf("WAGGLE_BENCH_NODE_CPU=%q: want a fraction of a core", v)
		}
		for _, n := range nodes {
			capCPU(b, n, cores)
		}
	}
}

// nodeCPU is each node's CPU time, and the bytes it had written to
// storage, when a measurement started.
type nodeCPU struct {
	nodes   []*node
	start   []float64
	written []int64
}

func measureNodeCPU(b *testing.B, c *cluster) nodeCPU {
	m := nodeCPU{nodes: c.nodes}
	for _, n := range c.nodes {
		m.start = append(m.start, cpuSeconds(b, n))
		m.written = append(m.written, writeBytes(b, n.cmd.Process.Pid))
	}
	return m
}

// report adds each node's CPU µs per unit (of which count were handled)
// since the measurement started, the busiest node's, and the rate a core
// per node would give.
func (m nodeCPU) report(b *testing.B, count int, unit string) {
	busiest := 0.0
	for i, n := range m.nodes {
		per := (cpuSeconds(b, n) - m.start[i]) * 1e6 / float64(count)
		busiest = max(busiest, per)
		b.ReportMetric(per, fmt.Sprintf("node%d-cpu-µs/%s", n.id, unit))
	}
	b.ReportMetric(busiest, fmt.Sprintf("busiest-node-cpu-µs/%s", unit))
	b.ReportMetric(1e6/busiest, fmt.Sprintf("%ss/s-per-core-per-node", unit))
}

// capCPU limits n's process to cores of CPU time (a cgroup v1 cpu quota,
// or cgroup v2's cpu.max), until the benchmark ends.
func capCPU(b *testing.B, n *node, cores float64) {
	const period = 100_000 // µs
	quota := strconv.Itoa(int(cores * period))
	pid := strconv.Itoa(n.cmd.Process.Pid)
	name := fmt.Sprintf("waggle-bench-%d-%d", os.Getpid(), n.id)
	v1 := "/sys/fs/cgroup/cpu"
	if _, err := os.Stat(filepath.Join(v1, "cpu.cfs_quota_us")); err == nil {
		dir := filepath.Join(v1, name)
		must := func(err error) {
			if err != nil {
				b.Fatalf("capping node %d's CPU: %v", n.id, err)
			}
		}
		must(os.MkdirAll(dir, 0o755))
		must(os.WriteFile(filepath.Join(dir, "cpu.cfs_period_us"), []byte(strconv.Itoa(period)), 0o644))
		must(os.WriteFile(filepath.Join(dir, "cpu.cfs_quota_us"), []byte(quota), 0o644))
		must(os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(pid), 0o644))
		b.Cleanup(func() {
			n.stop()
			os.Remove(dir)
		})
		return
	}
	v2 := "/sys/fs/cgroup"
	dir := filepath.Join(v2, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatalf("capping node %d's CPU: no cgroup cpu controller here: %v", n.id, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cpu.max"), []byte(quota+" "+strconv.Itoa(period)), 0o644); err != nil {
		b.Fatalf("capping node %d's CPU: %v", n.id, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(pid), 0o644); err != nil {
		b.Fatalf("capping node %d's CPU: %v", n.id, err)
	}
	b.Cleanup(func() {
		n.stop()
		os.Remove(dir)
	})
}
