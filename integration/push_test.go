package integration

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

func TestPushQueuesThenAnswersRetryAsDuplicate(t *testing.T) {
	n := startSingle(t)
	first := n.push(pushItem{Queue: "payments", Partition: "customer-42", TransactionID: "order-9137-paid", Payload: map[string]any{"amount": 12}})
	requireStatus(t, first[0], "queued", 0)
	if first[0].TransactionID != "order-9137-paid" || first[0].QueueName != "payments" || first[0].Partition != "customer-42" {
		t.Fatalf("answer echoes %+v", first[0])
	}

	retry := n.push(pushItem{Queue: "payments", Partition: "customer-42", TransactionID: "order-9137-paid", Payload: map[string]any{"amount": 99}})
	requireStatus(t, retry[0], "duplicate", 0)
	if *retry[0].MessageID != *first[0].MessageID {
		t.Fatalf("duplicate names message %s, original was %s", *retry[0].MessageID, *first[0].MessageID)
	}

	// The same id in another partition is another message.
	other := n.push(pushItem{Queue: "payments", Partition: "customer-43", TransactionID: "order-9137-paid", Payload: 1})
	requireStatus(t, other[0], "queued", 0)

	got := n.fetchAll("payments", "customer-42")
	recs := got.Entries[0].Records
	if len(recs) != 1 || string(recs[0].Payload) != `{"amount":12}` || recs[0].MessageID != *first[0].MessageID {
		t.Fatalf("partition holds %+v; want only the first push", recs)
	}
}

func TestRepeatInsideOneRequestIsStoredOnce(t *testing.T) {
	n := startSingle(t)
	for _, window := range []int{3600, 0} {
		q := fmt.Sprint("q", window)
		if status := postJSON(t, n.url("/api/v1/configure"), map[string]any{"queue": q, "options": map[string]any{"dedupWindowSeconds": window}}, nil); status != http.StatusOK {
			t.Fatalf("configure: %d", status)
		}
		got := n.push(
			pushItem{Queue: q, TransactionID: "a", Payload: 1},
			pushItem{Queue: q, TransactionID: "b", Payload: 2},
			pushItem{Queue: q, TransactionID: "a", Payload: 3},
		)
		requireStatus(t, got[0], "queued", 0)
		requireStatus(t, got[1], "queued", 1)
		requireStatus(t, got[2], "duplicate", 0)
		if got[0].Partition != "Default" {
			t.Fatalf("partition defaulted to %q", got[0].Partition)
		}
	}
	// Window 0: a later request with the same id is a new message.
	requireStatus(t, n.push(pushItem{Queue: "q0", TransactionID: "a", Payload: 4})[0], "queued", 2)
	requireStatus(t, n.push(pushItem{Queue: "q3600", TransactionID: "a", Payload: 4})[0], "duplicate", 0)
}

func TestPushWithoutTransactionIDIsNeverDeduplicated(t *testing.T) {
	n := startSingle(t)
	a := n.push(pushItem{Queue: "q", Payload: "same"}, pushItem{Queue: "q", Payload: "same"})
	b := n.push(pushItem{Queue: "q", Payload: "same"})
	for i, ans := range append(a, b...) {
		requireStatus(t, ans, "queued", uint64(i))
		if ans.TransactionID != *ans.MessageID {
			t.Fatalf("item without id: transaction_id %q, message_id %q; want them equal", ans.TransactionID, *ans.MessageID)
		}
	}
}

func TestDedupWindowExpires(t *testing.T) {
	n := startSingle(t)
	postJSON(t, n.url("/api/v1/configure"), map[string]any{"queue": "short", "options": map[string]any{"dedupWindowSeconds": 1}}, nil)
	requireStatus(t, n.push(pushItem{Queue: "short", TransactionID: "x", Payload: 1})[0], "queued", 0)
	requireStatus(t, n.push(pushItem{Queue: "short", TransactionID: "x", Payload: 1})[0], "duplicate", 0)
	start := time.Now()
	waitFor(t, 10*time.Second, func() error {
		if a := n.push(pushItem{Queue: "short", TransactionID: "x", Payload: 1})[0]; a.Status != "queued" {
			return fmt.Errorf("still %s", a.Status)
		}
		return nil
	})
	if time.Since(start) < 500*time.Millisecond {
		t.Fatalf("window of 1 s expired after %v", time.Since(start))
	}
}

