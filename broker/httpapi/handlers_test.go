package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/client"
	"github.com/waggle-mq/waggle/command"
)

// A request the API cannot read is answered 400 (413 when too big) with
// {"error","code"} before the broker is asked anything.
func TestBadRequestsNeverReachTheBroker(t *testing.T) {
	oversize := "{" + strings.Repeat(" ", MaxBodyBytes) + "}"
	for _, tc := range []struct {
		name, method, target, body string
		status                     int
		code                       string
		notCalled                  string // the broker method that must not run
	}{
		{"truncated JSON", "POST", "/api/v1/push", `{"items":[`, 400, "bad_json", "Push"},
		{"empty body", "POST", "/api/v1/push", "", 400, "bad_json", "Push"},
		{"two JSON values", "POST", "/api/v1/push", `{"items":[]} {}`, 400, "bad_json", "Push"},
		{"invalid UTF-8", "POST", "/api/v1/push", "{\"items\":[{\"queue\":\"q\",\"transactionId\":\"\xff\"}]}", 400, "bad_json", "Push"},
		{"misspelt field", "POST", "/api/v1/push", `{"items":[{"queue":"q","transactonId":"t"}]}`, 400, "unknown_field", "Push"},
		{"items not a list", "POST", "/api/v1/push", `{"items":"q"}`, 400, "bad_type", "Push"},
		{"body over 1 MiB", "POST", "/api/v1/push", oversize, 413, "too_large", "Push"},
		{"negative fetch offset", "POST", "/api/v1/fetch", `{"entries":[{"queue":"q","offset":-1}]}`, 400, "bad_type", "Fetch"},
		{"ack unknown field", "POST", "/api/v1/ack", `{"transactionId":"t","lease":"L"}`, 400, "unknown_field", "Ack"},
		{"ack batch wrong type", "POST", "/api/v1/ack/batch", `{"acknowledgments":{}}`, 400, "bad_type", "Ack"},
		{"extend seconds as string", "POST", "/api/v1/lease/L/extend", `{"seconds":"30"}`, 400, "bad_type", "ExtendLease"},
		{"batch not a number", "GET", "/api/v1/pop/queue/q?batch=ten", "", 400, "invalid_request", "Pop"},
		{"negative batch", "GET", "/api/v1/pop/queue/q?batch=-1", "", 400, "invalid_request", "Pop"},
		{"bad leaseSeconds", "GET", "/api/v1/pop/queue/q?leaseSeconds=1.5", "", 400, "invalid_request", "Pop"},
		{"bad wait timeout", "GET", "/api/v1/pop/queue/q?wait=true&timeout=soon", "", 400, "invalid_request", "Pop"},
		{"bad subscriptionMode", "GET", "/api/v1/pop/queue/q?subscriptionMode=latest", "", 400, "invalid_request", "Pop"},
		{"method not allowed", "PUT", "/api/v1/push", `{"items":[]}`, 405, "method_not_allowed", "Push"},
		{"no such route", "POST", "/api/v1/pushh", `{"items":[]}`, 404, "not_found", "Push"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBroker{}
			rec := do(newTestServer(f, Options{}), tc.method, tc.target, tc.body)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if e := errorOf(t, rec); e.Code != tc.code {
				t.Errorf("code %q, want %q (%s)", e.Code, tc.code, e.Error)
			}
			if f.called(tc.notCalled) {
				t.Errorf("the broker's %s was called: %v", tc.notCalled, f.calls)
			}
		})
	}
}

// The body limit is MaxBodyBytes inclusive.
func TestBodyOfExactlyMaxBytesIsRead(t *testing.T) {
	f := &fakeBroker{}
	body := `{"items":[]` + strings.Repeat(" ", MaxBodyBytes-len(`{"items":[]}`)) + "}"
	rec := do(newTestServer(f, Options{}), "POST", "/api/v1/push", body)
	if rec.Code != http.StatusCreated || !f.called("Push") {
		t.Fatalf("a body of exactly %d bytes: %d %s, calls %v", MaxBodyBytes, rec.Code, rec.Body, f.calls)
	}
}

