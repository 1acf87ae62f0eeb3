package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
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
// this process and returns its HTTP and Kafka addresses.
func startServer(t *testing.T) (httpAddr, kafkaAddr string) {
	t.Helper()
	httpAddr, kafkaAddr = freePort(t), freePort(t)
	// The data directory is made before the cleanup that stops the server
	// is registered, so it is removed after the server stopped (cleanups
	// run last-registered first).
	opts := serveOptions{dataDir: t.TempDir(), nodeID: 1, httpAddr: httpAddr, kafkaAddr: kafkaAddr,
		raftAddr: freePort(t), logLevel: "error", logFormat: "text", kafka: defaultKafkaConfig()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
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
	var q queueInfo
	if err := json.Unmarshal([]byte(out), &q); err != nil || q.Options.DedupWindowSeconds != 0 || len(q.Partitions) != 3 {
		t.Fatalf("topic describe: %v %+v", err, q)
	}
	requireContains(t, mustCLI(t, srv, "topic", "list"), "events")
	if strings.Contains(mustCLI(t, srv, "topic", "list"), "orders") {
		t.Fatal("topic list shows a queue with a dedup window")
	}

	// Push from arguments and stdin; a retried transactionId is a duplicate.
	requireContains(t, mustCLI(t, srv, "push", "orders", "--transaction-id", "t1", `{"n":1}`), "queued", "t1")
	requireContains(t, mustCLI(t, srv, "push", "orders", "--transaction-id", "t1", `{"n":1}`), "duplicate")
	if out, err := cli(t, srv, "two\nthree\n", "push", "orders"); err != nil || strings.Count(out, "queued") != 2 {
		t.Fatalf("push from stdin: %v\n%s", err, out)
	}
	requireContains(t, mustCLI(t, srv, "queue", "list"), "orders", "3")
	requireContains(t, mustCLI(t, srv, "queue", "describe", "orders"), "Default", "3")

	// Pop and ack with a group; the group shows lag 0.
	requireContains(t, mustCLI(t, srv, "pop", "orders", "--group", "g", "--batch", "10", "--ack"), `{"n":1}`, `"two"`, `"three"`)
	requireContains(t, mustCLI(t, srv, "group", "list"), "g", "orders")
	requireContains(t, mustCLI(t, srv, "group", "describe", "g"), "orders", "Default")
	out = mustCLI(t, srv, "group", "seek", "g", "orders", "--offset", "1", "-o", "json")
	requireContains(t, out, `"offset": 1`)
	requireContains(t, mustCLI(t, srv, "group", "delete", "g"), "deleted g")

	// A dead letter (retry limit 0, one failed ack over HTTP), then replay.
	mustCLI(t, srv, "push", "orders", "--transaction-id", "bad", `"boom"`)
	var popped popped
	newAPIClient("http://"+srv).call(http.MethodGet, "/api/v1/pop/queue/orders?consumerGroup=d&batch=10", nil, &popped)
	var acks []map[string]string
	for _, m := range popped.Messages {
		acks = append(acks, map[string]string{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "dlq", "error": "nope"})
	}
	newAPIClient("http://"+srv).call(http.MethodPost, "/api/v1/ack/batch", map[string]any{"consumerGroup": "d", "acknowledgments": acks}, nil)
	out = mustCLI(t, srv, "dlq", "list", "--queue", "orders", "-o", "json")
	var dl deadLetters
	if err := json.Unmarshal([]byte(out), &dl); err != nil || len(dl.Messages) == 0 {
		t.Fatalf("dlq list: %v\n%s", err, out)
	}
	requireContains(t, mustCLI(t, srv, "dlq", "replay", dl.Messages[0].ID), "queued")

	// KV.
	requireContains(t, mustCLI(t, srv, "kv", "put", "ns", "k", `{"v":1}`, "--forever"), `{"v":1}`)
	requireContains(t, mustCLI(t, srv, "kv", "get", "ns", "k"), `{"v":1}`)
	requireContains(t, mustCLI(t, srv, "kv", "once", "ns", "gate", "--ttl", "60"), "won")
	requireContains(t, mustCLI(t, srv, "kv", "once", "ns", "gate", "--ttl", "60"), "lost")
	requireContains(t, mustCLI(t, srv, "kv", "delete", "ns", "k"), "deleted")
	if _, err := cli(t, srv, "", "kv", "get", "ns", "k"); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Fatalf("kv get of a deleted key: %v", err)
	}
	if _, err := cli(t, srv, "", "kv", "put", "ns", "k", "1"); err == nil {
		t.Fatal("kv put without a lifetime succeeded")
	}

	// Cluster.
	requireContains(t, mustCLI(t, srv, "cluster", "status"), "leader", "true", kafkaAddr)
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
	requireContains(t, mustCLI(t, srv, "bench", "kafka", "--produce", "--records", "5000", "--brokers", kafkaAddr), "MSGS/S", "5000")
}

func TestCLIExplainsAnUnreachableServer(t *testing.T) {
	_, err := cli(t, freePort(t), "", "queue", "list")
	if err == nil || !strings.Contains(err.Error(), "cannot reach waggle") {
		t.Fatalf("error for an unreachable server: %v", err)
	}
}
