package integration

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type txnAnswer struct {
	Success       bool   `json:"success"`
	Reason        string `json:"reason"`
	Error         string `json:"error"`
	TransactionID string `json:"transactionId"`
	FailedIndex   int    `json:"failedIndex"`
	KVReason      string `json:"kvReason"`
	Version       int64  `json:"version"`
	Results       []struct {
		Type     string `json:"type"`
		Success  bool   `json:"success"`
		Messages []struct {
			MessageID     string `json:"messageId"`
			TransactionID string `json:"transactionId"`
			Offset        uint64 `json:"offset"`
			Duplicate     bool   `json:"duplicate"`
		} `json:"messages"`
	} `json:"results"`
}

func (n *node) txn(t testing.TB, body map[string]any) txnAnswer {
	t.Helper()
	var out txnAnswer
	if status := postJSON(t, n.url("/api/v1/transaction"), body, &out); status != http.StatusOK {
		t.Fatalf("transaction: status %d", status)
	}
	return out
}

func (n *node) once(t testing.TB, ns, key string, ttl int) (int, bool) {
	t.Helper()
	body := map[string]any{"ns": ns, "key": key}
	if ttl > 0 {
		body["ttlSeconds"] = ttl
	} else {
		body["forever"] = true
	}
	var out struct{ Won bool }
	status := postJSON(t, n.url("/api/v1/kv/once"), body, &out)
	return status, out.Won
}

func ackOp(m poppedMessage) map[string]any {
	return map[string]any{"type": "ack", "transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID,
		"consumerGroup": m.ConsumerGroup, "status": "completed"}
}

func countRecords(t testing.TB, n *node, queue string) int {
	t.Helper()
	var f fetchAnswer
	postJSON(t, n.url("/api/v1/fetch"), map[string]any{"entries": []map[string]any{{"queue": queue, "offset": 0}}}, &f)
	return len(f.Entries[0].Records)
}

// The seed's mailer: a step (send the welcome mail) guarded by
// once('welcome', user) in the step's transaction. The event is delivered
// twice; the second run is refused and writes nothing.
func TestMailerStepRunsOnceAcrossRedelivery(t *testing.T) {
	n := startSingle(t)
	n.push(pushItem{Queue: "signups", TransactionID: "signup-42", Payload: map[string]string{"user": "u42"}})
	step := func(m poppedMessage, withAck bool) txnAnswer {
		ops := []map[string]any{{"type": "push", "items": []pushItem{{Queue: "mail", TransactionID: "welcome-u42-" + m.LeaseID, Payload: "hi"}}}}
		if withAck {
			ops = append([]map[string]any{ackOp(m)}, ops...)
		}
		return n.txn(t, map[string]any{"operations": ops,
			"kv": []map[string]any{{"op": "putIfAbsent", "ns": "welcome", "key": "u42", "value": true, "forever": true, "required": true}}})
	}
	// Worker A runs the step but dies before acking the event.
	_, a := n.pop(t, "signups", map[string]string{"leaseSeconds": "1"})
	if r := step(a.Messages[0], false); !r.Success {
		t.Fatalf("first run: %+v", r)
	}
	// The lease expires; worker B gets the event again and runs the step.
	var b popAnswer
	waitFor(t, 10*time.Second, func() error {
		status, got := n.pop(t, "signups", nil)
		if status != http.StatusOK {
			return fmt.Errorf("pop %d", status)
		}
		b = got
		return nil
	})
	if b.Messages[0].DeliveryAttempt != 2 {
		t.Fatalf("redelivery attempt %d", b.Messages[0].DeliveryAttempt)
	}
	second := step(b.Messages[0], true)
	if second.Success || second.Reason != "kv_precondition" || second.KVReason != "exists" || second.FailedIndex != 0 || second.Version != 1 {
		t.Fatalf("second run: %+v; want a kv_precondition rollback (exists)", second)
	}
	if got := countRecords(t, n, "mail"); got != 1 {
		t.Fatalf("mail holds %d messages; the refused run must write nothing", got)
	}
	// Nothing of the refused transaction happened: its ack neither.
	if status, _ := n.pop(t, "signups", nil); status != http.StatusNoContent {
		t.Fatalf("the event's lease was released by a rolled-back transaction: pop %d", status)
	}
	_, res := n.ackAll(t, "", b.Messages, "completed")
	requireAcked(t, res, 1)
}

