package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waggle-mq/waggle/payload"
)

// benchPayloads is worker w's payload source: random, incompressible
// payloads, unless WAGGLE_BENCH_COMPRESSIBLE=1 asks for repeated ones.
func benchPayloads(w int) *payload.Source {
	return payload.New(uint64(w)+1, os.Getenv("WAGGLE_BENCH_COMPRESSIBLE") == "1")
}

// BenchmarkHTTPPush measures push throughput of a single node over real
// HTTP: each op is one push of 100 messages with 256-byte random payloads and
// unique transactionIds (dedup on, window 3600 s), sent by
// WAGGLE_BENCH_CLIENTS concurrent clients (default 16). It reports
// messages/s and the p50/p99 latency of one push.
//
//	go test ./integration -run '^$' -bench HTTPPush -benchtime 2000x
func BenchmarkHTTPPush(b *testing.B) {
	clients := benchClients()
	n := startSingle(b)
	if os.Getenv("WAGGLE_BENCH_DEDUP") == "0" {
		configureDedup(b, n, "bench", 0)
	}
	b.ResetTimer()
	run := httpPushRun(b, n.url("/api/v1/push"), "bench", b.N, clients)
	b.StopTimer()
	b.ReportMetric(run.rate, "msgs/s")
	b.ReportMetric(ms(run.p50), "p50-ms")
	b.ReportMetric(ms(run.p99), "p99-ms")
	b.ReportMetric(float64(run.throttled), "pushed-back")
	b.ReportMetric(peakRSSMiB(b, n), "server-peak-rss-MiB")
}

// pushBatch is how many messages one benchmark push carries.
const pushBatch = 100

// benchClients is WAGGLE_BENCH_CLIENTS, the concurrent clients of a push
// benchmark (default 16).
func benchClients() int {
	if v, err := strconv.Atoi(os.Getenv("WAGGLE_BENCH_CLIENTS")); err == nil && v > 0 {
		return v
	}
	return 16
}

// configureDedup sets a queue's dedup window (0: off), creating the queue.
func configureDedup(t testing.TB, n *node, queue string, seconds int) {
	t.Helper()
	if status := postJSON(t, n.url("/api/v1/configure"), map[string]any{"queue": queue, "options": map[string]any{"dedupWindowSeconds": seconds}}, nil); status != http.StatusOK {
		t.Fatalf("configure the dedup window of %s: %d", queue, status)
	}
}

// ms is a duration in milliseconds, for a benchmark metric.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pushRun is what one push benchmark run measured.
type pushRun struct {
	rate      float64 // messages/s
	p50, p99  time.Duration
	throttled int64 // pushes answered 429 and sent again
}

// benchPayloadBytes is WAGGLE_BENCH_PAYLOAD_BYTES, the size of one HTTP
// benchmark message's payload (default 256).
func benchPayloadBytes() int {
	if v, err := strconv.Atoi(os.Getenv("WAGGLE_BENCH_PAYLOAD_BYTES")); err == nil && v > 0 {
		return v
	}
	return 256
}

// httpPushRun sends ops pushes of pushBatch messages (random JSON string
// payloads of benchPayloadBytes, unique transactionIds, four partitions) to
// a node's push URL from clients concurrent clients.
func httpPushRun(b *testing.B, url, queue string, ops, clients int) pushRun {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 30 * time.Second}
	size := benchPayloadBytes()
	var throttled atomic.Int64
	run := runBatches(b, ops, clients, func(c int) func(op int64) error {
		var body bytes.Buffer
		src := benchPayloads(c)
		return func(op int64) error {
			body.Reset()
			body.WriteString(`{"items":[`)
			for i := range pushBatch {
				if i > 0 {
					body.WriteByte(',')
				}
				fmt.Fprintf(&body, `{"queue":%q,"partition":"p%d","transactionId":"tx-%d-%d","payload":%s}`, queue, c%4, op, i, src.JSON(size))
			}
			body.WriteString(`]}`)
			return postPush(hc, url, body.Bytes(), &throttled)
		}
	})
	run.throttled = throttled.Load()
	return run
}

