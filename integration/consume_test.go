package integration

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestPopAckRoundTrip(t *testing.T) {
	n := startSingle(t)
	if status, _ := n.pop(t, "nothing-yet", nil); status != http.StatusNotFound {
		t.Fatalf("pop of an unknown queue: %d", status)
	}
	n.push(pushItem{Queue: "jobs", TransactionID: "a", Payload: map[string]int{"n": 1}}, pushItem{Queue: "jobs", TransactionID: "b", Payload: 2})
	status, got := n.pop(t, "jobs", map[string]string{"batch": "10"})
	if status != http.StatusOK || len(got.Messages) != 2 || got.LeaseID == "" {
		t.Fatalf("pop: %d %+v", status, got)
	}
	m := got.Messages[0]
	if m.TransactionID != "a" || string(m.Data) != `{"n":1}` || m.DeliveryAttempt != 1 || m.LeaseID != got.LeaseID || m.ConsumerGroup != "__QUEUE_MODE__" || m.Partition != "Default" {
		t.Fatalf("popped %+v", m)
	}
	// The partition is leased: the same group gets nothing until it is acked.
	if status, _ := n.pop(t, "jobs", nil); status != http.StatusNoContent {
		t.Fatalf("pop of a leased partition: %d", status)
	}
	code, res := n.ackAll(t, "", got.Messages, "completed")
	if code != http.StatusOK {
		t.Fatalf("ack: %d", code)
	}
	requireAcked(t, res, 2)
	if !res[1].LeaseReleased {
		t.Fatal("acking the whole lease did not release it")
	}
	// Acking again is harmless; with a wrong lease it is refused.
	var again []ackResult
	postJSON(t, n.url("/api/v1/ack"), map[string]string{"transactionId": "a", "partitionId": m.PartitionID, "leaseId": "not-a-lease", "status": "completed"}, &again)
	if len(again) != 1 || again[0].Success || again[0].Error == "" {
		t.Fatalf("ack with a wrong lease: %+v", again)
	}
	if status, _ := n.pop(t, "jobs", nil); status != http.StatusNoContent {
		t.Fatalf("pop after everything was completed: %d", status)
	}
	var g struct{ Cursors []struct{ Offset, Lag int64 } }
	getJSON(t, n.url("/api/v1/consumer-groups/__QUEUE_MODE__"), &g)
	if len(g.Cursors) != 1 || g.Cursors[0].Offset != 2 || g.Cursors[0].Lag != 0 {
		t.Fatalf("group cursor after completing both: %+v", g)
	}
}

// Four consumers of one group over eight partitions: every message
// completed exactly once, in order within each partition.
func TestConcurrentConsumersProcessEverythingOnceInOrder(t *testing.T) {
	n := startSingle(t)
	const total, partitions = 10_000, 8
	pushN(t, n, "work", partitions, total)

	var (
		mu        sync.Mutex
		completed = map[string]int{}
		lastByP   = map[string]uint64{}
		seenP     = map[string]bool{}
		errs      []string
		wg        sync.WaitGroup
	)
	deadline := time.Now().Add(2 * time.Minute)
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				status, got := n.pop(t, "work", map[string]string{"batch": "50", "consumerGroup": "workers", "wait": "true", "timeout": "500"})
				if status == http.StatusNoContent {
					mu.Lock()
					done := len(completed) == total
					mu.Unlock()
					if done {
						return
					}
					continue
				}
				if status != http.StatusOK {
					mu.Lock()
					errs = append(errs, fmt.Sprintf("consumer %d: pop status %d", c, status))
					mu.Unlock()
					return
				}
				mu.Lock()
				for _, m := range got.Messages {
					if seenP[m.Partition] && m.Offset <= lastByP[m.Partition] {
						errs = append(errs, fmt.Sprintf("partition %s: offset %d after %d", m.Partition, m.Offset, lastByP[m.Partition]))
					}
					seenP[m.Partition], lastByP[m.Partition] = true, m.Offset
				}
				mu.Unlock()
				code, res := n.ackAll(t, "workers", got.Messages, "completed")
				mu.Lock()
				for i, r := range res {
					if code == http.StatusOK && r.Success {
						completed[got.Messages[i].TransactionID]++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs[0])
	}
	if len(completed) != total {
		t.Fatalf("%d of %d messages completed", len(completed), total)
	}
	for id, c := range completed {
		if c != 1 {
			t.Fatalf("%s completed %d times", id, c)
		}
	}
}

