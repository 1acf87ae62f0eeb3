package integration

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The scale-out benchmarks measure what more nodes buy when each data group
// has 3 replicas (--replication-factor 3): the same load on 3 nodes, where
// every node replicates every group, and on 6 (and 9 with
// WAGGLE_BENCH_NINE=1), where each node replicates a share of them. Both
// run 13 raft groups (12 data groups, group 0 holding the metadata), so
// the groups' own overhead is the same; what changes is how many records
// each node stores and applies.
//
// On one machine the nodes share its cores, so each benchmark offers the
// same load to every cluster size, paced to WAGGLE_BENCH_RATE records a
// second (default 20,000, below what 3 nodes take on 2 cores: a saturated
// machine batches differently at each size), and reports every node's CPU
// time per record and their mean ("node-cpu-µs/rec"): the capacity of a
// cluster of nodes with cores of their own is bounded by that share. WAGGLE_BENCH_NODE_CPU caps each node's CPU (a cgroup
// quota), so the rate itself shows the scaling as far as the machine's
// cores allow.

// benchRate is the records (or messages) a second the scale-out
// benchmarks offer.
func benchRate(b *testing.B) float64 {
	v := os.Getenv("WAGGLE_BENCH_RATE")
	if v == "" {
		return 20_000
	}
	rate, err := strconv.ParseFloat(v, 64)
	if err != nil || rate <= 0 {
		b.Fatalf("WAGGLE_BENCH_RATE=%q: want records a second", v)
	}
	return rate
}

// pacer holds a sender to rate units a second from start on.
type pacer struct {
	start time.Time
	rate  float64
}

// wait sleeps until the sender may send its sent-th unit.
func (p pacer) wait(sent int) {
	if d := time.Until(p.start.Add(time.Duration(float64(sent) / p.rate * float64(time.Second)))); d > 0 {
		time.Sleep(d)
	}
}

// scaleOutSizes are the cluster sizes the benchmarks compare.
func scaleOutSizes() []int {
	if os.Getenv("WAGGLE_BENCH_NINE") == "1" {
		return []int{3, 6, 9}
	}
	return []int{3, 6}
}

// startScaleOutBench starts nodes nodes with 12 data groups of 3
// replicas, each led by its preferred replica, capped to
// WAGGLE_BENCH_NODE_CPU cores each when that is set.
func startScaleOutBench(b *testing.B, nodes int) *scaleOut {
	s := startScaleOut(b, nodes, 13, 3)
	s.waitPlaced(b, func(g uint32) int { return s.replicas(g)[0] })
	capNodes(b, s.nodes)
	return s
}

// BenchmarkScaleOutProduce: twelve topics of two partitions, one per data
// group; three franz-go producers (acks=all, idempotent) write random
// 100-byte records (incompressible) to all of them, seeded with every
// broker, so each request is split over the leaders.
//
//	go test ./integration -run '^$' -bench ScaleOutProduce -benchtime 300000x
func BenchmarkScaleOutProduce(b *testing.B) {
	for _, nodes := range scaleOutSizes() {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			s := startScaleOutBench(b, nodes)
			brokers := s.kafkaAddrs()
			admin := kafkaClient(b, brokers)
			var topics []string
			for g := uint32(1); g < 13; g++ {
				topics = append(topics, s.nameIn(b, "scale-", g))
				createTopic(b, admin, topics[len(topics)-1], 2, nil)
			}
			producers := make([]*kgo.Client, 3)
			for p := range producers {
				producers[p] = kafkaClient(b, brokers, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(10_000))
				for _, topic := range topics {
					produceSync(b, producers[p], &kgo.Record{Topic: topic, Value: []byte("warm-up")})
				}
			}
			rate := benchRate(b)
			idle := idleCPU(b, s.cluster)
			cpu := measureNodeCPU(b, s.cluster)
			b.ResetTimer()
			start := time.Now()
			pace := func(int) pacer { return pacer{start, rate / float64(len(producers))} }
			elapsed := produceRecords(b, producers, func(p, i int) string { return topics[(i+p)%len(topics)] }, pace)
			cpu.reportMean(b, b.N, "rec", idle, elapsed, benchRecordBytes())
		})
	}
}

// BenchmarkScaleOutPush: twelve queues, one per data group; 24 clients
// push batches of 100 messages (random 100-byte payloads, unique
// transactionIds, dedup on) to their queue through its group's leader,
// as a client that knows the leaders would. An op is one push.
//
//	go test ./integration -run '^$' -bench ScaleOutPush -benchtime 3000x
func BenchmarkScaleOutPush(b *testing.B) {
	const batch, clients = 100, 24
	for _, nodes := range scaleOutSizes() {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			s := startScaleOutBench(b, nodes)
			var queues, urls []string
			for g := uint32(1); g < 13; g++ {
				queues = append(queues, s.nameIn(b, "scale-", g))
				urls = append(urls, s.nodes[s.replicas(g)[0]-1].url("/api/v1/push"))
			}
			idle := idleCPU(b, s.cluster)
			cpu := measureNodeCPU(b, s.cluster)
			b.ResetTimer()
			pace := &pacer{time.Now(), benchRate(b) / batch}
			elapsed := pushClients(b, clients, batch, func(k int) (string, string) { return queues[k%len(queues)], urls[k%len(queues)] }, pace)
			cpu.reportMean(b, b.N*batch, "msg", idle, elapsed, 100)
		})
	}
}

// idleCPU is the nodes' mean CPU time a second while the cluster is idle
// (raft heartbeats, maintenance), measured over 5 seconds.
func idleCPU(b *testing.B, c *cluster) float64 {
	m := measureNodeCPU(b, c)
	const over = 5 * time.Second
	time.Sleep(over) // a measurement over a fixed time, not a wait for a condition
	total := 0.0
	for i, n := range m.nodes {
		total += cpuSeconds(b, n) - m.start[i]
	}
	return total / float64(len(m.nodes)) / over.Seconds()
}

// reportMean reports, beside report's figures, the nodes' mean CPU time
// per unit (each node's share of the work), the same less what an idle
// node spends over elapsed (idle, from idleCPU): the cost of the units
// themselves, and the bytes a node wrote to storage on average over the
// payload bytes the units carried (payload each).
func (m nodeCPU) reportMean(b *testing.B, count int, unit string, idle float64, elapsed time.Duration, payload int) {
	m.report(b, count, unit)
	var written int64
	for i, n := range m.nodes {
		written += writeBytes(b, n.cmd.Process.Pid) - m.written[i]
	}
	b.ReportMetric(float64(written)/float64(len(m.nodes))/float64(count*payload), "node-written/payload-byte")
	total := 0.0
	for i, n := range m.nodes {
		total += cpuSeconds(b, n) - m.start[i]
	}
	perNode := total / float64(len(m.nodes))
	b.ReportMetric(perNode*1e6/float64(count), fmt.Sprintf("node-cpu-µs/%s", unit))
	b.ReportMetric((perNode-idle*elapsed.Seconds())*1e6/float64(count), fmt.Sprintf("node-cpu-µs/%s-less-idle", unit))
	b.ReportMetric(idle*100, "idle-node-cpu-%")
	b.ReportMetric(total*1e6/float64(count), fmt.Sprintf("cluster-cpu-µs/%s", unit))
}
