package kafka

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/raftnode"
	"github.com/waggle-mq/waggle/store"
)

// BenchmarkProduceManyTopics produces to one topic of a node that holds
// 10 or 10,000 topics: a request must cost the same whatever the number
// of topics it does not name (issue 31: with every queue decoded on each
// request, 10,000 queues cut franz-go's produce rate to a quarter). One
// op is one record; cpu-us/op is the whole process's CPU time (broker and
// client) per record, payloads are random.
func BenchmarkProduceManyTopics(b *testing.B) {
	for _, topics := range []int{10, 10_000} {
		b.Run(fmt.Sprintf("topics=%d", topics), func(b *testing.B) {
			cl := benchClient(b, startRealKafka(b, topics))
			cpu0, disk0 := processCPU(), diskWrites(b)
			b.ResetTimer()
			produceN(b, cl, b.N)
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
			// Write amplification: bytes this process had the disk write, over
			// the records' payload bytes (the raft log, badger, segments).
			b.ReportMetric(float64(diskWrites(b)-disk0)/float64(b.N*recordBytes), "disk-bytes/payload-byte")
		})
	}
}

// BenchmarkConsumeManyTopics is BenchmarkProduceManyTopics for a consumer
// reading bench-0 from the start (Fetch names topics by id from v13).
func BenchmarkConsumeManyTopics(b *testing.B) {
	for _, topics := range []int{10, 10_000} {
		b.Run(fmt.Sprintf("topics=%d", topics), func(b *testing.B) {
			addr := startRealKafka(b, topics)
			produceN(b, benchClient(b, addr), b.N)
			cl := benchClient(b, addr, kgo.ConsumeTopics("bench-0"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cpu0 := processCPU()
			b.ResetTimer()
			for got := 0; got < b.N+1; { // +1: benchClient's first record
				fs := cl.PollFetches(ctx)
				if err := fs.Err0(); err != nil {
					b.Fatalf("consumed %d of %d: %v", got, b.N+1, err)
				}
				got += fs.NumRecords()
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
		})
	}
}

// benchClient is a franz-go client of addr that has produced one record
// to bench-0, so metadata and the connection are warm.
func benchClient(b *testing.B, addr string, opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("bench-0"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(10_000),
		kgo.ProducerBatchCompression(kgo.NoCompression())}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	if len(opts) == 0 {
		produceN(b, cl, 1)
	}
	return cl
}

// produceN produces n records of recordBytes random bytes (each its own
// slice of 1 MiB of random data, sent uncompressed) to bench-0 and waits
// for every acknowledgement.
func produceN(b *testing.B, cl *kgo.Client, n int) {
	random := make([]byte, 1<<20)
	rand.Read(random)
	var wg sync.WaitGroup
	var failed error
	var mu sync.Mutex
	for i := range n {
		wg.Add(1)
		at := i * recordBytes % (len(random) - recordBytes)
		cl.Produce(context.Background(), &kgo.Record{Value: random[at : at+recordBytes]}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				failed = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
}

// startRealKafka runs a single-node raft over badger on disk, creates
// topics topics (bench-0 ...) and serves Kafka on loopback.
func startRealKafka(b *testing.B, topics int) string {
	b.Helper()
	st, err := store.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	node, err := raftnode.StartNode(raftnode.NodeConfig{ID: "1", RaftAddr: "127.0.0.1:0", Dir: b.TempDir()}, st)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { node.Shutdown() })
	for deadline := time.Now().Add(10 * time.Second); node.Raft.State() != raft.Leader; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("no leader after 10 s")
		}
	}
	svc := broker.New("1", node, st)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	if err := svc.RegisterNode(broker.NodeAddrs{ID: "1", HTTPAddr: "127.0.0.1:1", KafkaAddr: ln.Addr().String()}); err != nil {
		b.Fatal(err)
	}
	createTopics(b, svc, topics)
	cfg := DefaultConfig()
	cfg.AdvertisedAddr = ln.Addr().String()
	srv := New(svc, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	go srv.Serve(ln)
	b.Cleanup(srv.Close)
	return ln.Addr().String()
}

// createTopics creates n one-partition topics, 64 at a time.
func createTopics(b *testing.B, svc *broker.Service, n int) {
	b.Helper()
	work := make(chan int)
	errs := make(chan error, 64)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if out, err := svc.CreateTopic(fmt.Sprintf("bench-%d", i), 1, nil); err != nil || out != command.TopicOK {
					errs <- fmt.Errorf("create bench-%d: %v, %v", i, out, err)
					return
				}
			}
		}()
	}
	for i := range n {
		select {
		case work <- i:
		case err := <-errs:
			b.Fatal(err)
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// recordBytes is the size of every benchmark record's value.
const recordBytes = 100

// diskWrites is how many bytes this process has caused to be written to
// disk so far (write_bytes of /proc/self/io).
func diskWrites(b *testing.B) int64 {
	raw, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Skip("no /proc/self/io:", err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Skip("/proc/self/io has no write_bytes")
	return 0
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
