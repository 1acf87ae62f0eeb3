package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/twmb/franz-go/pkg/kgo"
)

// openAPICheck sends requests to a node and holds each request and answer
// to the OpenAPI document the node itself serves.
type openAPICheck struct {
	t      *testing.T
	n      *node
	doc    *openapi3.T
	router routers.Router
	// covered counts the validated exchanges per operation ("GET /path").
	covered map[string]int
	total   int
}

// newOpenAPICheck fetches /api/v1/openapi.json from n, which must load and
// validate as an OpenAPI 3 document.
func newOpenAPICheck(t *testing.T, n *node) *openAPICheck {
	t.Helper()
	resp, err := client.Get(n.url("/api/v1/openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/openapi.json: status %d, %v", resp.StatusCode, err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatalf("load the served document: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the served document is not valid OpenAPI: %v", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &openAPICheck{t: t, n: n, doc: doc, router: router, covered: map[string]int{}}
}

// How a request is held to the document.
const (
	validRequest   = iota // the document must accept it
	invalidRequest        // it is wrong on purpose: the document must refuse it too
)

// call sends a request as the bootstrap admin, requires status want and an
// answer the document allows, and returns the answer's body. A non-nil
// body that is not a string is sent as JSON; a string is sent as it is.
func (c *openAPICheck) call(method, path string, body any, want int) []byte {
	c.t.Helper()
	return c.exchange(bootstrapToken, method, path, body, validRequest, want)
}

// refused sends a request the document must refuse, and holds the server's
// error answer (status want) to the document.
func (c *openAPICheck) refused(method, path string, body any, want int) []byte {
	c.t.Helper()
	return c.exchange(bootstrapToken, method, path, body, invalidRequest, want)
}

func (c *openAPICheck) exchange(token, method, path string, body any, mode, want int) []byte {
	c.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			c.t.Fatal(err)
		}
	}
	newRequest := func() *http.Request {
		var r io.Reader = http.NoBody
		if raw != nil {
			r = bytes.NewReader(raw)
		}
		req, err := http.NewRequest(method, c.n.url(path), r)
		if err != nil {
			c.t.Fatal(err)
		}
		if raw != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		return req
	}
	what := method + " " + path

	// The request, as the document sees it.
	vreq := newRequest()
	route, params, err := c.router.FindRoute(vreq)
	if err != nil {
		c.t.Fatalf("%s: the document has no operation for it: %v", what, err)
	}
	op := route.Method + " " + route.Path
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true, MultiError: true}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: opts}
	reqErr := openapi3filter.ValidateRequest(context.Background(), in)
	switch {
	case mode == validRequest && reqErr != nil:
		c.t.Errorf("%s (%s): the document refuses the request: %v", what, op, reqErr)
	case mode == invalidRequest && reqErr == nil:
		c.t.Errorf("%s (%s): the document accepts a request the test sends as wrong", what, op)
	}

	// The answer, as the server gives it.
	resp, err := client.Do(newRequest())
	if err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
	if resp.StatusCode != want {
		c.t.Fatalf("%s: status %d, want %d: %s", what, resp.StatusCode, want, answer)
	}
	if route.Operation.Responses.Status(resp.StatusCode) == nil {
		c.t.Errorf("%s (%s): status %d is not in the document (only under default)", what, op, resp.StatusCode)
	}
	in.Request = newRequest() // ValidateRequest consumed the first one's body
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(answer)), Options: opts}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		c.t.Errorf("%s (%s): status %d answer does not match the document: %v\nanswer: %.2000s", what, op, resp.StatusCode, err, answer)
	}
	c.covered[op]++
	c.total++
	return answer
}

