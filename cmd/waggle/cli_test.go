package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/waggle-mq/waggle/client"
	"github.com/waggle-mq/waggle/node"
)

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServer runs a real single node (raft over TCP, badger on disk) in
// this process and returns its HTTP and Kafka addresses. It binds port 0
// and asks the node which ports the system picked (no free-port guess to
// race with other tests).
func startServer(t *testing.T) (httpAddr, kafkaAddr string) {
	t.Helper()
	// The data directory is made before the cleanup that stops the server
	// is registered, so it is removed after the server stopped (cleanups
	// run last-registered first).
	n, err := node.Start(node.Config{DataDir: t.TempDir(), NodeID: 1, HTTPAddr: "127.0.0.1:0", KafkaAddr: "127.0.0.1:0",
		RaftAddr: "127.0.0.1:0", Kafka: defaultKafkaConfig(), Version: version,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		t.Fatalf("start a node: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	httpAddr, kafkaAddr = n.HTTPAddr(), n.KafkaAddr()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + httpAddr + "/health")
		if err == nil {
			var h struct {
				Raft struct{ Role, LeaderHTTP string }
			}
			json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if h.Raft.Role == "leader" && h.Raft.LeaderHTTP != "" {
				return httpAddr, kafkaAddr
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the server did not become leader")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cli runs one waggle command and returns its standard output.
func cli(t *testing.T, server string, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(append([]string{"--server", "http://" + server}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func mustCLI(t *testing.T, server string, args ...string) string {
	t.Helper()
	out, err := cli(t, server, "", args...)
	if err != nil {
		t.Fatalf("waggle %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func requireContains(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestCLIAgainstARealServer(t *testing.T) {
	srv, kafkaAddr := startServer(t)

	requireContains(t, mustCLI(t, srv, "version"), "waggle dev")
	if _, err := cli(t, srv, "", "queue", "list", "-o", "yaml"); err == nil || !strings.Contains(err.Error(), "-o must be") {
		t.Fatalf("an unknown output format: %v", err)
	}

	// Queues and topics.
	requireContains(t, mustCLI(t, srv, "queue", "create", "orders", "--dedup-window", "60", "--retry-limit", "0"), "orders", "60")
	requireContains(t, mustCLI(t, srv, "queue", "configure", "orders", "--lease-time", "30"), "30")
	requireContains(t, mustCLI(t, srv, "topic", "create", "events", "--partitions", "3"), "events")
	out := mustCLI(t, srv, "topic", "describe", "events", "-o", "json")
	var q client.Queue
	if err := json.Unmarshal([]byte(out), &q); err != nil || q.Options.DedupWindowSeconds != 0 || len(q.Partitions) != 3 {
		t.Fatalf("topic describe: %v %+v", err, q)
	}
	// Kafka clients see every queue as a topic: topic list shows them all.
	requireContains(t, mustCLI(t, srv, "topic", "list"), "events", "orders", "KAFKA PARTITIONS")
	requireContains(t, mustCLI(t, srv, "queue", "list"), "events", "orders", "KAFKA PARTITIONS")

	// Push from arguments and stdin; a retried transactionId is a duplicate.
	requireContains(t, mustCLI(t, srv, "push", "orders", "--transaction-id", "t1", `{"n":1}`), "queued", "t1")
	requireContains(t, mustCLI(t, srv, "push", "orders", "--transaction-id", "t1", `{"n":1}`), "duplicate")
	if out, err := cli(t, srv, "two\nthree\n", "push", "orders"); err != nil || strings.Count(out, "queued") != 2 {
		t.Fatalf("push from stdin: %v\n%s", err, out)
	}
	requireContains(t, mustCLI(t, srv, "queue", "list"), "orders", "3")
	requireContains(t, mustCLI(t, srv, "queue", "describe", "orders"), "Default", "3")

	// A push to a new queue says it created it; to an existing one it
	// does not.
	cmd := newRootCmd()
	var stderr bytes.Buffer
	cmd.SetOut(io.Discard)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"--server", srv, "push", "fresh-queue", `"x"`})
	if err := cmd.Execute(); err != nil || !strings.Contains(stderr.String(), "created queue fresh-queue") {
		t.Fatalf("push to a new queue: %v, stderr %q", err, stderr.String())
	}
	stderr.Reset()
	cmd.SetArgs([]string{"--server", srv, "push", "fresh-queue", `"y"`})
	if err := cmd.Execute(); err != nil || strings.Contains(stderr.String(), "created") {
		t.Fatalf("push to an existing queue: %v, stderr %q", err, stderr.String())
	}

	// Without --transaction-id the CLI mints a UUIDv7 per message.
	out = mustCLI(t, srv, "push", "minted", `"a"`, `"b"`, "-o", "json")
	var minted []client.PushResult
	if err := json.Unmarshal([]byte(out), &minted); err != nil || len(minted) != 2 {
		t.Fatalf("push -o json: %v\n%s", err, out)
	}
	for _, r := range minted {
		if id, err := uuid.Parse(r.TransactionID); err != nil || id.Version() != 7 || r.Status != "queued" {
			t.Fatalf("minted transaction id %q (%v), status %s", r.TransactionID, err, r.Status)
		}
	}
	// Pop shows the lease and partition ids, ack takes them.
	out = mustCLI(t, srv, "pop", "minted", "--group", "m", "--batch", "1", "-o", "json")
	var leased []struct{ TransactionID, PartitionID, LeaseID string }
	if err := json.Unmarshal([]byte(out), &leased); err != nil || len(leased) != 1 || leased[0].LeaseID == "" || leased[0].PartitionID == "" {
		t.Fatalf("pop -o json: %v\n%s", err, out)
	}
	requireContains(t, mustCLI(t, srv, "ack", "--group", "m", "--lease", leased[0].LeaseID, "--partition-id", leased[0].PartitionID,
		leased[0].TransactionID), leased[0].TransactionID, "ok")
	if _, err := cli(t, srv, "", "ack", "--group", "m", "--lease", leased[0].LeaseID, "--partition-id", leased[0].PartitionID,
		"--status", "later", "x"); err == nil || !strings.Contains(err.Error(), "--status must be") {
		t.Fatalf("ack with a bad status: %v", err)
	}
	requireContains(t, mustCLI(t, srv, "pop", "minted", "--group", "m", "--batch", "5"), "b")
	if out := mustCLI(t, srv, "pop", "minted", "--group", "m", "-o", "json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("an empty pop -o json printed %q, want []", out)
	}

	// Pop and ack with a group; the group shows lag 0.
	requireContains(t, mustCLI(t, srv, "pop", "orders", "--group", "g", "--batch", "10", "--ack"), `{"n":1}`, `"two"`, `"three"`)
	requireContains(t, mustCLI(t, srv, "group", "list"), "g", "orders")
	requireContains(t, mustCLI(t, srv, "group", "describe", "g"), "orders", "Default")
	out = mustCLI(t, srv, "group", "seek", "g", "orders", "--offset", "1", "-o", "json")
	requireContains(t, out, `"offset": 1`)
	requireContains(t, mustCLI(t, srv, "group", "delete", "g"), "deleted g")

	// A dead letter (retry limit 0, one failed ack over HTTP), then replay.
	mustCLI(t, srv, "push", "orders", "--transaction-id", "bad", `"boom"`)
	var popped client.PopResponse
	client.New("http://"+srv).Call(http.MethodGet, "/api/v1/pop/queue/orders?consumerGroup=d&batch=10", nil, &popped)
	var acks []map[string]string
	for _, m := range popped.Messages {
		acks = append(acks, map[string]string{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "dlq", "error": "nope"})
	}
	client.New("http://"+srv).Call(http.MethodPost, "/api/v1/ack/batch", map[string]any{"consumerGroup": "d", "acknowledgments": acks}, nil)
	out = mustCLI(t, srv, "dlq", "list", "--queue", "orders", "-o", "json")
	var dl client.DeadLetterList
	if err := json.Unmarshal([]byte(out), &dl); err != nil || len(dl.Messages) == 0 {
		t.Fatalf("dlq list: %v\n%s", err, out)
	}
	requireContains(t, mustCLI(t, srv, "dlq", "replay", dl.Messages[0].ID), "queued")
	requireContains(t, mustCLI(t, srv, "dlq", "replay", dl.Messages[0].ID), "duplicate") // replayed once only
	requireContains(t, mustCLI(t, srv, "dlq", "list", "--queue", "orders"), "REPLAYED", "as offset")
	if _, err := cli(t, srv, "", "dlq", "purge"); err == nil || !strings.Contains(err.Error(), "--queue") {
		t.Fatalf("dlq purge without a queue or --all: %v", err)
	}
	requireContains(t, mustCLI(t, srv, "dlq", "purge", "--queue", "orders", "-o", "json"), fmt.Sprintf(`"deleted": %d`, len(dl.Messages)))
	if out := mustCLI(t, srv, "dlq", "list", "--queue", "orders", "-o", "json"); strings.Contains(out, `"id"`) {
		t.Fatalf("dead letters left after a purge:\n%s", out)
	}
	if _, err := cli(t, srv, "", "dlq", "delete", dl.Messages[0].ID); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Fatalf("deleting a purged dead letter: %v", err)
	}

	// KV.
	requireContains(t, mustCLI(t, srv, "kv", "put", "ns", "k", `{"v":1}`, "--forever"), `{"v":1}`)
	requireContains(t, mustCLI(t, srv, "kv", "get", "ns", "k"), `{"v":1}`)
	requireContains(t, mustCLI(t, srv, "kv", "once", "ns", "gate", "--ttl", "60"), "won")
	out, err := cli(t, srv, "", "kv", "once", "ns", "gate", "--ttl", "60")
	if !strings.Contains(out, "lost") || exitCode(err) != exitOnceLost {
		t.Fatalf("kv once when lost: %q, exit status %d (%v), want lost and %d", out, exitCode(err), err, exitOnceLost)
	}
	requireContains(t, mustCLI(t, srv, "kv", "delete", "ns", "k"), "deleted")
	if _, err := cli(t, srv, "", "kv", "get", "ns", "k"); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Fatalf("kv get of a deleted key: %v", err)
	}
	if _, err := cli(t, srv, "", "kv", "put", "ns", "k", "1"); err == nil {
		t.Fatal("kv put without a lifetime succeeded")
	}

	// Cluster.
	// DISK is "used/total (n%)" of the data directory's file system; MEM
	// the Go runtime's memory, in MiB for any live node.
	requireContains(t, mustCLI(t, srv, "cluster", "status"), "up", "leader", kafkaAddr, "DISK", "MEM", "iB/", "%)", " MiB")
	if _, err := cli(t, srv, "", "cluster", "remove", "9"); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Fatalf("removing an unknown node: %v", err)
	}
	if _, err := cli(t, srv, "", "cluster", "add", "zero", "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "HTTP 400") {
		t.Fatalf("adding a node with a bad id: %v", err)
	}

	// Deleting.
	requireContains(t, mustCLI(t, srv, "topic", "delete", "events"), "deleted events")
	requireContains(t, mustCLI(t, srv, "queue", "delete", "orders"), "deleted orders")
	if _, err := cli(t, srv, "", "queue", "describe", "orders"); err == nil {
		t.Fatal("a deleted queue is still described")
	}

	// The bench tools, small.
	requireContains(t, mustCLI(t, srv, "bench", "http", "--push", "--messages", "2000", "--clients", "4"), "MSGS/S", "2000")
	requireContains(t, mustCLI(t, srv, "bench", "kafka", "--produce", "--consume", "--records", "5000", "--brokers", kafkaAddr),
		"MSGS/S", "5000", "one produced record", "one poll")
	// Their throw-away queue and topic are gone afterwards; --keep keeps one.
	if out := mustCLI(t, srv, "queue", "list"); strings.Contains(out, "bench-") {
		t.Fatalf("a bench left its queue behind:\n%s", out)
	}
	mustCLI(t, srv, "bench", "http", "--push", "--messages", "100", "--clients", "1", "--keep")
	requireContains(t, mustCLI(t, srv, "queue", "list"), "bench-")
}

// A bench against nothing says why and exits non-zero (it printed "0
// messages, 100 errors" and exited 0 over HTTP, and hung over Kafka).
func TestBenchAgainstNothingFails(t *testing.T) {
	addr := freePort(t)
	if _, err := cli(t, addr, "", "bench", "http", "--push", "--messages", "100", "--clients", "2"); err == nil ||
		!strings.Contains(err.Error(), "100 of 100 messages failed") || !strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("http bench against nothing: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := cli(t, addr, "", "bench", "kafka", "--produce", "--records", "10", "--brokers", addr)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "cannot reach the Kafka brokers") {
			t.Fatalf("kafka bench against nothing: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the kafka bench against nothing still runs after 30 s")
	}
}

// The CLI retries a push while the cluster answers 503 with Retry-After
// (no leader yet, an outcome it could not learn), sending the same
// transaction ids each time, so a retry cannot store a message twice; it
// gives up once --retry-timeout has passed, and does not retry with 0.
func TestCLIRetriesAPushWithTheSameIDs(t *testing.T) {
	var bodies []string
	failures := 2
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet { // does the queue exist? yes
			w.Write([]byte(`{"name":"q"}`))
			return
		}
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		if len(bodies) <= failures {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":"no leader","code":"no_leader"}`))
			return
		}
		w.Write([]byte(`[{"status":"queued","transactionId":"x"}]`))
	}))
	defer srv.Close()
	var slept []time.Duration
	push := func(timeout string) error {
		o := &clientOptions{server: strings.TrimPrefix(srv.URL, "http://"), output: "json"} // host:port without a scheme
		cmd := newPushCmd(o)
		cmd.Flags().DurationVar(&o.retryTimeout, "retry-timeout", 0, "")
		cmd.SetArgs([]string{"q", `"m"`, "--retry-timeout", timeout})
		cmd.SetOut(io.Discard)
		clock := &fakeClock{t: time.Unix(0, 0), slept: &slept}
		testClock = clock
		defer func() { testClock = nil }()
		return cmd.Execute()
	}
	if err := push("10s"); err != nil {
		t.Fatalf("push through two 503s: %v", err)
	}
	if len(bodies) != 3 || bodies[0] != bodies[1] || bodies[1] != bodies[2] || !strings.Contains(bodies[0], `"transactionId":"`) {
		t.Fatalf("%d attempts with bodies %q: want 3, identical, each with a transaction id", len(bodies), bodies)
	}
	if len(slept) != 2 || slept[0] != time.Second {
		t.Fatalf("waited %v between attempts, want Retry-After's 1s twice", slept)
	}
	bodies, failures = nil, 100
	if err := push("0"); err == nil || len(bodies) != 1 {
		t.Fatalf("--retry-timeout 0: %d attempts, error %v; want one attempt and the error", len(bodies), err)
	}
	bodies = nil
	if err := push("2s"); err == nil || !strings.Contains(err.Error(), "gave up") || len(bodies) != 3 { // at 0, 1 and 2 s
		t.Fatalf("past --retry-timeout: %d attempts, error %v", len(bodies), err)
	}
}

// fakeClock is a clock that moves only when slept on.
type fakeClock struct {
	t     time.Time
	slept *[]time.Duration
}

func (c *fakeClock) sleep(d time.Duration) { *c.slept = append(*c.slept, d); c.t = c.t.Add(d) }
func (c *fakeClock) now() time.Time        { return c.t }

// group describe lists every partition of the group's queues, with the
// lag of those it has not read yet and the messages it holds leased (it
// once showed only the partitions the group had touched, so the lag
// looked smaller than it was).
func TestGroupDescribeShowsEveryPartition(t *testing.T) {
	srv, _ := startServer(t)
	for _, p := range []string{"a", "b", "c"} {
		mustCLI(t, srv, "push", "wide", "--partition", p, `"1"`, `"2"`)
	}
	mustCLI(t, srv, "pop", "wide", "--group", "g", "--partition", "b", "--batch", "2")
	out := mustCLI(t, srv, "group", "describe", "g", "-o", "json")
	var gs []client.ConsumerGroup
	if err := json.Unmarshal([]byte(out), &gs); err != nil || len(gs) != 1 {
		t.Fatalf("group describe -o json: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, c := range gs[0].Cursors {
		got[c.Partition] = fmt.Sprintf("positioned=%v lag=%d inFlight=%d", c.Positioned, c.Lag, c.InFlight)
	}
	want := map[string]string{
		"a": "positioned=false lag=2 inFlight=0",
		"b": "positioned=true lag=2 inFlight=2",
		"c": "positioned=false lag=2 inFlight=0",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("group describe: %v, want %v", got, want)
	}
	requireContains(t, mustCLI(t, srv, "group", "describe", "g"), "IN FLIGHT")
}