// A consumer that dies holding a lease: the lease expires (replicated
// time) and another consumer gets the same messages, attempt 2.
func TestExpiredLeaseRedeliversToAnotherConsumer(t *testing.T) {
	n := startSingle(t)
	n.push(pushItem{Queue: "q", TransactionID: "x", Payload: 1})
	status, first := n.pop(t, "q", map[string]string{"leaseSeconds": "1"})
	if status != http.StatusOK {
		t.Fatalf("pop: %d", status)
	}
	start := time.Now()
	status, second := n.pop(t, "q", map[string]string{"wait": "true", "timeout": "100"})
	if status != http.StatusNoContent {
		t.Fatalf("pop while leased: %d", status)
	}
	waitFor(t, 10*time.Second, func() error {
		if status, second = n.pop(t, "q", nil); status != http.StatusOK {
			return fmt.Errorf("status %d", status)
		}
		return nil
	})
	if time.Since(start) < 500*time.Millisecond {
		t.Fatalf("redelivered after %v, before the 1 s lease could expire", time.Since(start))
	}
	m := second.Messages[0]
	if m.TransactionID != "x" || m.DeliveryAttempt != 2 || m.LeaseID == first.LeaseID {
		t.Fatalf("redelivered %+v", m)
	}
	// The dead consumer's late ack is refused; the new holder's works.
	if _, res := n.ackAll(t, "", first.Messages, "completed"); res[0].Success {
		t.Fatal("an ack on the expired lease succeeded")
	}
	_, res := n.ackAll(t, "", second.Messages, "completed")
	requireAcked(t, res, 1)
}

// A message failed past the retry limit becomes a dead letter; replayed
// twice (on a queue without dedup) it is pushed back once, listed as
// replayed, and can be deleted.
func TestFailedMessagesAreRetriedThenDeadLettered(t *testing.T) {
	n := startSingle(t)
	waitLogFormat(t, n, 2) // replay and delete are format 2 entries
	postJSON(t, n.url("/api/v1/configure"), map[string]any{"queue": "flaky", "options": map[string]any{"retryLimit": 2, "dedupWindowSeconds": 0}}, nil)
	n.push(pushItem{Queue: "flaky", TransactionID: "bad", Payload: map[string]string{"k": "v"}})
	for attempt := 1; attempt <= 3; attempt++ {
		status, got := n.pop(t, "flaky", nil)
		if status != http.StatusOK || got.Messages[0].DeliveryAttempt != attempt {
			t.Fatalf("attempt %d: status %d %+v", attempt, status, got)
		}
		_, res := n.ackAll(t, "", got.Messages, "failed")
		requireAcked(t, res, 1)
		if res[0].DLQ != (attempt == 3) {
			t.Fatalf("attempt %d: dead-lettered %v", attempt, res[0].DLQ)
		}
	}
	if status, _ := n.pop(t, "flaky", nil); status != http.StatusNoContent {
		t.Fatalf("a dead letter was delivered again: %d", status)
	}
	var dl deadLetterList
	getJSON(t, n.url("/api/v1/dlq?queue=flaky"), &dl)
	if len(dl.Messages) != 1 || dl.Messages[0].TransactionID != "bad" || dl.Messages[0].Attempts != 3 || dl.Messages[0].Error != "test" {
		t.Fatalf("dead letters: %+v", dl)
	}
	var replay, again pushAnswer
	postJSON(t, n.url("/api/v1/dlq/"+dl.Messages[0].ID+"/replay"), struct{}{}, &replay)
	postJSON(t, n.url("/api/v1/dlq/"+dl.Messages[0].ID+"/replay"), struct{}{}, &again)
	if replay.Status != "queued" || again.Status != "duplicate" || *again.Offset != *replay.Offset {
		t.Fatalf("replays: %+v then %+v", replay, again)
	}
	if status, got := n.pop(t, "flaky", nil); status != http.StatusOK || len(got.Messages) != 1 || string(got.Messages[0].Data) != `{"k":"v"}` {
		t.Fatalf("the replayed copy (once): %d %+v", status, got)
	}
	getJSON(t, n.url("/api/v1/dlq?queue=flaky"), &dl)
	if len(dl.Messages) != 1 || dl.Messages[0].ReplayedAt == nil || dl.Messages[0].ReplayedAs == nil || dl.Messages[0].ReplayedAs.Offset != *replay.Offset {
		t.Fatalf("the dead letter is not listed as replayed at offset %d: %+v", *replay.Offset, dl)
	}
	del := n.url("/api/v1/dlq/" + dl.Messages[0].ID)
	if status := do(t, http.MethodDelete, del, nil, nil); status != http.StatusOK {
		t.Fatalf("delete: %d", status)
	}
	if status := do(t, http.MethodDelete, del, nil, nil); status != http.StatusNotFound {
		t.Fatalf("delete again: %d, want 404", status)
	}
	if getJSON(t, n.url("/api/v1/dlq?queue=flaky"), &dl); len(dl.Messages) != 0 {
		t.Fatalf("dead letters after the delete: %+v", dl)
	}
}