func TestConcurrentPushesOfOneIDStoreOneMessage(t *testing.T) {
	n := startSingle(t)
	const clients = 32
	answers := make([]pushAnswer, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out []pushAnswer
			status := postJSON(t, n.url("/api/v1/push"), map[string]any{"items": []pushItem{{Queue: "race", TransactionID: "one", Payload: i}}}, &out)
			if status != http.StatusCreated || len(out) != 1 {
				t.Errorf("client %d: status %d", i, status)
				return
			}
			answers[i] = out[0]
		}()
	}
	wg.Wait()
	queued := 0
	for _, a := range answers {
		if a.Status == "queued" {
			queued++
		} else if a.Status != "duplicate" {
			t.Fatalf("answer %+v", a)
		}
		if a.Offset == nil || *a.Offset != 0 || *a.MessageID != *answers[0].MessageID {
			t.Fatalf("answer %+v disagrees with %+v", a, answers[0])
		}
	}
	if queued != 1 {
		t.Fatalf("%d of %d concurrent pushes answered queued; want exactly 1", queued, clients)
	}
	if recs := n.fetchAll("race", "Default").Entries[0].Records; len(recs) != 1 {
		t.Fatalf("partition holds %d messages, want 1", len(recs))
	}
}

func TestKillNineKeepsAcknowledgedMessagesAndDedup(t *testing.T) {
	n := startSingle(t)
	original := map[string]pushAnswer{}
	for batch := range 10 {
		var items []pushItem
		for i := range 50 {
			items = append(items, pushItem{Queue: "durable", Partition: "p", TransactionID: fmt.Sprintf("tx-%d-%d", batch, i), Payload: map[string]int{"b": batch, "i": i}})
		}
		for _, a := range n.push(items...) {
			if a.Status != "queued" {
				t.Fatalf("first push answered %+v", a)
			}
			original[a.TransactionID] = a
		}
	}
	n.kill9()
	n.restart()

	recs := n.fetchAll("durable", "p").Entries[0].Records
	if len(recs) != len(original) {
		t.Fatalf("after kill -9 the partition holds %d messages; %d were acknowledged", len(recs), len(original))
	}
	for i, r := range recs {
		a, ok := original[r.TransactionID]
		if !ok || r.Offset != uint64(i) || *a.Offset != r.Offset || *a.MessageID != r.MessageID {
			t.Fatalf("record %+v does not match its acknowledgement %+v", r, a)
		}
	}
	for id, a := range original {
		retry := n.push(pushItem{Queue: "durable", Partition: "p", TransactionID: id, Payload: "retry"})[0]
		requireStatus(t, retry, "duplicate", *a.Offset)
		if *retry.MessageID != *a.MessageID {
			t.Fatalf("retry of %s names %s, original %s", id, *retry.MessageID, *a.MessageID)
		}
	}
	// New pushes continue the offsets without a gap.
	requireStatus(t, n.push(pushItem{Queue: "durable", Partition: "p", TransactionID: "after", Payload: 1})[0], "queued", uint64(len(original)))
}

func TestSigtermShutsDownCleanly(t *testing.T) {
	n := startSingle(t)
	a := n.push(pushItem{Queue: "q", TransactionID: "before-stop", Payload: 1})[0]
	n.stop()
	if code := n.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0\n%s", code, n.logTail())
	}
	n.restart()
	requireStatus(t, n.push(pushItem{Queue: "q", TransactionID: "before-stop", Payload: 1})[0], "duplicate", *a.Offset)
}