func TestTransactionRetries(t *testing.T) {
	n := startSingle(t)
	body := map[string]any{"operations": []map[string]any{{"type": "push", "items": []pushItem{{Queue: "out", TransactionID: "r-1", Payload: 1}}}}}
	if first := n.txn(t, body); !first.Success || first.TransactionID == "" {
		t.Fatalf("first attempt: %+v", first)
	}
	if retry := n.txn(t, body); retry.Success || retry.Reason != "duplicate" {
		t.Fatalf("retry of a committed transaction: %+v; want rollback duplicate", retry)
	}

	// A transaction whose first attempt did not commit commits when retried.
	gated := map[string]any{
		"operations": []map[string]any{{"type": "push", "items": []pushItem{{Queue: "out", TransactionID: "r-2", Payload: 2}}}},
		"kv":         []map[string]any{{"op": "check", "ns": "gate", "key": "open", "required": true}},
	}
	if r := n.txn(t, gated); r.Success || r.Reason != "kv_precondition" || r.KVReason != "absent" {
		t.Fatalf("gated attempt: %+v", r)
	}
	if got := countRecords(t, n, "out"); got != 1 {
		t.Fatalf("a rolled-back push was stored: %d records", got)
	}
	postJSON(t, n.url("/api/v1/kv"), map[string]any{"operations": []map[string]any{{"op": "put", "ns": "gate", "key": "open", "value": true, "forever": true}}}, nil)
	if r := n.txn(t, gated); !r.Success {
		t.Fatalf("retry after the gate opened: %+v", r)
	}

	// An id repeated inside one transaction is stored once, without rollback.
	rep := n.txn(t, map[string]any{"operations": []map[string]any{
		{"type": "push", "items": []pushItem{{Queue: "out", TransactionID: "r-3", Payload: 3}}},
		{"type": "push", "items": []pushItem{{Queue: "out", TransactionID: "r-3", Payload: 3}}},
	}})
	if !rep.Success || rep.Results[0].Messages[0].Duplicate || !rep.Results[1].Messages[0].Duplicate ||
		rep.Results[1].Messages[0].Offset != rep.Results[0].Messages[0].Offset {
		t.Fatalf("repeat inside a transaction: %+v", rep)
	}
	if got := countRecords(t, n, "out"); got != 3 {
		t.Fatalf("out holds %d records, want 3", got)
	}
}

func TestKVRequiredLossAbortsTheCall(t *testing.T) {
	n := startSingle(t)
	postJSON(t, n.url("/api/v1/kv"), map[string]any{"operations": []map[string]any{{"op": "put", "ns": "s", "key": "taken", "value": "x", "forever": true}}}, nil)
	var out struct {
		OK          bool            `json:"ok"`
		Reason      string          `json:"reason"`
		FailedIndex int             `json:"failedIndex"`
		KVReason    string          `json:"kvReason"`
		Value       json.RawMessage `json:"value"`
	}
	postJSON(t, n.url("/api/v1/kv"), map[string]any{"operations": []map[string]any{
		{"op": "put", "ns": "s", "key": "a", "value": 1, "forever": true},
		{"op": "putIfAbsent", "ns": "s", "key": "taken", "value": "y", "forever": true, "required": true},
	}}, &out)
	if out.OK || out.Reason != "kv_precondition" || out.FailedIndex != 1 || out.KVReason != "exists" || string(out.Value) != `"x"` {
		t.Fatalf("required loss: %+v", out)
	}
	if status := getJSON(t, n.url("/api/v1/kv/s/a"), nil); status != http.StatusNotFound {
		t.Fatalf("the aborted call's first write exists: %d", status)
	}
	var e errorAnswer
	if status := postJSON(t, n.url("/api/v1/kv"), map[string]any{"operations": []map[string]any{{"op": "put", "ns": "s", "key": "b", "value": 1}}}, &e); status != 400 || e.Code != "kv_expiry_not_specified" {
		t.Fatalf("write without lifetime: %d %+v", status, e)
	}
	if status := postJSON(t, n.url("/api/v1/kv"), map[string]any{"operations": []map[string]any{{"op": "put", "ns": "s", "key": "b", "value": strings.Repeat("v", 70_000), "forever": true}}}, &e); status != 413 {
		t.Fatalf("oversized value: %d %+v", status, e)
	}
	if status := postJSON(t, n.url("/api/v1/transaction"), map[string]any{"operations": []map[string]any{{"type": "nope"}}}, &e); status != 400 || e.Code == "" {
		t.Fatalf("malformed transaction: %d %+v", status, e)
	}
}

func TestOnceTTLExpiryLetsALaterOnceWin(t *testing.T) {
	n := startSingle(t)
	if _, won := n.once(t, "daily", "report", 1); !won {
		t.Fatal("first once lost")
	}
	if _, won := n.once(t, "daily", "report", 1); won {
		t.Fatal("second once won while the marker lives")
	}
	waitFor(t, 10*time.Second, func() error {
		if _, won := n.once(t, "daily", "report", 1); !won {
			return fmt.Errorf("marker still alive")
		}
		return nil
	})
}

func TestOnceRaceHasOneWinner(t *testing.T) {
	n := startSingle(t)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if status, won := n.once(t, "race", "k", 0); status == http.StatusOK && won {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d of 50 racing once calls won; want exactly 1", wins.Load())
	}
}

