package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/waggle-mq/waggle/broker"
)

// A keyed write whose answer leaves the outcome open is sent again under
// the same key until it is answered: the client sees the answer, not
// outcome_unknown. The key and the request's digest reach the broker the
// same on every try.
func TestKeyedWriteRetriesAnOpenOutcomeUnderItsKey(t *testing.T) {
	tries := 0
	f := &fakeBroker{push: func([]broker.PushItem) ([]broker.PushResult, error) {
		tries++
		if tries < 3 {
			return nil, broker.ErrOutcomeUnknown
		}
		return []broker.PushResult{{Status: broker.StatusQueued, MessageID: "m", Queue: "q", Partition: "Default"}}, nil
	}}
	s := newTestServer(f, Options{})
	rec := do(s, "POST", "/api/v1/push", `{"items":[{"queue":"q","transactionId":"t","payload":1}]}`, "Idempotency-Key: k-1")
	if rec.Code != http.StatusCreated || !strings.Contains(rec.Body.String(), `"queued"`) {
		t.Fatalf("answered %d %s, want the third try's 201", rec.Code, rec.Body)
	}
	if len(f.requestKeys) != 3 || f.requestKeys[0] != f.requestKeys[1] || f.requestKeys[1] != f.requestKeys[2] || f.requestKeys[0].Key != "k-1" {
		t.Fatalf("the tries carried keys %+v, want k-1 three times with one digest", f.requestKeys)
	}
}

// Without a key a push is not retried (its transactionIds make a client's
// own retry safe; nothing would make the node's safe), and the other
// request with the same key gets another digest.
func TestPushWithoutAKeyIsNotRetried(t *testing.T) {
	f := &fakeBroker{push: func([]broker.PushItem) ([]broker.PushResult, error) { return nil, broker.ErrOutcomeUnknown }}
	s := newTestServer(f, Options{})
	rec := do(s, "POST", "/api/v1/push", `{"items":[{"queue":"q","payload":1}]}`)
	if rec.Code != http.StatusServiceUnavailable || len(f.requestKeys) != 0 || strings.Count(strings.Join(f.calls, " "), "Push") != 1 {
		t.Fatalf("answered %d after calls %v with keys %v", rec.Code, f.calls, f.requestKeys)
	}
	f.push = func([]broker.PushItem) ([]broker.PushResult, error) { return nil, nil }
	do(s, "POST", "/api/v1/push", `{"items":[{"queue":"q","payload":1}]}`, "Idempotency-Key: k")
	do(s, "POST", "/api/v1/push", `{"items":[{"queue":"q","payload":2}]}`, "Idempotency-Key: k")
	if len(f.requestKeys) != 2 || f.requestKeys[0].BodyHash == f.requestKeys[1].BodyHash {
		t.Fatalf("two bodies under one key gave digests %+v", f.requestKeys)
	}
}

// A keyed write with a body over the limit answers 413 at once: it is not
// forwarded or retried.
func TestKeyedWriteOverTheBodyLimit(t *testing.T) {
	f := &fakeBroker{}
	s := newTestServer(f, Options{})
	body := `{"ns":"n","key":"k","forever":true,"pad":"` + strings.Repeat("x", MaxBodyBytes) + `"}`
	rec := do(s, "POST", "/api/v1/kv/once", body, "Idempotency-Key: big")
	if rec.Code != http.StatusRequestEntityTooLarge || len(f.requestKeys) != 0 {
		t.Fatalf("answered %d after calls %v", rec.Code, f.calls)
	}
}