type deadLetterList struct {
	Messages []struct {
		ID, Queue, TransactionID, Error string
		Attempts                        int
		ReplayedAt                      *time.Time
		ReplayedAs                      *struct{ Offset uint64 }
	}
}

// A purge deletes one queue's dead letters, in bounded entries, and
// leaves other queues' alone.
func TestPurgeDeadLetters(t *testing.T) {
	n := startSingle(t)
	waitLogFormat(t, n, 2)
	for _, q := range []string{"doomed", "kept"} {
		postJSON(t, n.url("/api/v1/configure"), map[string]any{"queue": q, "options": map[string]any{"retryLimit": 0}}, nil)
	}
	pushN(t, n, "doomed", 1, 1500) // more than one delete entry holds
	n.push(pushItem{Queue: "kept", TransactionID: "k", Payload: 1})
	for _, q := range []string{"doomed", "kept"} {
		for {
			status, got := n.pop(t, q, map[string]string{"batch": "500"})
			if status == http.StatusNoContent {
				break
			}
			_, res := n.ackAll(t, "", got.Messages, "failed")
			requireAcked(t, res, len(got.Messages))
		}
	}
	var out struct{ Deleted int }
	if status := do(t, http.MethodDelete, n.url("/api/v1/dlq?queue=doomed"), nil, &out); status != http.StatusOK || out.Deleted != 1500 {
		t.Fatalf("purge: %d, deleted %d, want 1500", status, out.Deleted)
	}
	var dl deadLetterList
	if getJSON(t, n.url("/api/v1/dlq"), &dl); len(dl.Messages) != 1 || dl.Messages[0].Queue != "kept" {
		t.Fatalf("after purging queue doomed: %+v", dl)
	}
	if status := do(t, http.MethodDelete, n.url("/api/v1/dlq?queue=nosuch"), nil, nil); status != http.StatusNotFound {
		t.Fatalf("purging an unknown queue: %d, want 404", status)
	}
}

func TestTwoGroupsEachSeeEveryMessage(t *testing.T) {
	n := startSingle(t)
	pushN(t, n, "fan", 2, 100)
	for _, group := range []string{"billing", "audit"} {
		seen := map[string]bool{}
		for len(seen) < 100 {
			status, got := n.pop(t, "fan", map[string]string{"consumerGroup": group, "batch": "30"})
			if status != http.StatusOK {
				t.Fatalf("group %s: pop %d after %d messages", group, status, len(seen))
			}
			for _, m := range got.Messages {
				seen[m.TransactionID] = true
			}
			_, res := n.ackAll(t, group, got.Messages, "completed")
			requireAcked(t, res, len(got.Messages))
		}
	}
}