// runBatches runs ops batches from clients concurrent clients: client c
// sends a batch by calling the function newClient(c) returned, with the
// batch's number. It measures the rate of messages (pushBatch a batch) and
// the latency of one batch; an error fails the benchmark.
func runBatches(b *testing.B, ops, clients int, newClient func(c int) func(op int64) error) pushRun {
	var next atomic.Int64
	latencies := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		send := newClient(c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for op := next.Add(1) - 1; op < int64(ops); op = next.Add(1) - 1 {
				t0 := time.Now()
				if err := send(op); err != nil {
					b.Error(err)
					return
				}
				latencies[c] = append(latencies[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	all := slices.Concat(latencies...)
	slices.Sort(all)
	if len(all) == 0 {
		b.Fatal("no batch succeeded")
	}
	return pushRun{rate: float64(len(all)*pushBatch) / elapsed.Seconds(), p50: all[len(all)/2], p99: all[len(all)*99/100]}
}

// postPush sends one push body and checks it was stored (201). A push
// pushed back (429 overloaded) wrote nothing; it is counted in throttled
// and sent again after 50 ms, as a client honouring it would.
func postPush(hc *http.Client, url string, raw []byte, throttled *atomic.Int64) error {
	for {
		resp, err := hc.Post(url, "application/json", bytes.NewReader(raw))
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusCreated:
			return nil
		case http.StatusTooManyRequests:
			throttled.Add(1)
			time.Sleep(50 * time.Millisecond)
		default:
			return fmt.Errorf("push status %d", resp.StatusCode)
		}
	}
}

// peakRSSMiB is the node process's peak resident memory so far (VmHWM).
func peakRSSMiB(t testing.TB, n *node) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return float64(kb) / 1024
		}
	}
	return 0
}

// BenchmarkHTTPPushPopAck measures end-to-end consuming on one node: 4
// producers push batches of 100 (256-byte payloads, unique ids) to 8
// partitions while 4 consumers of one group pop batches of 100 and ack
// them with one ack/batch call. Each op is one message pushed, popped and
// completed; it reports messages/s.
//
//	go test ./integration -run '^$' -bench HTTPPushPopAck -benchtime 100000x
func BenchmarkHTTPPushPopAck(b *testing.B) {
	n := startSingle(b)
	total := b.N
	var pushed, completed atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for p := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var body bytes.Buffer
			src := benchPayloads(p)
			for {
				first := pushed.Add(100) - 100
				if first >= int64(total) {
					return
				}
				body.Reset()
				body.WriteString(`{"items":[`)
				for i := first; i < min(first+100, int64(total)); i++ {
					if i > first {
						body.WriteByte(',')
					}
					fmt.Fprintf(&body, `{"queue":"e2e","partition":"p%d","transactionId":"t%d","payload":%s}`, i%8, i, src.JSON(256))
				}
				body.WriteString(`]}`)
				resp, err := client.Post(n.url("/api/v1/push"), "application/json", &body)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				_ = p
			}
		}()
	}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for completed.Load() < int64(total) {
				status, got := n.pop(b, "e2e", map[string]string{"batch": "100", "consumerGroup": "bench", "wait": "true", "timeout": "200"})
				if status != http.StatusOK {
					continue
				}
				code, res := n.ackAll(b, "bench", got.Messages, "completed")
				if code != http.StatusOK {
					b.Errorf("ack status %d", code)
					return
				}
				for _, r := range res {
					if r.Success {
						completed.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(completed.Load())/elapsed.Seconds(), "msgs/s")
}

// BenchmarkTransactions measures transactions/s on one node, each one
// acking a popped message, pushing one output and claiming a once marker,
// from 32 concurrent workers (which pop batches of 50 to have work).
//
//	go test ./integration -run '^$' -bench Transactions -benchtime 20000x
func BenchmarkTransactions(b *testing.B) {
	n := startSingle(b)
	pushN(b, n, "in", 32, b.N)
	var done atomic.Int64
	var wg sync.WaitGroup
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	b.ResetTimer()
	start := time.Now()
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Load() < int64(b.N) {
				status, got := n.pop(b, "in", map[string]string{"batch": "50", "consumerGroup": "txn", "leaseSeconds": "120"})
				if status != http.StatusOK {
					continue
				}
				for _, m := range got.Messages {
					body, _ := json.Marshal(map[string]any{
						"operations": []map[string]any{ackOp(m), {"type": "push", "items": []pushItem{{Queue: "out", TransactionID: "out-" + m.TransactionID, Payload: 1}}}},
						"kv":         []map[string]any{{"op": "putIfAbsent", "ns": "done", "key": m.TransactionID, "value": true, "ttlSeconds": 3600, "required": true}},
					})
					resp, err := hc.Post(n.url("/api/v1/transaction"), "application/json", bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					var ans txnAnswer
					json.NewDecoder(resp.Body).Decode(&ans)
					resp.Body.Close()
					if !ans.Success {
						b.Errorf("transaction rolled back: %s %s", ans.Reason, ans.Error)
						return
					}
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(done.Load())/elapsed.Seconds(), "txn/s")
}
