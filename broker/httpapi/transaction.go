package httpapi

import (
	"net/http"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
)

type txnOpJSON struct {
	Type string `json:"type"`
	// ack
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	ConsumerGroup string `json:"consumerGroup"`
	LeaseID       string `json:"leaseId"`
	Status        string `json:"status"`
	Error         string `json:"error"`
	// push
	Items []pushItem `json:"items"`
}

type txnPushResultJSON struct {
	MessageID     string `json:"messageId"`
	TransactionID string `json:"transactionId"`
	Offset        uint64 `json:"offset"`
	Duplicate     bool   `json:"duplicate,omitempty"`
}

type txnOpResultJSON struct {
	Type          string              `json:"type"`
	Success       bool                `json:"success"`
	Error         string              `json:"error,omitempty"`
	LeaseReleased bool                `json:"leaseReleased,omitempty"`
	Messages      []txnPushResultJSON `json:"messages,omitempty"`
}

// transaction commits acks, pushes, KV ops and timers whole, or answers
// 200 with success:false, the reason, and nothing written.
func (s *Server) transaction(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Operations []txnOpJSON   `json:"operations"`
		KV         []kvOpJSON    `json:"kv"`
		Timers     []timerOpJSON `json:"timers"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	treq := broker.TransactionRequest{KV: kvOps(req.KV)}
	for _, op := range req.Operations {
		t := broker.TxnOp{Type: op.Type, Group: op.ConsumerGroup,
			Ack: broker.AckRequest{TransactionID: op.TransactionID, PartitionID: op.PartitionID, LeaseID: op.LeaseID, Status: op.Status, Error: op.Error}}
		if op.ConsumerGroup != "" && !s.allow(w, r, auth.Read, auth.Group, op.ConsumerGroup) {
			return
		}
		for _, it := range op.Items {
			if !s.allow(w, r, auth.Write, auth.Queue, it.Queue) {
				return
			}
			t.Items = append(t.Items, broker.PushItem{Queue: it.Queue, Partition: it.Partition, TransactionID: it.TransactionID, Payload: it.Payload})
		}
		treq.Ops = append(treq.Ops, t)
	}
	var ok bool
	if treq.Timers, ok = timerOps(w, req.Timers); !ok {
		return
	}
	res, err := s.b(r).Transaction(r.Context(), treq)
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	if !res.Success {
		out := map[string]any{"success": false, "reason": res.Reason, "error": res.Error, "results": []any{}, "transactionId": res.TransactionID}
		if a := res.Abort; a != nil {
			out["failedIndex"], out["kvReason"], out["version"], out["value"] = a.FailedIndex, a.KVReason, a.Version, nullIfEmpty(a.Value)
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	results := make([]txnOpResultJSON, len(res.Ops))
	for i, op := range res.Ops {
		switch {
		case op.Ack != nil:
			results[i] = txnOpResultJSON{Type: "ack", Success: op.Ack.Success, Error: op.Ack.Error, LeaseReleased: op.Ack.LeaseReleased}
		default:
			results[i] = txnOpResultJSON{Type: "push", Success: true}
			for _, p := range res.Pushed[i] {
				results[i].Messages = append(results[i].Messages, txnPushResultJSON{MessageID: p.MessageID, TransactionID: p.TransactionID,
					Offset: p.Offset, Duplicate: p.Status == broker.StatusDuplicate})
			}
		}
	}
	kv := []kvResultJSON{}
	for _, k := range res.KV {
		kv = append(kv, toKVResult(k))
	}
	timers := []timerResultJSON{}
	for _, t := range res.Timers {
		timers = append(timers, timerResultJSON{OK: t.OK, Status: t.Status, DeliverAt: expiresAt(t.DeliverAtMs)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "transactionId": res.TransactionID, "results": results, "kv": kv, "timers": timers})
}
