package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkDataGroupsProduce measures Kafka produce throughput on a 3-node
// cluster with 1, 2 and 3 raft groups. Six topics, of two partitions each,
// are spread evenly over the groups (with one group all six are in it);
// three franz-go producers write random 100-byte records (incompressible)
// to all of them, acks=all, idempotent.
//
// On a shared machine the nodes compete for the same cores, so the
// benchmark also reports each node's CPU time per acknowledged record: the
// busiest node's share bounds the throughput when every node has cores of
// its own. WAGGLE_BENCH_NODE_CPU=0.4 caps each node at 0.4 of a core (a
// cgroup CPU quota per node: equal per-node resources), so the measured
// rate itself shows the scaling.
//
//	go test ./integration -run '^$' -bench DataGroupsProduce -benchtime 300000x
func BenchmarkDataGroupsProduce(b *testing.B) {
	for _, groups := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			c := startCluster(b, 3, "--data-groups", strconv.Itoa(groups))
			if groups > 1 { // /health lists groups when there are several
				waitGroupLeaders(b, c.nodes, uint32(groups), preferred)
			}
			if v := os.Getenv("WAGGLE_BENCH_NODE_CPU"); v != "" {
				cores, err := strconv.ParseFloat(v, 64)
				if err != nil || cores <= 0 {
					b.Fatalf("WAGGLE_BENCH_NODE_CPU=%q: want a fraction of a core", v)
				}
				for _, n := range c.nodes {
					capCPU(b, n, cores)
				}
			}
			brokers := c.kafkaAddrs()
			admin := kafkaClient(b, brokers)
			var topics []string
			for i := range 6 {
				topics = append(topics, nameIn(b, fmt.Sprintf("bench%d-", i), uint32(i%groups), groups))
				createTopic(b, admin, topics[i], 2, nil)
			}
			// Warm up: every partition's leader known to the producers.
			producers := make([]*kgo.Client, 3)
			for i := range producers {
				producers[i] = kafkaClient(b, brokers, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(10_000))
				for _, topic := range topics {
					produceSync(b, producers[i], &kgo.Record{Topic: topic, Value: []byte("warm-up")})
				}
			}
			cpu0 := make([]float64, len(c.nodes))
			for i, n := range c.nodes {
				cpu0[i] = cpuSeconds(b, n)
			}
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			var failed error
			var mu sync.Mutex
			for p, cl := range producers {
				share := b.N / len(producers)
				if p == 0 {
					share += b.N % len(producers)
				}
				src, size := benchPayloads(p), benchRecordBytes()
				for i := range share {
					wg.Add(1)
					cl.Produce(context.Background(), &kgo.Record{Topic: topics[(i+p)%len(topics)], Value: src.Bytes(size)}, func(_ *kgo.Record, err error) {
						if err != nil {
							mu.Lock()
							failed = err
							mu.Unlock()
						}
						wg.Done()
					})
				}
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if failed != nil {
				b.Fatal(failed)
			}
			busiest := 0.0
			for i, n := range c.nodes {
				perRec := (cpuSeconds(b, n) - cpu0[i]) * 1e6 / float64(b.N)
				busiest = max(busiest, perRec)
				b.ReportMetric(perRec, fmt.Sprintf("node%d-cpu-µs/rec", n.id))
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "recs/s")
			b.ReportMetric(busiest, "busiest-node-cpu-µs/rec")
			// With a core per node, the busiest node saturates first.
			b.ReportMetric(1e6/busiest, "recs/s-per-core-per-node")
		})
	}
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