// Each broker error is answered with the status, code and Retry-After of
// docs/HTTP-API.md's "Errors", carrying the broker's message, also when
// wrapped.
func TestBrokerErrorsMapToStatuses(t *testing.T) {
	for _, tc := range []struct {
		err        error
		status     int
		code       string
		retryAfter string
	}{
		{fmt.Errorf("%w: queue name %q", broker.ErrInvalid, "a b"), 400, "invalid_request", ""},
		{broker.ErrKVExpiry, 400, "kv_expiry_not_specified", ""},
		{fmt.Errorf("queue q: %w", broker.ErrNotFound), 404, "not_found", ""},
		{fmt.Errorf("%w: value of 2 MiB", broker.ErrTooLarge), 413, "too_large", ""},
		{broker.ErrNotLeader, 503, "no_leader", "1"},
		{fmt.Errorf("apply: %w", broker.ErrOutcomeUnknown), 503, "outcome_unknown", "1"},
		{broker.ErrUpgradeInProgress, 503, "upgrade_in_progress", "5"},
		{broker.ErrStorageFull, 507, "storage_full", ""},
		{errors.New("disk on fire"), 500, "internal", ""},
	} {
		t.Run(tc.code, func(t *testing.T) {
			f := &fakeBroker{push: func([]broker.PushItem) ([]broker.PushResult, error) { return nil, tc.err }}
			rec := do(newTestServer(f, Options{}), "POST", "/api/v1/push", `{"items":[{"queue":"q","payload":1}]}`)
			if rec.Code != tc.status {
				t.Fatalf("%v: status %d, want %d", tc.err, rec.Code, tc.status)
			}
			e := errorOf(t, rec)
			if e.Code != tc.code || e.Error != tc.err.Error() {
				t.Errorf("answer %+v, want code %q and message %q", e, tc.code, tc.err.Error())
			}
			if got := rec.Header().Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tc.retryAfter)
			}
		})
	}
}

