package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Every malformed request gets a 4xx with {"error","code"} and writes
// nothing: the queue listing is the same before and after.
func TestBadInputIsRefusedAndWritesNothing(t *testing.T) {
	n := startSingle(t)
	n.push(pushItem{Queue: "existing", TransactionID: "seed", Payload: 1})
	var before any
	getJSON(t, n.url("/api/v1/resources/queues"), &before)

	big := `{"items":[{"queue":"existing","payload":"` + strRepeat(2<<20) + `"}]}`
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"malformed JSON", "POST", "/api/v1/push", `{"items":[`, 400, "bad_json"},
		{"empty body", "POST", "/api/v1/push", ``, 400, "bad_json"},
		{"trailing data", "POST", "/api/v1/push", `{"items":[]} {}`, 400, "bad_json"},
		{"items not a list", "POST", "/api/v1/push", `{"items":{"queue":"q"}}`, 400, "bad_type"},
		{"queue not a string", "POST", "/api/v1/push", `{"items":[{"queue":5,"payload":1}]}`, 400, "bad_type"},
		{"missing queue", "POST", "/api/v1/push", `{"items":[{"payload":1}]}`, 400, "invalid_request"},
		{"missing queue in a later item", "POST", "/api/v1/push", `{"items":[{"queue":"new1","payload":1},{"payload":1}]}`, 400, "invalid_request"},
		{"missing payload", "POST", "/api/v1/push", `{"items":[{"queue":"new2"}]}`, 400, "invalid_request"},
		{"no items", "POST", "/api/v1/push", `{"items":[]}`, 400, "invalid_request"},
		{"misspelt transactionId", "POST", "/api/v1/push", `{"items":[{"queue":"new3","txnId":"x","payload":1}]}`, 400, "unknown_field"},
		{"bad queue name", "POST", "/api/v1/push", `{"items":[{"queue":"a b","payload":1}]}`, 400, "invalid_request"},
		{"queue name too long", "POST", "/api/v1/push", `{"items":[{"queue":"` + strRepeat(250) + `","payload":1}]}`, 400, "invalid_request"},
		{"oversized body", "POST", "/api/v1/push", big, 413, "too_large"},
		{"unknown option", "POST", "/api/v1/configure", `{"queue":"existing","options":{"dedupWindowSecs":5}}`, 400, "unknown_field"},
		{"negative window", "POST", "/api/v1/configure", `{"queue":"existing","options":{"dedupWindowSeconds":-1}}`, 400, "invalid_request"},
		{"window not a number", "POST", "/api/v1/configure", `{"queue":"existing","options":{"dedupWindowSeconds":"60"}}`, 400, "bad_type"},
		{"configure without queue", "POST", "/api/v1/configure", `{"options":{}}`, 400, "invalid_request"},
		{"fetch negative offset", "POST", "/api/v1/fetch", `{"entries":[{"queue":"existing","offset":-1}]}`, 400, "bad_type"},
		{"fetch huge maxBytes", "POST", "/api/v1/fetch", `{"entries":[{"queue":"existing","offset":0,"maxBytes":1000000000}]}`, 400, "invalid_request"},
		{"fetch nothing", "POST", "/api/v1/fetch", `{"entries":[]}`, 400, "invalid_request"},
		{"wrong method", "GET", "/api/v1/push", ``, 405, "method_not_allowed"},
		{"unknown route", "GET", "/api/v1/nope", ``, 404, "not_found"},
		{"unknown queue", "GET", "/api/v1/resources/queues/nope", ``, 404, "not_found"},
		{"unknown consumer group", "GET", "/api/v1/consumer-groups/nope", ``, 404, "not_found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e errorAnswer
			status := do(t, tc.method, n.url(tc.path), []byte(tc.body), &e)
			if status != tc.status || e.Code != tc.code || e.Error == "" {
				t.Fatalf("status %d %+v; want %d with code %q and a message", status, e, tc.status, tc.code)
			}
		})
	}
	var after any
	getJSON(t, n.url("/api/v1/resources/queues"), &after)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("refused requests changed state:\nbefore %v\nafter  %v", before, after)
	}
}