func TestLongPollPopReturnsSoonAfterPush(t *testing.T) {
	n := startSingle(t)
	n.push(pushItem{Queue: "lp", TransactionID: "warm", Payload: 0})
	_, warm := n.pop(t, "lp", nil)
	n.ackAll(t, "", warm.Messages, "completed")

	got := make(chan time.Time, 1)
	go func() {
		status, _ := n.pop(t, "lp", map[string]string{"wait": "true", "timeout": "10000"})
		if status == http.StatusOK {
			got <- time.Now()
		}
		close(got)
	}()
	waitLongPolls(t, n, "pop", 1)
	n.push(pushItem{Queue: "lp", TransactionID: "now", Payload: 1})
	pushed := time.Now()
	at, ok := <-got
	if !ok {
		t.Fatal("the long-polling pop returned nothing")
	}
	latency := at.Sub(pushed)
	t.Logf("push answered → waiting pop answered: %v", latency)
	if latency > 100*time.Millisecond {
		t.Fatalf("long-poll returned %v after the push, want within 100 ms", latency)
	}
}

func TestSeekAndDeleteGroup(t *testing.T) {
	n := startSingle(t)
	pushN(t, n, "s", 1, 10)
	var g struct{ Cursors []struct{ Offset int64 } }
	if status := postJSON(t, n.url("/api/v1/consumer-groups/g/queues/s/seek"), map[string]any{"offset": 7}, &g); status != http.StatusOK || g.Cursors[0].Offset != 7 {
		t.Fatalf("seek to 7: %d %+v", status, g)
	}
	if _, got := n.pop(t, "s", map[string]string{"consumerGroup": "g", "batch": "10"}); len(got.Messages) != 3 || got.Messages[0].Offset != 7 {
		t.Fatalf("after seek: %+v", got)
	}
	if status := postJSON(t, n.url("/api/v1/consumer-groups/g/queues/s/seek"), map[string]any{"toEnd": true}, &g); status != http.StatusOK || g.Cursors[0].Offset != 10 {
		t.Fatalf("seek to end: %d %+v", status, g)
	}
	var e errorAnswer
	if status := postJSON(t, n.url("/api/v1/consumer-groups/g/queues/s/seek"), map[string]any{"toEnd": true, "offset": 1}, &e); status != http.StatusBadRequest {
		t.Fatalf("seek with two targets: %d", status)
	}
	if status := do(t, http.MethodDelete, n.url("/api/v1/consumer-groups/g"), nil, nil); status != http.StatusOK {
		t.Fatalf("delete group: %d", status)
	}
	if status := getJSON(t, n.url("/api/v1/consumer-groups/g"), nil); status != http.StatusNotFound {
		t.Fatalf("deleted group still answers: %d", status)
	}
	// A new group of the same name starts over from the beginning.
	if _, got := n.pop(t, "s", map[string]string{"consumerGroup": "g", "batch": "10"}); len(got.Messages) != 10 {
		t.Fatalf("recreated group popped %d", len(got.Messages))
	}
}

