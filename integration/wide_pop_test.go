package integration

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// A pop looks at no more than 1,000 partitions (issue 14: it read every
// partition of the queue inside the apply loop, seconds per pop on a wide
// queue). Over a queue of 5,000 partitions where only the last one by name
// holds a message, a plain pop and a long-poll pop must still find it:
// the broker pops again while the state machine says there is more to
// look at.
func TestPopFindsAMessageBeyondTheFirstThousandPartitions(t *testing.T) {
	n := startSingle(t)
	const partitions = 5000
	for first := 0; first < partitions; first += 1000 {
		var items []pushItem
		for i := first; i < first+1000; i++ {
			items = append(items, pushItem{Queue: "wide", Partition: fmt.Sprintf("p-%05d", i), TransactionID: fmt.Sprint("old-", i), Payload: i})
		}
		n.push(items...)
	}
	// Group g starts from new: nothing of the above is for it.
	if status, _ := n.pop(t, "wide", map[string]string{"consumerGroup": "g", "subscriptionMode": "new"}); status != http.StatusNoContent {
		t.Fatalf("first pop from new: %d", status)
	}
	last := fmt.Sprintf("p-%05d", partitions-1)
	n.push(pushItem{Queue: "wide", Partition: last, TransactionID: "new-1", Payload: 1})
	status, got := n.pop(t, "wide", map[string]string{"consumerGroup": "g"})
	if status != http.StatusOK || len(got.Messages) != 1 || got.Messages[0].TransactionID != "new-1" || got.Messages[0].Partition != last {
		t.Fatalf("pop: %d %+v, want new-1 from %s", status, got, last)
	}
	n.ackAll(t, "g", got.Messages, "completed")

	// A long-poll pop waiting while the message lands in a partition its
	// next window does not start at.
	done := make(chan popAnswer, 1)
	go func() {
		_, got := n.pop(t, "wide", map[string]string{"consumerGroup": "g", "wait": "true", "timeout": "20000"})
		done <- got
	}()
	waitLongPolls(t, n, "pop", 1) // the pop is parked: the push must wake it
	pushedAt := time.Now()
	n.push(pushItem{Queue: "wide", Partition: "p-02500", TransactionID: "new-2", Payload: 2})
	select {
	case got := <-done:
		if len(got.Messages) != 1 || got.Messages[0].TransactionID != "new-2" {
			t.Fatalf("long-poll pop: %+v, want new-2", got)
		}
		if d := time.Since(pushedAt); d > 5*time.Second {
			t.Fatalf("long-poll pop answered %v after the push", d)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("long-poll pop did not answer")
	}
}
