package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

type poppedMessage struct {
	ID              string          `json:"id"`
	TransactionID   string          `json:"transactionId"`
	Partition       string          `json:"partition"`
	PartitionID     string          `json:"partitionId"`
	Offset          uint64          `json:"offset"`
	Data            json.RawMessage `json:"data"`
	LeaseID         string          `json:"leaseId"`
	ConsumerGroup   string          `json:"consumerGroup"`
	DeliveryAttempt int             `json:"deliveryAttempt"`
}

type popAnswer struct {
	Messages []poppedMessage `json:"messages"`
	LeaseID  string          `json:"leaseId"`
}

type ackResult struct {
	Index         int    `json:"index"`
	TransactionID string `json:"transactionId"`
	Success       bool   `json:"success"`
	Error         string `json:"error"`
	LeaseReleased bool   `json:"leaseReleased"`
	DLQ           bool   `json:"dlq"`
}

// pop calls GET /api/v1/pop/queue/:queue with query params; status 0 is a
// transport error.
func (n *node) pop(t testing.TB, queue string, params map[string]string) (int, popAnswer) {
	t.Helper()
	q := url.Values{}
	for k, v := range params {
		q.Set(k, v)
	}
	var out popAnswer
	status := do(t, http.MethodGet, n.url("/api/v1/pop/queue/"+queue+"?"+q.Encode()), nil, &out)
	return status, out
}

// ackAll acks every popped message with one status in one batch.
func (n *node) ackAll(t testing.TB, group string, msgs []poppedMessage, status string) (int, []ackResult) {
	t.Helper()
	var acks []map[string]string
	for _, m := range msgs {
		acks = append(acks, map[string]string{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": status, "error": "test"})
	}
	var out []ackResult
	code := postJSON(t, n.url("/api/v1/ack/batch"), map[string]any{"consumerGroup": group, "acknowledgments": acks}, &out)
	return code, out
}

func requireAcked(t testing.TB, results []ackResult, want int) {
	t.Helper()
	if len(results) != want {
		t.Fatalf("%d ack results, want %d", len(results), want)
	}
	for _, r := range results {
		if !r.Success {
			t.Fatalf("ack of %s failed: %s", r.TransactionID, r.Error)
		}
	}
}

func pushN(t testing.TB, n *node, queue string, partitions, count int) {
	t.Helper()
	for start := 0; start < count; start += 500 {
		var items []pushItem
		for i := start; i < min(start+500, count); i++ {
			items = append(items, pushItem{Queue: queue, Partition: fmt.Sprint("p", i%partitions), TransactionID: fmt.Sprint("m-", i), Payload: i})
		}
		n.push(items...)
	}
}

// waitLongPolls waits until n reports want requests of kind ("pop" or
// "fetch") parked waiting for data (the waggle_long_polls_waiting gauge), so
// a test appends only once its reader is really waiting: the wake-up path
// is then what it tests.
func waitLongPolls(t testing.TB, n *node, kind string, want int) {
	t.Helper()
	line := fmt.Sprintf("waggle_long_polls_waiting{kind=%q} %d\n", kind, want)
	waitFor(t, 20*time.Second, func() error {
		if !strings.Contains(metricsText(t, n), line) {
			return fmt.Errorf("the metrics lack %q", strings.TrimSpace(line))
		}
		return nil
	})
}