// Leases and cursors are replicated: across a leader kill no message is
// delivered again after it was completed, and none is lost.
func TestConsumingSurvivesLeaderFailover(t *testing.T) {
	c := startCluster(t, 3)
	pushN(t, c.leader(), "ha", 4, 400)
	completed := map[string]bool{}
	killed := false
	deadline := time.Now().Add(90 * time.Second)
	for len(completed) < 400 && time.Now().Before(deadline) {
		if !killed && len(completed) >= 150 {
			c.leader().kill9()
			killed = true
		}
		live := c.live()
		n := live[len(completed)%len(live)]
		status, got := n.pop(t, "ha", map[string]string{"batch": "20", "consumerGroup": "g", "leaseSeconds": "5"})
		if status != http.StatusOK {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		for _, m := range got.Messages {
			if completed[m.TransactionID] {
				t.Fatalf("%s delivered again after it was completed", m.TransactionID)
			}
		}
		// Retry the ack until it is answered: an unknown outcome is safe to
		// retry (acking twice is harmless).
		for attempt := 0; ; attempt++ {
			code, res := c.live()[attempt%len(c.live())].ackAll(t, "g", got.Messages, "completed")
			if code == http.StatusOK {
				for i, r := range res {
					if r.Success {
						completed[got.Messages[i].TransactionID] = true
					}
				}
				break
			}
			if attempt > 200 {
				t.Fatalf("ack never answered: %d", code)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if len(completed) != 400 {
		t.Fatalf("%d of 400 messages completed", len(completed))
	}
	var ids []int
	for id := range completed {
		v, _ := strconv.Atoi(id[2:])
		ids = append(ids, v)
	}
	sort.Ints(ids)
	if ids[0] != 0 || ids[399] != 399 {
		t.Fatalf("completed ids span %d..%d", ids[0], ids[399])
	}
}

func TestLeaseExtendNeverShortens(t *testing.T) {
	n := startSingle(t)
	n.push(pushItem{Queue: "ext", TransactionID: "x", Payload: 1})
	_, got := n.pop(t, "ext", map[string]string{"leaseSeconds": "1"})
	var ext struct {
		Success   bool
		ExpiresAt time.Time
	}
	if status := postJSON(t, n.url("/api/v1/lease/"+got.LeaseID+"/extend"), map[string]int{"seconds": 30}, &ext); status != http.StatusOK || !ext.Success {
		t.Fatalf("extend: %d %+v", status, ext)
	}
	longer := ext.ExpiresAt
	postJSON(t, n.url("/api/v1/lease/"+got.LeaseID+"/extend"), map[string]int{"seconds": 1}, &ext)
	if !ext.Success || !ext.ExpiresAt.Equal(longer) {
		t.Fatalf("a shorter extension moved the expiry from %v to %v", longer, ext.ExpiresAt)
	}
	time.Sleep(1500 * time.Millisecond) // past the original 1 s lease
	if status, _ := n.pop(t, "ext", nil); status != http.StatusNoContent {
		t.Fatalf("the extended lease was not honoured: pop %d", status)
	}
	_, res := n.ackAll(t, "", got.Messages, "completed")
	requireAcked(t, res, 1)
	if status := postJSON(t, n.url("/api/v1/lease/no-such-lease/extend"), map[string]int{"seconds": 5}, &ext); status != http.StatusOK || ext.Success {
		t.Fatalf("extending an unknown lease: %d %+v", status, ext)
	}
}

func TestDelayedProcessingHoldsMessagesBack(t *testing.T) {
	n := startSingle(t)
	postJSON(t, n.url("/api/v1/configure"), map[string]any{"queue": "later", "options": map[string]any{"delayedProcessing": 1}}, nil)
	n.push(pushItem{Queue: "later", TransactionID: "x", Payload: 1})
	pushed := time.Now()
	if status, _ := n.pop(t, "later", nil); status != http.StatusNoContent {
		t.Fatalf("a delayed message was popped at once: %d", status)
	}
	waitFor(t, 10*time.Second, func() error {
		if status, _ := n.pop(t, "later", nil); status != http.StatusOK {
			return fmt.Errorf("status %d", status)
		}
		return nil
	})
	if since := time.Since(pushed); since < 900*time.Millisecond {
		t.Fatalf("popped %v after the push, before its 1 s delay", since)
	}
}

func TestSeekByTimestamp(t *testing.T) {
	n := startSingle(t)
	n.push(pushItem{Queue: "ts", TransactionID: "old", Payload: 1})
	time.Sleep(50 * time.Millisecond)
	cut := time.Now().UnixMilli()
	time.Sleep(50 * time.Millisecond)
	n.push(pushItem{Queue: "ts", TransactionID: "new", Payload: 2})
	var g struct{ Cursors []struct{ Offset int64 } }
	if status := postJSON(t, n.url("/api/v1/consumer-groups/g/queues/ts/seek"), map[string]any{"timestamp": cut}, &g); status != http.StatusOK || g.Cursors[0].Offset != 1 {
		t.Fatalf("seek to %d: %d %+v", cut, status, g)
	}
	if _, got := n.pop(t, "ts", map[string]string{"consumerGroup": "g", "batch": "5"}); len(got.Messages) != 1 || got.Messages[0].TransactionID != "new" {
		t.Fatalf("after seek by time: %+v", got)
	}
}