// With auth on, a request without a valid bearer token is 401 with
// WWW-Authenticate; a principal is refused (403) what its role or its
// queue and group patterns do not cover, whether the path or the body
// names the resource; nothing refused reaches the broker.
func TestAuthorization(t *testing.T) {
	const items = `{"items":[{"queue":"a1","payload":1},{"queue":"b","payload":2}]}`
	tokens := map[string]auth.Principal{
		"reader": {Name: "r", Role: auth.ReadOnly},
		"scoped": {Name: "s", Role: auth.ReadWrite, Queues: []string{"a*"}, Groups: []string{"g"}},
	}
	for _, tc := range []struct {
		name, method, target, body, authz string
		status                            int
		called                            string // the broker method that runs, or must not when the answer is an error
	}{
		{"no token", "POST", "/api/v1/push", `{"items":[]}`, "", 401, "Push"},
		{"not a bearer token", "POST", "/api/v1/push", `{"items":[]}`, "Basic cjpy", 401, "Push"},
		{"unknown token", "POST", "/api/v1/push", `{"items":[]}`, "Bearer nobody", 401, "Push"},
		{"JWT not configured", "POST", "/api/v1/push", `{"items":[]}`, "Bearer a.b.c", 401, "Push"},
		{"no token for a read", "GET", "/api/v1/pop/queue/a1", "", "", 401, "Pop"},
		{"reader pushes", "POST", "/api/v1/push", `{"items":[{"queue":"a1","payload":1}]}`, "Bearer reader", 403, "Push"},
		{"reader deletes a queue", "DELETE", "/api/v1/resources/queues/a1", "", "Bearer reader", 403, "DeleteTopic"},
		{"reader pops", "GET", "/api/v1/pop/queue/b", "", "Bearer reader", 204, "Pop"},
		{"scoped pushes its queue", "POST", "/api/v1/push", `{"items":[{"queue":"a1","payload":1}]}`, "Bearer scoped", 201, "Push"},
		{"scoped pushes another queue", "POST", "/api/v1/push", `{"items":[{"queue":"b","payload":1}]}`, "Bearer scoped", 403, "Push"},
		{"scoped pushes one item of another queue", "POST", "/api/v1/push", items, "Bearer scoped", 403, "Push"},
		{"scoped fetches another queue", "POST", "/api/v1/fetch", `{"entries":[{"queue":"b","offset":0}]}`, "Bearer scoped", 403, "Fetch"},
		{"scoped pops another queue", "GET", "/api/v1/pop/queue/b", "", "Bearer scoped", 403, "Pop"},
		{"scoped pops for another group", "GET", "/api/v1/pop/queue/a1?consumerGroup=h", "", "Bearer scoped", 403, "Pop"},
		{"scoped pops its queue for its group", "GET", "/api/v1/pop/queue/a1?consumerGroup=g", "", "Bearer scoped", 204, "Pop"},
		{"scoped acks for another group", "POST", "/api/v1/ack", `{"transactionId":"t","consumerGroup":"h"}`, "Bearer scoped", 403, "Ack"},
		{"scoped extends a lease on another queue", "POST", "/api/v1/lease/L-b/extend", `{"seconds":30}`, "Bearer scoped", 403, "ExtendLease"},
		{"scoped extends a lease on its queue", "POST", "/api/v1/lease/L-a1/extend", `{"seconds":30}`, "Bearer scoped", 200, "ExtendLease"},
		// Queue mode (no consumer group): the lease's queue decides, for a
		// group-scoped principal too (it could pop and then never ack).
		{"scoped pops its queue in queue mode", "GET", "/api/v1/pop/queue/a1", "", "Bearer scoped", 204, "Pop"},
		{"scoped acks in queue mode on its queue", "POST", "/api/v1/ack", `{"transactionId":"t","partitionId":"1","leaseId":"Q-a1"}`, "Bearer scoped", 200, "Ack"},
		{"scoped acks in queue mode on another queue", "POST", "/api/v1/ack", `{"transactionId":"t","partitionId":"1","leaseId":"Q-b"}`, "Bearer scoped", 403, "Ack"},
		{"scoped extends a queue-mode lease on its queue", "POST", "/api/v1/lease/Q-a1/extend", `{"seconds":30}`, "Bearer scoped", 200, "ExtendLease"},
		{"bootstrap token pushes anywhere", "POST", "/api/v1/push", items, "Bearer boot", 201, "Push"},
		{"public route without a token", "GET", "/api/v1/openapi.json", "", "", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBroker{tokens: tokens, leaseOwner: func(id string) (string, string, bool, error) {
				if queue, ok := strings.CutPrefix(id, "Q-"); ok {
					return broker.DefaultGroup, queue, true, nil // a queue-mode lease
				}
				return "g", strings.TrimPrefix(id, "L-"), true, nil
			}}
			s := newTestServer(f, Options{Auth: AuthConfig{Enabled: true, BootstrapToken: "boot"}})
			var header []string
			if tc.authz != "" {
				header = append(header, "Authorization: "+tc.authz)
			}
			rec := do(s, tc.method, tc.target, tc.body, header...)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			want := map[int]string{401: "unauthenticated", 403: "forbidden"}[tc.status]
			if want == "" {
				if tc.called != "" && !f.called(tc.called) {
					t.Errorf("allowed, but the broker's %s was not called: %v", tc.called, f.calls)
				}
				return
			}
			if e := errorOf(t, rec); e.Code != want {
				t.Errorf("code %q, want %q", e.Code, want)
			}
			if got := rec.Header().Values("WWW-Authenticate"); (tc.status == 401) != (len(got) == 1 && got[0] == `Bearer realm="waggle"`) {
				t.Errorf("WWW-Authenticate %q on a %d", got, tc.status)
			}
			if f.called(tc.called) {
				t.Errorf("refused, but the broker's %s was called: %v", tc.called, f.calls)
			}
		})
	}
}