// outside sends a request the document has no operation for (a method a
// path does not take, a path no route serves) and requires status want
// with the document's Error schema.
func (c *openAPICheck) outside(method, path string, want int) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.n.url(path), nil)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, _, err := c.router.FindRoute(req); err == nil {
		c.t.Fatalf("%s %s: the document has an operation for it", method, path)
	}
	req.Header.Set("Authorization", "Bearer "+bootstrapToken)
	resp, err := client.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var body any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != want {
		c.t.Fatalf("%s %s: status %d, want %d; body: %v", method, path, resp.StatusCode, want, err)
	}
	if err := c.doc.Components.Schemas["Error"].Value.VisitJSON(body); err != nil {
		c.t.Errorf("%s %s: status %d answer is not the document's Error: %v", method, path, want, err)
	}
	c.total++
}

// decode reads an answer the test needs values from.
func (c *openAPICheck) decode(raw []byte, out any) {
	c.t.Helper()
	if err := json.Unmarshal(raw, out); err != nil {
		c.t.Fatalf("undecodable answer %q: %v", raw, err)
	}
}

// report logs what was validated and which operations no request reached.
func (c *openAPICheck) report() {
	var missed []string
	ops := 0
	for path, item := range c.doc.Paths.Map() {
		for method := range item.Operations() {
			ops++
			if c.covered[method+" "+path] == 0 {
				missed = append(missed, method+" "+path)
			}
		}
	}
	slices.Sort(missed)
	c.t.Logf("validated %d requests and answers over %d of the document's %d operations", c.total, ops-len(missed), ops)
	if len(missed) > 0 {
		c.t.Logf("not exercised: %s", strings.Join(missed, ", "))
	}
}