func scheduleTimer(t testing.TB, n *node, key string, delayMs int) {
	t.Helper()
	var out struct{ Results []struct{ Status string } }
	postJSON(t, n.url("/api/v1/timers"), map[string]any{"operations": []map[string]any{{"op": "schedule", "queue": "reminders", "timerKey": key,
		"delayMs": delayMs, "txn": "fire-" + key, "payload": base64.StdEncoding.EncodeToString([]byte(`{"k":"` + key + `"}`))}}}, &out)
	if len(out.Results) != 1 || out.Results[0].Status != "scheduled" {
		t.Fatalf("schedule %s: %+v", key, out)
	}
}

// replicatedClock is n's replicated clock (Unix ms) as of its last applied
// entry.
func replicatedClock(t testing.TB, n *node) int64 {
	t.Helper()
	var h struct {
		Raft struct {
			ClockMs int64 `json:"clockMs"`
		} `json:"raft"`
	}
	getJSON(t, n.url("/health"), &h)
	return h.Raft.ClockMs
}

// waitReplicatedClock waits until n's replicated clock reaches atMs.
func waitReplicatedClock(t testing.TB, n *node, atMs int64) {
	t.Helper()
	waitFor(t, 20*time.Second, func() error {
		if now := replicatedClock(t, n); now < atMs {
			return fmt.Errorf("replicated clock at %d, waiting for %d", now, atMs)
		}
		return nil
	})
}

func timerFirings(t testing.TB, n *node, key string) int {
	var f fetchAnswer
	postJSON(t, n.url("/api/v1/fetch"), map[string]any{"entries": []map[string]any{{"queue": "reminders", "offset": 0}}}, &f)
	c := 0
	if len(f.Entries) == 1 {
		for _, r := range f.Entries[0].Records {
			if r.TransactionID == "fire-"+key {
				c++
			}
		}
	}
	return c
}

func TestTimerFiresOnceAndCancelledNever(t *testing.T) {
	n := startSingle(t)
	scheduled := time.Now()
	scheduleTimer(t, n, "soon", 300)
	scheduleTimer(t, n, "cancelled", 1500)
	clock := replicatedClock(t, n) // at least the time the schedule was stamped with
	var c struct{ Status string }
	if do(t, http.MethodDelete, n.url("/api/v1/timers/reminders/cancelled"), nil, &c); c.Status != "cancelled" {
		t.Fatalf("cancel: %+v", c)
	}
	waitFor(t, 10*time.Second, func() error {
		if timerFirings(t, n, "soon") != 1 {
			return fmt.Errorf("not fired yet")
		}
		return nil
	})
	if time.Since(scheduled) < 300*time.Millisecond {
		t.Fatal("the timer fired early")
	}
	// Timers fire by the replicated clock, on the leader's ticks (every
	// second): once it is 2 s past the cancelled one's due time, ticks
	// stamped after that time have been applied.
	waitReplicatedClock(t, n, clock+1500+2000)
	if got := timerFirings(t, n, "soon"); got != 1 {
		t.Fatalf("the timer fired %d times", got)
	}
	if got := timerFirings(t, n, "cancelled"); got != 0 {
		t.Fatalf("the cancelled timer fired %d times", got)
	}
}

// The same guarantees across a leader kill.
func TestTransactionsOnceAndTimersAcrossFailover(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader()
	if _, won := l.once(t, "ha", "marker", 0); !won {
		t.Fatal("once before the kill lost")
	}
	body := map[string]any{"operations": []map[string]any{{"type": "push", "items": []pushItem{{Queue: "ha-out", TransactionID: "ha-1", Payload: 1}}}}}
	if r := l.txn(t, body); !r.Success {
		t.Fatalf("transaction before the kill: %+v", r)
	}
	scheduleTimer(t, l, "across", 1500)
	l.kill9()

	survivor := c.live()[0]
	waitFor(t, 10*time.Second, func() error {
		status, won := survivor.once(t, "ha", "marker", 0)
		if status != http.StatusOK {
			return fmt.Errorf("status %d", status)
		}
		if won {
			t.Fatal("once won again after failover")
		}
		return nil
	})
	if r := survivor.txn(t, body); r.Success || r.Reason != "duplicate" {
		t.Fatalf("retried transaction after failover: %+v", r)
	}
	waitFor(t, 15*time.Second, func() error {
		if timerFirings(t, c.leader(), "across") != 1 {
			return fmt.Errorf("timer not fired")
		}
		return nil
	})
	// More ticks, by the replicated clock, after the firing: none fires it
	// again.
	waitReplicatedClock(t, c.leader(), replicatedClock(t, c.leader())+2000)
	for _, n := range c.live() {
		c.waitCaughtUp(n)
		if got := timerFirings(t, n, "across"); got != 1 {
			t.Fatalf("node %d: the timer fired %d times", n.id, got)
		}
	}
}