// A push answers 201 with one result per item in the broker's order:
// message_id and offset for a stored item, null for an item in error.
func TestPushAnswersEachItem(t *testing.T) {
	var got []broker.PushItem
	f := &fakeBroker{push: func(items []broker.PushItem) ([]broker.PushResult, error) {
		got = items
		return []broker.PushResult{
			{Index: 0, MessageID: "m-1", TransactionID: "t-1", Queue: "orders", Partition: "Default", Status: broker.StatusQueued, Offset: 7},
			{Index: 1, MessageID: "m-0", TransactionID: "t-0", Queue: "orders", Partition: "p", Status: broker.StatusDuplicate, Offset: 3},
			{Index: 2, TransactionID: "t-2", Queue: "orders", Partition: "p", Status: broker.StatusError, Error: "transactionId too long"},
		}, nil
	}}
	rec := do(newTestServer(f, Options{}), "POST", "/api/v1/push", `{"items":[
		{"queue":"orders","transactionId":"t-1","payload":{"amount":12}},
		{"queue":"orders","partition":"p","transactionId":"t-0","payload":[1]},
		{"queue":"orders","partition":"p","transactionId":"t-2","payload":"x"}]}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	jsonEqual(t, rec.Body.Bytes(), `[
		{"index":0,"message_id":"m-1","transaction_id":"t-1","queueName":"orders","partition":"Default","status":"queued","offset":7},
		{"index":1,"message_id":"m-0","transaction_id":"t-0","queueName":"orders","partition":"p","status":"duplicate","offset":3},
		{"index":2,"message_id":null,"transaction_id":"t-2","queueName":"orders","partition":"p","status":"error","offset":null,"error":"transactionId too long"}]`)
	// The client package reads the same answer: snake-case ids, null
	// for an item in error.
	var read []client.PushResult
	if err := json.Unmarshal(rec.Body.Bytes(), &read); err != nil || len(read) != 3 {
		t.Fatalf("as client.PushResult: %v %+v", err, read)
	}
	if r := read[0]; r.MessageID == nil || *r.MessageID != "m-1" || r.TransactionID != "t-1" || r.Offset == nil || *r.Offset != 7 {
		t.Errorf("a stored item as the client reads it: %+v", r)
	}
	if r := read[2]; r.MessageID != nil || r.Offset != nil || r.Status != "error" || r.Error != "transactionId too long" {
		t.Errorf("an item in error as the client reads it: %+v", r)
	}
	want := []broker.PushItem{
		{Queue: "orders", TransactionID: "t-1", Payload: []byte(`{"amount":12}`)},
		{Queue: "orders", Partition: "p", TransactionID: "t-0", Payload: []byte(`[1]`)},
		{Queue: "orders", Partition: "p", TransactionID: "t-2", Payload: []byte(`"x"`)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the broker got\n  %q\nwant\n  %q", got, want)
	}
}

// A pop passes its query to the broker and answers the leased messages,
// or 204 with no body when there are none.
func TestPopAnswersLeasedMessages(t *testing.T) {
	var got broker.PopRequest
	msgs := []broker.PoppedMessage{
		{Record: broker.Record{Offset: 4, MessageID: "m-4", TransactionID: "t-4", Payload: []byte(`{"n":4}`), TimestampMs: 1_700_000_000_000},
			Partition: "p", PartitionID: "9", LeaseID: "L", Group: "billing", DeliveryAttempt: 2},
		// Produced over Kafka: no message id, a payload that is not JSON.
		{Record: broker.Record{Offset: 5, TransactionID: "kafka:5", Payload: []byte("raw"), TimestampMs: 1_700_000_001_000, FromKafka: true, Key: []byte("k")},
			Partition: "p", PartitionID: "9", LeaseID: "L", Group: "billing", DeliveryAttempt: 1},
	}
	f := &fakeBroker{pop: func(r broker.PopRequest) ([]broker.PoppedMessage, error) {
		got = r
		return msgs, nil
	}}
	s := newTestServer(f, Options{})
	rec := do(s, "GET", "/api/v1/pop/queue/orders/partition/p?consumerGroup=billing&batch=10&leaseSeconds=60&wait=true&timeout=2500&subscriptionMode=new", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	jsonEqual(t, rec.Body.Bytes(), `{"leaseId":"L","messages":[
		{"id":"m-4","transactionId":"t-4","partition":"p","partitionId":"9","offset":4,"data":{"n":4},
		 "createdAt":"2023-11-14T22:13:20Z","leaseId":"L","consumerGroup":"billing","deliveryAttempt":2},
		{"id":"kafka:5","transactionId":"kafka:5","partition":"p","partitionId":"9","offset":5,"data":{"key":"aw==","value":"cmF3"},
		 "createdAt":"2023-11-14T22:13:21Z","leaseId":"L","consumerGroup":"billing","deliveryAttempt":1}]}`)
	want := broker.PopRequest{Queue: "orders", Partition: "p", Group: "billing", Batch: 10, Wait: 2500 * time.Millisecond, LeaseSeconds: 60, FromNew: true}
	if got != want {
		t.Errorf("the broker got %+v, want %+v", got, want)
	}

	msgs = nil
	rec = do(s, "GET", "/api/v1/pop/queue/orders", "")
	if rec.Code != http.StatusNoContent || rec.Body.Len() != 0 {
		t.Errorf("no messages: %d %q, want 204 and no body", rec.Code, rec.Body)
	}
	if want := (broker.PopRequest{Queue: "orders"}); got != want {
		t.Errorf("defaults: the broker got %+v, want %+v", got, want)
	}
}

// An ack answers one result per acknowledgment; in a batch, an item naming
// another group than the batch's reaches the broker without a partition,
// so the broker refuses it on its own.
func TestAckAnswersEachAcknowledgment(t *testing.T) {
	var gotGroup string
	var gotAcks []broker.AckRequest
	f := &fakeBroker{ack: func(group string, acks []broker.AckRequest) ([]command.AckResult, error) {
		gotGroup, gotAcks = group, acks
		out := make([]command.AckResult, len(acks))
		for i, a := range acks {
			if a.PartitionID == "" {
				out[i] = command.AckResult{Error: "no such lease"}
			} else {
				out[i] = command.AckResult{Success: true, LeaseReleased: i == len(acks)-1, DeadLettered: a.Status == "dlq"}
			}
		}
		return out, nil
	}}
	s := newTestServer(f, Options{})

	rec := do(s, "POST", "/api/v1/ack", `{"transactionId":"t-1","partitionId":"9","leaseId":"L","consumerGroup":"billing","status":"failed","error":"boom"}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	jsonEqual(t, rec.Body.Bytes(), `[{"index":0,"transactionId":"t-1","success":true,"leaseReleased":true,"dlq":false}]`)
	if want := []broker.AckRequest{{TransactionID: "t-1", PartitionID: "9", LeaseID: "L", Status: "failed", Error: "boom"}}; gotGroup != "billing" || !reflect.DeepEqual(gotAcks, want) {
		t.Errorf("the broker got %q %+v, want billing %+v", gotGroup, gotAcks, want)
	}

	rec = do(s, "POST", "/api/v1/ack/batch", `{"consumerGroup":"billing","acknowledgments":[
		{"transactionId":"t-1","partitionId":"9","leaseId":"L","status":"dlq"},
		{"transactionId":"t-2","partitionId":"9","leaseId":"L","consumerGroup":"other","status":"completed"},
		{"transactionId":"t-3","partitionId":"9","leaseId":"L","consumerGroup":"billing","status":"completed"}]}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("batch: status %d: %s", rec.Code, rec.Body)
	}
	jsonEqual(t, rec.Body.Bytes(), `[
		{"index":0,"transactionId":"t-1","success":true,"leaseReleased":false,"dlq":true},
		{"index":1,"transactionId":"t-2","success":false,"error":"no such lease","leaseReleased":false,"dlq":false},
		{"index":2,"transactionId":"t-3","success":true,"leaseReleased":true,"dlq":false}]`)
	if gotGroup != "billing" || len(gotAcks) != 3 || gotAcks[1].PartitionID != "" || gotAcks[2].PartitionID != "9" {
		t.Errorf("batch: the broker got %q %+v", gotGroup, gotAcks)
	}
}

// On a follower a write is forwarded; with no leader known, a forwarded
// request arriving, or the leader unreachable, it is answered 503
// no_leader with Retry-After and nothing written here. Reads stay local.
func TestFollowerWrites(t *testing.T) {
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	goneAddr := gone.Addr().String()
	gone.Close() // nothing listens there now: the dial is refused

	for _, tc := range []struct {
		name       string
		f          *fakeBroker
		header     []string
		status     int
		awaited    bool // AwaitLeaderHTTPAddr was asked
		pushedHere bool
	}{
		{"no leader known", &fakeBroker{follower: true}, nil, 503, true, false},
		{"forwarded to a follower", &fakeBroker{follower: true, leaderAddr: goneAddr}, []string{forwardedHeader + ": 1"}, 503, false, false},
		{"leader unreachable", &fakeBroker{follower: true, leaderAddr: goneAddr}, nil, 503, true, false},
		{"elected meanwhile", &fakeBroker{follower: true, wonLocally: true}, nil, 201, true, true},
		{"leader", &fakeBroker{}, nil, 201, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(tc.f, Options{})
			t.Cleanup(s.peers.forward.CloseIdleConnections)
			rec := do(s, "POST", "/api/v1/push", `{"items":[{"queue":"q","payload":1}]}`, tc.header...)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if tc.status == 503 {
				if e := errorOf(t, rec); e.Code != "no_leader" || rec.Header().Get("Retry-After") != "1" {
					t.Errorf("answer %+v with Retry-After %q, want no_leader and 1", e, rec.Header().Get("Retry-After"))
				}
			}
			if tc.f.called("AwaitLeaderHTTPAddr") != tc.awaited || tc.f.called("Push") != tc.pushedHere {
				t.Errorf("calls %v", tc.f.calls)
			}
		})
	}

	f := &fakeBroker{follower: true}
	if rec := do(newTestServer(f, Options{}), "POST", "/api/v1/fetch", `{"entries":[{"queue":"q","offset":0}]}`); rec.Code != 200 || !f.called("Fetch") || f.called("IsLeader") {
		t.Errorf("a fetch on a follower: %d %s, calls %v; want it answered here", rec.Code, rec.Body, f.calls)
	}
}

// A follower forwards a write to the leader's HTTP address, body and
// headers unchanged and marked with its node id, and relays the answer.
func TestFollowerForwardsToTheLeader(t *testing.T) {
	type seen struct{ method, path, body, authz, by string }
	got := make(chan seen, 1)
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.RequestURI(), string(body), r.Header.Get("Authorization"), r.Header.Get(forwardedHeader)}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `[{"from":"leader"}]`)
	}))
	defer leader.Close()
	f := &fakeBroker{follower: true, leaderAddr: strings.TrimPrefix(leader.URL, "http://"),
		tokens: map[string]auth.Principal{"w": {Name: "w", Role: auth.ReadWrite}}}
	s := newTestServer(f, Options{Auth: AuthConfig{Enabled: true}})
	defer s.peers.forward.CloseIdleConnections()

	const body = `{"items":[{"queue":"q","payload":1}]}`
	rec := do(s, "POST", "/api/v1/push?x=1", body, "Authorization: Bearer w")
	if rec.Code != http.StatusCreated || strings.TrimSpace(rec.Body.String()) != `[{"from":"leader"}]` {
		t.Fatalf("relayed answer %d %q", rec.Code, rec.Body)
	}
	if got, want := <-got, (seen{"POST", "/api/v1/push?x=1", body, "Bearer w", "2"}); got != want {
		t.Errorf("the leader got %+v, want %+v", got, want)
	}
	if f.called("Push") {
		t.Errorf("the follower pushed itself: %v", f.calls)
	}
}

// Regression: the chaos test's sampler saw a group's committed offset go
// back, read from a leader elected a moment before that had not applied
// the commits the old leader acknowledged. Such a leader answers 503
// catching_up until it has.
func TestGroupReadOnANewLeaderStillApplyingIsRefused(t *testing.T) {
	cursors := map[string][]broker.Cursor{"g": {{Queue: "q", Partition: "0", Committed: 7}}}
	f := &fakeBroker{applying: true, cursors: cursors}
	rec := do(newTestServer(f, Options{}), "GET", "/api/v1/consumer-groups/g", "")
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("status %d, Retry-After %q: %s; want 503 and 1", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if e := errorOf(t, rec); e.Code != "catching_up" || f.called("GroupPartitions") {
		t.Fatalf("answer %+v after calls %v, want catching_up before reading", e, f.calls)
	}

	f = &fakeBroker{cursors: cursors}
	rec = do(newTestServer(f, Options{}), "GET", "/api/v1/consumer-groups/g", "")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"offset":7`) {
		t.Fatalf("caught-up leader: %d %s, want the committed offset 7", rec.Code, rec.Body)
	}
}