// Every route a client uses, driven against a real node (with --auth, as
// the bootstrap admin), and each request and answer held to the OpenAPI
// document the node serves: successes, duplicates, rollbacks and errors.
func TestOpenAPIDocumentMatchesTheServer(t *testing.T) {
	n := startSecured(t)
	c := newOpenAPICheck(t, n)
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
	defer openapi3filter.UnregisterBodyDecoder("text/html")
	defer c.report()

	// Public pages and the cluster.
	c.call("GET", "/health", nil, 200)
	c.call("GET", "/api/v1/openapi.json", nil, 200)
	c.call("GET", "/", nil, 200)
	c.call("GET", "/metrics", nil, 200)
	c.call("GET", "/api/v1/cluster", nil, 200)
	c.call("GET", "/api/v1/auth/whoami", nil, 200)
	c.exchange("", "GET", "/api/v1/resources/queues", nil, validRequest, 401)
	c.outside("PUT", "/api/v1/push", 405)
	c.outside("GET", "/api/v1/no-such-route", 404)

	// Queues.
	c.call("POST", "/api/v1/configure", map[string]any{"queue": "oa.orders", "options": map[string]any{"dedupWindowSeconds": 3600, "retryLimit": 1}}, 200)
	c.refused("POST", "/api/v1/configure", map[string]any{"queue": "oa.orders", "options": map[string]any{"retryLimits": 1}}, 400)
	c.call("GET", "/api/v1/resources/queues", nil, 200)
	c.call("GET", "/api/v1/resources/queues/oa.orders", nil, 200)
	c.call("GET", "/api/v1/resources/queues/oa.nothing", nil, 404)

	// Push: stored, duplicate, an item in error; then bad requests.
	items := []map[string]any{
		{"queue": "oa.orders", "transactionId": "o-1", "payload": map[string]any{"amount": 12}},
		{"queue": "oa.orders", "partition": "p2", "transactionId": "o-2", "payload": "x"},
		{"queue": "oa.orders", "partition": "p3", "transactionId": "o-3", "payload": []int{1, 2}},
		{"queue": "oa.orders", "partition": "p4", "transactionId": "o-4", "payload": nil},
	}
	c.call("POST", "/api/v1/push", map[string]any{"items": items}, 201)
	var dup []pushAnswer
	c.decode(c.call("POST", "/api/v1/push", map[string]any{"items": items[:1]}, 201), &dup)
	if dup[0].Status != "duplicate" {
		t.Fatalf("a repeated push answered %+v", dup[0])
	}
	var inError []pushAnswer
	c.decode(c.call("POST", "/api/v1/push", map[string]any{"items": []map[string]any{{"queue": "oa.orders", "transactionId": strRepeat(1 << 16), "payload": 1}}}, 201), &inError)
	if inError[0].Status != "error" || inError[0].MessageID != nil {
		t.Fatalf("an overlong transactionId answered %+v", inError[0])
	}
	c.refused("POST", "/api/v1/push", `{"items":[{"queue":"oa.orders","payload":1}`, 400)
	c.refused("POST", "/api/v1/push", map[string]any{"items": []map[string]any{{"queue": "oa.orders", "txnId": "x", "payload": 1}}}, 400)
	c.refused("POST", "/api/v1/push", map[string]any{"items": []map[string]any{{"queue": 7, "payload": 1}}}, 400)
	c.refused("POST", "/api/v1/push", map[string]any{"items": []map[string]any{}}, 400)
	c.refused("POST", "/api/v1/push", `{"items":[],"pad":"`+strRepeat(1<<20)+`"}`, 413)

	// Fetch, with an entry of an unknown queue.
	c.call("POST", "/api/v1/fetch", map[string]any{"entries": []map[string]any{{"queue": "oa.orders", "offset": 0, "maxBytes": 1 << 20}, {"queue": "oa.nothing"}}}, 200)

	// Pop, ack, extend, dead letters.
	var pop popAnswer
	c.decode(c.call("GET", "/api/v1/pop/queue/oa.orders?consumerGroup=billing&batch=10&leaseSeconds=30", nil, 200), &pop)
	m := pop.Messages[0]
	c.call("POST", "/api/v1/lease/"+pop.LeaseID+"/extend", map[string]any{"seconds": 60}, 200)
	c.call("POST", "/api/v1/lease/no-such-lease/extend", map[string]any{"seconds": 60}, 200)
	c.call("POST", "/api/v1/ack", map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "consumerGroup": "billing", "status": "completed"}, 200)
	c.decode(c.call("GET", "/api/v1/pop/queue/oa.orders/partition/p2?consumerGroup=billing&subscriptionMode=all", nil, 200), &pop)
	m = pop.Messages[0]
	c.call("POST", "/api/v1/ack/batch", map[string]any{"consumerGroup": "billing", "acknowledgments": []map[string]any{
		{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "dlq", "error": "cannot bill"},
		{"transactionId": "nothing", "partitionId": "not-an-id", "leaseId": m.LeaseID, "status": "completed"},
	}}, 200)
	c.call("GET", "/api/v1/pop/queue/oa.orders/partition/p2?consumerGroup=billing&wait=true&timeout=50", nil, 204)
	c.refused("GET", "/api/v1/pop/queue/oa.orders?batch=many", nil, 400)
	c.refused("GET", "/api/v1/pop/queue/oa.orders?subscriptionMode=latest", nil, 400)
	c.call("GET", "/api/v1/pop/queue/oa.nothing", nil, 404)
	var dl struct {
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
	}
	c.decode(c.call("GET", "/api/v1/dlq?queue=oa.orders", nil, 200), &dl)
	if len(dl.Messages) != 1 {
		t.Fatalf("dead letters: %+v", dl)
	}
	c.call("GET", "/api/v1/dlq", nil, 200)
	c.call("POST", "/api/v1/dlq/"+dl.Messages[0].ID+"/replay", nil, 200)
	c.call("POST", "/api/v1/dlq/"+dl.Messages[0].ID+"/replay", nil, 200) // the first copy, as a duplicate
	c.call("GET", "/api/v1/dlq?queue=oa.orders", nil, 200)               // listed as replayed
	c.call("POST", "/api/v1/dlq/999999/replay", nil, 404)
	c.call("DELETE", "/api/v1/dlq/"+dl.Messages[0].ID, nil, 200)
	c.call("DELETE", "/api/v1/dlq/"+dl.Messages[0].ID, nil, 404)
	c.call("DELETE", "/api/v1/dlq?queue=oa.orders", nil, 200)
	c.call("DELETE", "/api/v1/dlq?queue=oa.nosuch", nil, 404)

	// Consumer groups.
	c.call("GET", "/api/v1/consumer-groups", nil, 200)
	c.call("GET", "/api/v1/consumer-groups/billing", nil, 200)
	c.call("POST", "/api/v1/consumer-groups/billing/queues/oa.orders/seek", map[string]any{"toEnd": true}, 200)
	c.call("POST", "/api/v1/consumer-groups/billing/queues/oa.orders/seek", map[string]any{"offset": 0}, 200)
	c.call("POST", "/api/v1/consumer-groups/billing/queues/oa.nothing/seek", map[string]any{"toEnd": true}, 404)
	c.call("GET", "/api/v1/consumer-groups/nobody", nil, 404)
	c.call("DELETE", "/api/v1/consumer-groups/billing", nil, 200)

	// KV: every op, a required op that loses, the one-row routes, once.
	c.call("POST", "/api/v1/kv", map[string]any{"operations": []map[string]any{
		{"op": "put", "ns": "oa", "key": "a", "value": map[string]any{"n": 1}, "ttlSeconds": 3600},
		{"op": "putIfAbsent", "ns": "oa", "key": "b", "value": "x", "forever": true},
		{"op": "incr", "ns": "oa", "key": "count", "forever": true, "max": 10},
		{"op": "get", "ns": "oa", "key": "a"},
		{"op": "getMany", "ns": "oa", "keys": []string{"a", "missing"}},
		{"op": "getPrefix", "ns": "oa", "prefix": "", "limit": 10},
		{"op": "check", "ns": "oa", "key": "b", "expect": 1},
		{"op": "delete", "ns": "oa", "key": "none"},
	}}, 200)
	var lost struct {
		OK bool `json:"ok"`
	}
	c.decode(c.call("POST", "/api/v1/kv", map[string]any{"operations": []map[string]any{
		{"op": "putIfAbsent", "ns": "oa", "key": "b", "value": "y", "forever": true, "required": true},
	}}, 200), &lost)
	if lost.OK {
		t.Fatal("a required putIfAbsent on a present key won")
	}
	c.call("POST", "/api/v1/kv", map[string]any{"operations": []map[string]any{{"op": "put", "ns": "oa", "key": "c", "value": 1}}}, 400)
	c.call("PUT", "/api/v1/kv/oa/row", map[string]any{"value": []string{"v"}, "forever": true}, 200)
	c.call("GET", "/api/v1/kv/oa/row", nil, 200)
	c.call("GET", "/api/v1/kv/oa/absent", nil, 404)
	c.call("DELETE", "/api/v1/kv/oa/row", nil, 200)
	c.call("POST", "/api/v1/kv/once", map[string]any{"ns": "oa", "key": "nightly", "ttlSeconds": 60}, 200)
	c.call("POST", "/api/v1/kv/once", map[string]any{"ns": "oa", "key": "nightly", "ttlSeconds": 60}, 200)

	// Transactions: committed (an ack, a push, KV, a timer), then rolled
	// back on a duplicate and on a KV precondition.
	c.decode(c.call("GET", "/api/v1/pop/queue/oa.orders/partition/p3?consumerGroup=mailer", nil, 200), &pop)
	m = pop.Messages[0]
	payload := base64.StdEncoding.EncodeToString([]byte(`{"remind":true}`))
	txn := map[string]any{
		"operations": []map[string]any{
			{"type": "ack", "transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "consumerGroup": "mailer", "status": "completed"},
			{"type": "push", "items": []map[string]any{{"queue": "oa.mails", "transactionId": "mail-1", "payload": "hello"}}},
		},
		"kv":     []map[string]any{{"op": "putIfAbsent", "ns": "oa", "key": "mail-1", "value": true, "forever": true, "required": true}},
		"timers": []map[string]any{{"op": "schedule", "queue": "oa.mails", "timerKey": "t-1", "delayMs": 3600000, "txn": "t-1", "payload": payload}},
	}
	for _, tc := range []struct {
		body   map[string]any
		reason string // of the rollback; empty: committed
	}{
		{txn, ""},
		{map[string]any{"operations": txn["operations"].([]map[string]any)[1:]}, "duplicate"},
		{map[string]any{"kv": txn["kv"]}, "kv_precondition"},
	} {
		var got txnAnswer
		c.decode(c.call("POST", "/api/v1/transaction", tc.body, 200), &got)
		if got.Success != (tc.reason == "") || got.Reason != tc.reason {
			t.Fatalf("transaction %v: %+v, want rollback reason %q", tc.body, got, tc.reason)
		}
	}
	c.refused("POST", "/api/v1/transaction", map[string]any{"operations": []map[string]any{{"type": "move"}}}, 400)

	// Timers.
	c.call("POST", "/api/v1/timers", map[string]any{"operations": []map[string]any{
		{"op": "schedule", "queue": "oa.mails", "timerKey": "t-2", "delayMs": 3600000, "txn": "t-2", "payload": payload},
		{"op": "cancel", "queue": "oa.mails", "timerKey": "t-1"},
	}}, 200)
	c.call("GET", "/api/v1/timers/oa.mails", nil, 200)
	c.call("DELETE", "/api/v1/timers/oa.mails/t-2", nil, 200)
	c.call("DELETE", "/api/v1/timers/oa.mails/t-2", nil, 200)
	c.refused("POST", "/api/v1/timers", map[string]any{"operations": []map[string]any{{"op": "schedule", "queue": "oa.mails", "timerKey": "t-3", "payload": "%%"}}}, 400)

	// Cluster administration: what a single node can do without losing
	// its quorum.
	var h healthAnswer
	c.decode(c.call("GET", "/health", nil, 200), &h)
	c.call("POST", "/api/v1/cluster/register", map[string]any{"id": fmt.Sprint(h.NodeID), "httpAddr": n.httpAddr, "kafkaAddr": n.kafkaAddr}, 200)
	c.call("POST", "/api/v1/cluster/snapshot", nil, 200)
	c.call("GET", "/api/v1/cluster/backup", nil, 200)
	c.refused("POST", "/api/v1/cluster/nodes", map[string]any{"id": 0, "raftAddr": "nowhere"}, 400)
	c.call("DELETE", "/api/v1/cluster/nodes/7", nil, 404)

	// Users and tokens.
	c.call("POST", "/api/v1/auth/users", map[string]any{"name": "oa-user", "password": "oa-secret", "role": "read-only", "queues": []string{"oa.*"}}, 200)
	c.call("GET", "/api/v1/auth/users", nil, 200)
	c.call("DELETE", "/api/v1/auth/users/oa-user", nil, 200)
	c.call("DELETE", "/api/v1/auth/users/oa-user", nil, 404)
	c.call("POST", "/api/v1/auth/tokens", map[string]any{"name": "oa-token", "role": "read-write", "groups": []string{"billing"}}, 200)
	c.refused("POST", "/api/v1/auth/tokens", map[string]any{"name": "oa-token2", "role": "admin", "password": "x"}, 400)
	c.call("GET", "/api/v1/auth/tokens", nil, 200)
	c.call("DELETE", "/api/v1/auth/tokens/oa-token", nil, 200)

	// More client mistakes: each a 400, none a 500.
	c.call("POST", "/api/v1/consumer-groups/billing/queues/oa.orders/seek", map[string]any{"toEnd": true, "offset": 1}, 400)
	c.refused("POST", "/api/v1/lease/"+pop.LeaseID+"/extend", map[string]any{"seconds": 0}, 400)
	c.refused("DELETE", "/api/v1/cluster/nodes/abc", nil, 400)
	c.call("GET", "/api/v1/kv/__waggle/x", nil, 400)
	c.call("POST", "/api/v1/fetch", map[string]any{"entries": []map[string]any{{"queue": "no spaces"}}}, 400)
	c.call("GET", "/api/v1/pop/queue/no%20spaces", nil, 400)
	c.refused("POST", "/api/v1/configure", map[string]any{"queue": "oa.orders", "options": map[string]any{"partitions": 0}}, 400)

	// A queue deleted, then gone.
	c.call("DELETE", "/api/v1/resources/queues/oa.orders", nil, 200)
	c.call("DELETE", "/api/v1/resources/queues/oa.orders", nil, 404)
	c.call("GET", "/api/v1/resources/queues/oa.orders", nil, 404)
}

