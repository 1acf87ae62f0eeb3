package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waggle-mq/waggle/client"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/kafka"
)

// testWriter writes a node's log lines to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// startNode starts a single node on loopback, every port 0, in dir, and
// waits until it leads. The test's cleanup closes it, should the test not.
func startNode(t *testing.T, dir string) *Node {
	t.Helper()
	n, err := Start(Config{DataDir: dir, NodeID: 1, HTTPAddr: "127.0.0.1:0", KafkaAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0",
		Kafka: kafka.DefaultConfig(), Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	for _, addr := range []string{n.HTTPAddr(), n.KafkaAddr(), n.RaftAddr()} {
		if strings.HasSuffix(addr, ":0") {
			t.Fatalf("addresses %s, %s, %s: want the ports bound", n.HTTPAddr(), n.KafkaAddr(), n.RaftAddr())
		}
	}
	eventually(t, "the node leads", func() bool {
		var h struct{ Raft struct{ Role string } }
		return getJSON(n, "/health", &h) == nil && h.Raft.Role == "leader"
	})
	return n
}

// eventually polls ok for up to 15 s.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 15 s: not yet %s", what)
		}
	}
}

func getJSON(n *Node, path string, v any) error {
	resp, err := http.Get("http://" + n.HTTPAddr() + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func postJSON(t *testing.T, n *Node, path, body string, v any) {
	t.Helper()
	resp, err := http.Post("http://"+n.HTTPAddr()+path, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
}

// push pushes one message with transaction id "order-1" and returns the
// item's status.
func push(t *testing.T, n *Node) string {
	t.Helper()
	var out []client.PushResult
	postJSON(t, n, "/api/v1/push", `{"items":[{"queue":"orders","transactionId":"order-1","payload":{"amount":12}}]}`, &out)
	if len(out) != 1 {
		t.Fatalf("push answered %d items", len(out))
	}
	return out[0].Status
}

// A node started in-process serves a push; Close leaves nothing that
// holds the data directory, so a node started again on it reads the
// message back and still knows its transaction id.
func TestStartPushCloseAndStartAgain(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir)
	if s := push(t, n); s != "queued" {
		t.Fatalf("push: %s", s)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("a second close: %v", err)
	}

	n = startNode(t, dir)
	var fetched struct {
		Entries []struct {
			Records []struct {
				TransactionID string          `json:"transactionId"`
				Payload       json.RawMessage `json:"payload"`
			}
		}
	}
	postJSON(t, n, "/api/v1/fetch", `{"entries":[{"queue":"orders","offset":0}]}`, &fetched)
	if len(fetched.Entries) != 1 || len(fetched.Entries[0].Records) != 1 ||
		fetched.Entries[0].Records[0].TransactionID != "order-1" || string(fetched.Entries[0].Records[0].Payload) != `{"amount":12}` {
		t.Fatalf("fetch after the restart: %+v", fetched)
	}
	if s := push(t, n); s != "duplicate" {
		t.Fatalf("the same push after the restart: %s, want duplicate", s)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// The cluster loops run without cmd/: a new single node registers its
// bound addresses (registerSelf) and raises the log format to the newest
// (raiseLogFormats), then registers again with it.
func TestSingleNodeRegistersAndRaisesTheLogFormat(t *testing.T) {
	n := startNode(t, t.TempDir())
	eventually(t, "registered at the newest log format", func() bool {
		var cl client.Cluster
		if getJSON(n, "/api/v1/cluster", &cl) != nil || cl.LogFormat != int(command.MaxLogFormat) || len(cl.Members) != 1 {
			return false
		}
		m := cl.Members[0]
		return m.ID == 1 && m.HTTPAddr == n.HTTPAddr() && m.KafkaAddr == n.KafkaAddr() && m.LogFormat != nil && *m.LogFormat == int(command.MaxLogFormat)
	})
}
