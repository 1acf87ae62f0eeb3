package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkHTTPPushVsNATS runs the same load against one waggle node and
// against NATS JetStream (nats-server embedded in this process, file
// store, Nats-Msg-Id dedup with a one-hour window), in one run: each op is
// a batch of 100 messages with 256-byte random JSON string payloads and
// unique ids, sent by WAGGLE_BENCH_CLIENTS concurrent clients (default
// 16). For waggle a batch is one push; for NATS it is 100 asynchronous
// publishes and the wait for their 100 acks. waggle runs twice, with dedup
// on (window 3600 s) and off, so the cost of dedup shows as a ratio.
//
// Besides rates and ratios it reports, for waggle, server CPU per message
// and write amplification (bytes the node wrote, /proc/PID/io write_bytes,
// over payload bytes) and the disk in use; for NATS the same write
// amplification (this test process's writes, which are the embedded
// server's) and disk in use. NATS syncs its files every two minutes by
// default; WAGGLE_BENCH_NATS_SYNC=always makes it fsync every write, as
// waggle's raft log does per batch.
//
//	go test ./integration -run '^$' -bench HTTPPushVsNATS -benchtime 5000x
func BenchmarkHTTPPushVsNATS(b *testing.B) {
	clients := benchClients()
	n := startSingle(b)
	configureDedup(b, n, "bench-nodedup", 0)
	payloadBytes := float64(b.N * pushBatch * 256)

	b.ResetTimer()
	cpu0, w0 := cpuSeconds(b, n), writeBytes(b, n.cmd.Process.Pid)
	on := httpPushRun(b, n.url("/api/v1/push"), "bench", b.N, clients)
	cpu, written := cpuSeconds(b, n)-cpu0, writeBytes(b, n.cmd.Process.Pid)-w0
	off := httpPushRun(b, n.url("/api/v1/push"), "bench-nodedup", b.N, clients)
	natsDir := b.TempDir()
	js := startNATS(b, natsDir)
	nw0 := writeBytes(b, os.Getpid())
	nat := natsPublishRun(b, js, b.N, clients)
	natsWritten := writeBytes(b, os.Getpid()) - nw0
	b.StopTimer()

	b.ReportMetric(on.rate, "waggle-msgs/s")
	b.ReportMetric(nat.rate, "nats-msgs/s")
	b.ReportMetric(on.rate/nat.rate, "ratio")
	b.ReportMetric(on.rate/off.rate, "dedup-on/off")
	b.ReportMetric(ms(on.p99), "waggle-p99-ms")
	b.ReportMetric(ms(nat.p99), "nats-p99-ms")
	b.ReportMetric(cpu*1e6/float64(b.N*pushBatch), "waggle-cpu-µs/msg")
	b.ReportMetric(float64(written)/payloadBytes, "waggle-write-amp")
	b.ReportMetric(float64(natsWritten)/payloadBytes, "nats-write-amp")
	b.ReportMetric(float64(measureDataDir(b, n.dataDir).allocated["total"])/(2*payloadBytes), "waggle-disk/payload")
	b.ReportMetric(float64(measureDataDir(b, natsDir).allocated["total"])/payloadBytes, "nats-disk/payload")
	b.ReportMetric(float64(on.throttled+off.throttled), "pushed-back")
	b.ReportMetric(peakRSSMiB(b, n), "waggle-peak-rss-MiB")
}

// startNATS starts an embedded nats-server with JetStream storing in dir,
// creates the benchmark stream (subjects bench.>, file store, dedup window
// one hour) and returns a JetStream context on a connection to it.
func startNATS(b *testing.B, dir string) jetstream.JetStream {
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true}
	if os.Getenv("WAGGLE_BENCH_NATS_SYNC") == "always" {
		opts.SyncAlways = true
	}
	s, err := server.NewServer(opts)
	if err != nil {
		b.Fatal(err)
	}
	s.Start()
	b.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		b.Fatal("nats-server did not start")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	_, err = js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: "BENCH", Subjects: []string{"bench.>"}, Storage: jetstream.FileStorage, Duplicates: time.Hour,
	})
	if err != nil {
		b.Fatal(err)
	}
	return js
}

// natsPublishRun publishes ops batches of pushBatch messages from clients
// concurrent clients (one connection each, to the server js is connected
// to), each batch as pushBatch asynchronous publishes with a unique
// Nats-Msg-Id, then a wait for all their acks.
func natsPublishRun(b *testing.B, js jetstream.JetStream, ops, clients int) pushRun {
	url := js.Conn().ConnectedUrl()
	return runBatches(b, ops, clients, func(c int) func(op int64) error {
		nc, err := nats.Connect(url)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
		cjs, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(pushBatch))
		if err != nil {
			b.Fatal(err)
		}
		src := benchPayloads(c)
		subject := fmt.Sprintf("bench.p%d", c%4)
		acks := make([]jetstream.PubAckFuture, pushBatch)
		return func(op int64) error {
			for i := range pushBatch {
				m := &nats.Msg{Subject: subject, Data: src.JSON(256), Header: nats.Header{}}
				m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("tx-%d-%d", op, i))
				if acks[i], err = cjs.PublishMsgAsync(m); err != nil {
					return err
				}
			}
			for _, a := range acks {
				select {
				case <-a.Ok():
				case err := <-a.Err():
					return err
				}
			}
			return nil
		}
	})
}

// writeBytes is the bytes a process has caused to be written to storage
// (/proc/PID/io write_bytes).
func writeBytes(t testing.TB, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("/proc/%d/io has no write_bytes", pid)
	return 0
}