func TestOverlongTransactionIDIsAnItemError(t *testing.T) {
	n := startSingle(t)
	got := n.push(
		pushItem{Queue: "q", TransactionID: strRepeat(65536), Payload: 1},
		pushItem{Queue: "q", TransactionID: strRepeat(65535), Payload: 2},
	)
	if got[0].Status != "error" || got[0].Error == "" || got[0].Offset != nil || got[0].MessageID != nil {
		t.Fatalf("overlong id answered %+v; want an item error without offset or message_id", got[0])
	}
	requireStatus(t, got[1], "queued", 0)
	if recs := n.fetchAll("q", "Default").Entries[0].Records; len(recs) != 1 {
		t.Fatalf("partition holds %d messages, want only the valid one", len(recs))
	}
}

func TestConfigureListAndFetch(t *testing.T) {
	n := startSingle(t)
	var q queueAnswer
	if status := postJSON(t, n.url("/api/v1/configure"), map[string]any{"queue": "orders", "options": map[string]any{"dedupWindowSeconds": 60}}, &q); status != http.StatusOK {
		t.Fatalf("configure: %d", status)
	}
	if q.Name != "orders" || q.Options.DedupWindowSeconds != 60 {
		t.Fatalf("configure answered %+v", q)
	}
	// Options merge: an empty options object keeps the window.
	postJSON(t, n.url("/api/v1/configure"), map[string]any{"queue": "orders", "options": map[string]any{}}, &q)
	if q.Options.DedupWindowSeconds != 60 {
		t.Fatalf("empty options reset the window to %d", q.Options.DedupWindowSeconds)
	}
	var items []pushItem
	for i := range 5 {
		items = append(items, pushItem{Queue: "orders", Partition: "eu", TransactionID: fmt.Sprint("o", i), Payload: map[string]any{"i": i, "pad": strings.Repeat("p", 100)}})
	}
	n.push(items...)
	n.push(pushItem{Queue: "auto", Payload: true}) // created by its first push

	var one queueAnswer
	getJSON(t, n.url("/api/v1/resources/queues/orders"), &one)
	if len(one.Partitions) != 1 || one.Partitions[0].Name != "eu" || one.Partitions[0].NextOffset != 5 {
		t.Fatalf("queue orders: %+v", one)
	}
	var all struct{ Queues []queueAnswer }
	getJSON(t, n.url("/api/v1/resources/queues"), &all)
	if len(all.Queues) != 2 || all.Queues[0].Name != "auto" || all.Queues[0].Options.DedupWindowSeconds != 3600 || all.Queues[1].Name != "orders" {
		t.Fatalf("queue list: %+v", all.Queues)
	}

	var f fetchAnswer
	postJSON(t, n.url("/api/v1/fetch"), map[string]any{"entries": []map[string]any{
		{"queue": "orders", "partition": "eu", "offset": 2, "maxBytes": 150},
		{"queue": "nope", "offset": 0},
		{"queue": "orders", "partition": "us", "offset": 0},
	}}, &f)
	if len(f.Entries) != 3 {
		t.Fatalf("fetch answered %d entries", len(f.Entries))
	}
	e := f.Entries[0]
	// maxBytes 150 holds one ~115-byte payload but not two.
	if e.HighWatermark != 5 || len(e.Records) != 1 || e.Records[0].Offset != 2 || e.Records[0].TransactionID != "o2" || e.Records[0].Timestamp == 0 {
		t.Fatalf("fetch from offset 2: %+v", e)
	}
	if f.Entries[1].Error == "" || f.Entries[2].Error == "" {
		t.Fatalf("unknown queue/partition answered without error: %+v", f.Entries[1:])
	}
}

func TestHealthAndEnvironmentConfiguration(t *testing.T) {
	// The HTTP address comes from WAGGLE_HTTP_ADDR; the flag is not given.
	n := newNode(t, 7)
	n.extraEnv = []string{"WAGGLE_NODE_ID=7"}
	n.start()
	n.waitLeader()
	var h healthAnswer
	if status := getJSON(t, n.url("/health"), &h); status != http.StatusOK {
		t.Fatalf("health: %d", status)
	}
	if h.Status != "healthy" || h.Raft.Role != "leader" || h.Raft.Leader == nil || *h.Raft.Leader != 7 || h.Raft.Term == 0 {
		t.Fatalf("health %+v", h)
	}
	n.push(pushItem{Queue: "q", Payload: 1})
	getJSON(t, n.url("/health"), &h)
	if h.Raft.Applied < 2 || h.Raft.Commit < h.Raft.Applied {
		t.Fatalf("after a write: commit %d applied %d", h.Raft.Commit, h.Raft.Applied)
	}
}
