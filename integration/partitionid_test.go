package integration

import (
	"net/http"
	"testing"
)

// Regression: a transaction's ack read partitionId with fmt.Sscan, so
// "12abc", " 12" or "0x1f" acked partition 12 (or 31) where /api/v1/ack
// refused the same value. A transaction with a partitionId the broker did
// not hand out is refused whole with 400, and acks nothing.
func TestTransactionAckWithMalformedPartitionIDIsRefused(t *testing.T) {
	n := startSingle(t)
	n.push(pushItem{Queue: "pid", TransactionID: "m1", Payload: 1})
	_, popped := n.pop(t, "pid", nil)
	if len(popped.Messages) != 1 {
		t.Fatalf("popped %d messages", len(popped.Messages))
	}
	m := popped.Messages[0]
	for _, bad := range []string{m.PartitionID + "abc", " " + m.PartitionID, "0x" + m.PartitionID} {
		op := ackOp(m)
		op["partitionId"] = bad
		var e errorAnswer
		if status := postJSON(t, n.url("/api/v1/transaction"), map[string]any{"operations": []map[string]any{op}}, &e); status != http.StatusBadRequest {
			t.Errorf("transaction acking partitionId %q: status %d (%+v), want 400", bad, status, e)
		}
		// /api/v1/ack refuses it too (as an item error).
		var res []struct {
			Success bool   `json:"success"`
			Error   string `json:"error"`
		}
		ack := map[string]any{"transactionId": m.TransactionID, "partitionId": bad, "leaseId": m.LeaseID, "consumerGroup": m.ConsumerGroup}
		if status := postJSON(t, n.url("/api/v1/ack"), ack, &res); status != http.StatusOK || len(res) != 1 || res[0].Success {
			t.Errorf("/api/v1/ack with partitionId %q: status %d %+v, want an item error", bad, status, res)
		}
	}
	// The lease is still held: the right id acks it.
	if r := n.txn(t, map[string]any{"operations": []map[string]any{ackOp(m)}}); !r.Success {
		t.Fatalf("ack with the handed-out partitionId: %+v", r)
	}
}
