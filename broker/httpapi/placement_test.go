package httpapi

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/payload"
	"github.com/waggle-mq/waggle/router"
)

// newGroupsServer is the HTTP API of a node with one fake broker per raft
// group.
func newGroupsServer(groups int) (*Server, []*fakeBroker) {
	fakes := make([]*fakeBroker, groups)
	brokers := make([]Broker, groups)
	for g := range fakes {
		fakes[g] = &fakeBroker{}
		brokers[g] = fakes[g]
	}
	return newTestServer(fakes[0], Options{Groups: brokers, Forwarding: brokers}), fakes
}

// queueIn is a queue name that placement puts in group g of groups.
func queueIn(t *testing.T, g uint32, groups int) string {
	t.Helper()
	for i := range 100 {
		if name := fmt.Sprintf("q%d", i); router.Group(name, groups) == g {
			return name
		}
	}
	t.Fatalf("no queue name in group %d", g)
	return ""
}

// With several groups, a push reaches the broker of its queues' group
// with its items as sent (the body placing it decoded is the one the
// handler uses), and a push naming queues of two groups reaches none.
func TestPushIsServedByItsQueuesGroup(t *testing.T) {
	s, fakes := newGroupsServer(3)
	for g := range uint32(3) {
		var got []broker.PushItem
		fakes[g].push = func(items []broker.PushItem) ([]broker.PushResult, error) {
			got = items
			return make([]broker.PushResult, len(items)), nil
		}
		q := queueIn(t, g, 3)
		rec := do(s, "POST", "/api/v1/push", fmt.Sprintf(`{"items":[{"queue":%q,"transactionId":"a","payload":1},{"queue":%q,"partition":"p","transactionId":"b","payload":{"x":[2]}}]}`, q, q))
		if rec.Code != http.StatusCreated {
			t.Fatalf("group %d: status %d: %s", g, rec.Code, rec.Body)
		}
		want := []broker.PushItem{{Queue: q, TransactionID: "a", Payload: []byte("1")}, {Queue: q, Partition: "p", TransactionID: "b", Payload: []byte(`{"x":[2]}`)}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("group %d's broker got %q, want %q", g, got, want)
		}
		for other := range uint32(3) {
			if other != g && fakes[other].called("Push") {
				t.Errorf("a push to group %d's queue reached group %d", g, other)
			}
		}
		fakes[g].calls = nil
	}

	rec := do(s, "POST", "/api/v1/push", fmt.Sprintf(`{"items":[{"queue":%q,"transactionId":"a"},{"queue":%q,"transactionId":"b"}]}`, queueIn(t, 0, 3), queueIn(t, 2, 3)))
	if e := errorOf(t, rec); rec.Code != http.StatusBadRequest || e.Code != "cross_group" {
		t.Errorf("a push across groups: %d %+v, want 400 cross_group", rec.Code, e)
	}
	for g, f := range fakes {
		if f.called("Push") {
			t.Errorf("a push across groups reached group %d", g)
		}
	}
}

// A push body that does not decode is answered as with one group: placing
// it decodes it by the same rules and leaves the answer to the handler.
func TestBadPushesAreAnsweredAlikeWithGroups(t *testing.T) {
	for _, tc := range []struct{ name, body, code string }{
		{"truncated JSON", `{"items":[`, "bad_json"},
		{"two JSON values", `{"items":[]} {}`, "bad_json"},
		{"invalid UTF-8", "{\"items\":[{\"queue\":\"q\",\"transactionId\":\"\xff\"}]}", "bad_json"},
		{"misspelt field", `{"items":[{"queue":"q","transactonId":"t"}]}`, "unknown_field"},
		{"items not a list", `{"items":"q"}`, "bad_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			one := do(newTestServer(&fakeBroker{}, Options{}), "POST", "/api/v1/push", tc.body)
			s, fakes := newGroupsServer(3)
			several := do(s, "POST", "/api/v1/push", tc.body)
			if one.Code != several.Code || one.Body.String() != several.Body.String() {
				t.Errorf("one group answers %d %s, three groups %d %s", one.Code, one.Body, several.Code, several.Body)
			}
			if e := errorOf(t, several); e.Code != tc.code {
				t.Errorf("code %q, want %q", e.Code, tc.code)
			}
			for g, f := range fakes {
				if f.called("Push") {
					t.Errorf("group %d's broker was called", g)
				}
			}
		})
	}
}

// BenchmarkPushHandler measures the HTTP layer's work for one push of 100
// messages (100-byte random payloads) over a fake broker, with one raft
// group and with three (where the push is also placed by its queue).
//
//	go test ./broker/httpapi -run '^$' -bench PushHandler
func BenchmarkPushHandler(b *testing.B) {
	src := payload.New(1, false)
	var body bytes.Buffer
	body.WriteString(`{"items":[`)
	for i := range 100 {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"queue":"orders","transactionId":"tx-%d","payload":%s}`, i, src.JSON(100))
	}
	body.WriteString(`]}`)
	for _, groups := range []int{1, 3} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			s, fakes := newGroupsServer(groups)
			if groups == 1 {
				s = newTestServer(fakes[0], Options{})
			}
			for _, f := range fakes {
				f.push = func(items []broker.PushItem) ([]broker.PushResult, error) {
					f.calls = nil
					return make([]broker.PushResult, len(items)), nil
				}
			}
			b.SetBytes(int64(body.Len()))
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest("POST", "/api/v1/push", bytes.NewReader(body.Bytes()))
				rec := httptest.NewRecorder()
				s.ServeHTTP(rec, r)
				if rec.Code != http.StatusCreated {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