// Records produced over Kafka read over HTTP with their key and headers,
// a value that is not JSON in its base64 envelope: fetch, pop and dead
// letters as the document describes them.
func TestOpenAPIDocumentMatchesKafkaRecords(t *testing.T) {
	n := startSingle(t)
	c := newOpenAPICheck(t, n)
	defer func() { t.Logf("validated %d requests and answers", c.total) }()
	cl := newTopic(t, n.kafkaAddr, "oa.kafka", 1)
	produceSync(t, cl,
		&kgo.Record{Key: []byte("k1"), Value: []byte(`{"json":true}`), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}, {Key: "empty"}}},
		&kgo.Record{Value: []byte("not json")},
		&kgo.Record{Key: []byte("tombstone")},
	)
	var f struct {
		Entries []struct {
			Records []struct {
				Key     []byte          `json:"key"`
				Headers []any           `json:"headers"`
				Payload json.RawMessage `json:"payload"`
			} `json:"records"`
		} `json:"entries"`
	}
	c.decode(c.call("POST", "/api/v1/fetch", map[string]any{"entries": []map[string]any{{"queue": "oa.kafka", "partition": "0"}}}, 200), &f)
	if len(f.Entries) != 1 || len(f.Entries[0].Records) != 3 {
		t.Fatalf("fetch: %+v", f)
	}
	if r := f.Entries[0].Records; string(r[0].Key) != "k1" || len(r[0].Headers) != 2 || !strings.Contains(string(r[1].Payload), `"value"`) {
		t.Fatalf("fetched Kafka records without their key, headers or envelope: %+v", r)
	}
	var pop popAnswer
	c.decode(c.call("GET", "/api/v1/pop/queue/oa.kafka?batch=3", nil, 200), &pop)
	acks := []map[string]any{}
	for _, m := range pop.Messages {
		acks = append(acks, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "dlq"})
	}
	c.call("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": acks}, 200)
	c.call("GET", "/api/v1/dlq?queue=oa.kafka", nil, 200)

	// A Kafka group member: the group's answer carries its membership.
	groupMember(t, []string{n.kafkaAddr}, "oa.kgroup", "oa.kafka")
	var g struct {
		Kafka *struct {
			Members []struct{} `json:"members"`
		} `json:"kafka"`
	}
	waitFor(t, 20*time.Second, func() error {
		c.decode(c.call("GET", "/api/v1/consumer-groups/oa.kgroup", nil, 200), &g)
		if g.Kafka == nil || len(g.Kafka.Members) != 1 {
			return fmt.Errorf("the group's answer lacks its Kafka member: %+v", g.Kafka)
		}
		return nil
	})
}

// A node started with --join and not added yet knows no leader: its
// /health is a 503 with the health body, /api/v1/cluster says it is not a
// member, and a write is a 503 no_leader with Retry-After.
func TestOpenAPIDocumentMatchesANodeWithoutLeader(t *testing.T) {
	n := withArgs(newNode(t, 2), []string{"--join"})
	n.start()
	waitFor(t, 10*time.Second, func() error {
		if status := getJSON(t, n.url("/health"), nil); status != http.StatusServiceUnavailable {
			return fmt.Errorf("health status %d", status)
		}
		return nil
	}, n.logTail)
	c := newOpenAPICheck(t, n)
	defer func() { t.Logf("validated %d requests and answers", c.total) }()
	c.call("GET", "/health", nil, 503)
	var cl struct {
		NotAMember string `json:"notAMember"`
	}
	c.decode(c.call("GET", "/api/v1/cluster", nil, 200), &cl)
	if cl.NotAMember == "" {
		t.Fatal("a node not added yet does not say so")
	}
	c.call("POST", "/api/v1/push", map[string]any{"items": []map[string]any{{"queue": "oa.orders", "payload": 1}}}, 503)
}
