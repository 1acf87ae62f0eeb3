package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/client"
	"github.com/waggle-mq/waggle/command"
)

// fakeBroker stands in for *broker.Service in the handler tests. It
// records every call by method name; a method whose func field is nil
// answers zero values and no error. Methods the tests never reach are
// left to the embedded nil Broker, so calling one panics.
type fakeBroker struct {
	Broker

	calls []string
	// noKeyedWrites: the cluster's log format does not carry keyed writes.
	noKeyedWrites bool
	requestKeys   []broker.RequestKey // the keys the keyed calls carried, in order

	follower   bool   // IsLeader answers !follower
	leaderAddr string // on a follower, AwaitLeaderHTTPAddr's answer; "" is no leader known
	wonLocally bool   // on a follower, AwaitLeaderHTTPAddr answers that this node became the leader
	applying   bool   // LeaderCaughtUp answers !applying

	tokens map[string]auth.Principal // TokenPrincipal; a token not in it is unknown

	push        func([]broker.PushItem) ([]broker.PushResult, error)
	fetch       func([]broker.FetchRequest) ([]broker.FetchResult, error)
	pop         func(broker.PopRequest) ([]broker.PoppedMessage, error)
	ack         func(group string, acks []broker.AckRequest) ([]command.AckResult, error)
	leaseOwner  func(leaseID string) (group, queue string, found bool, err error)
	extendLease func(leaseID string, seconds int64) (command.ExtendLeaseResult, error)
	cursors     map[string][]broker.Cursor // GroupPartitions by group
}

var _ Broker = (*fakeBroker)(nil)

func (f *fakeBroker) called(method string) bool { return slices.Contains(f.calls, method) }

func (f *fakeBroker) ServesReads() bool { return true }

func (f *fakeBroker) ACLSet() *auth.ACLSet { return nil }

func (f *fakeBroker) LeaderCaughtUp() bool { return !f.applying }

func (f *fakeBroker) IsLeader() bool {
	f.calls = append(f.calls, "IsLeader")
	return !f.follower
}

func (f *fakeBroker) AwaitLeaderHTTPAddr(context.Context) (string, bool, error) {
	f.calls = append(f.calls, "AwaitLeaderHTTPAddr")
	switch {
	case f.wonLocally:
		return "", true, nil
	case f.leaderAddr == "":
		return "", false, broker.ErrNotLeader
	}
	return f.leaderAddr, false, nil
}

func (f *fakeBroker) NodeID() string {
	f.calls = append(f.calls, "NodeID")
	return "2"
}

func (f *fakeBroker) TokenPrincipal(token string) (auth.Principal, bool, error) {
	f.calls = append(f.calls, "TokenPrincipal")
	p, ok := f.tokens[token]
	return p, ok, nil
}

func (f *fakeBroker) KeyedWrites() bool { return !f.noKeyedWrites }

func (f *fakeBroker) Push(ctx context.Context, items []broker.PushItem) ([]broker.PushResult, error) {
	f.calls = append(f.calls, "Push")
	if k, ok := broker.RequestKeyOf(ctx); ok {
		f.requestKeys = append(f.requestKeys, k)
	}
	if f.push == nil {
		return nil, nil
	}
	return f.push(items)
}

func (f *fakeBroker) Fetch(reqs []broker.FetchRequest) ([]broker.FetchResult, error) {
	f.calls = append(f.calls, "Fetch")
	if f.fetch == nil {
		return nil, nil
	}
	return f.fetch(reqs)
}

func (f *fakeBroker) Pop(_ context.Context, r broker.PopRequest) ([]broker.PoppedMessage, error) {
	f.calls = append(f.calls, "Pop")
	if f.pop == nil {
		return nil, nil
	}
	return f.pop(r)
}

func (f *fakeBroker) Ack(_ context.Context, group string, acks []broker.AckRequest) ([]command.AckResult, error) {
	f.calls = append(f.calls, "Ack")
	if f.ack == nil {
		return nil, nil
	}
	return f.ack(group, acks)
}

func (f *fakeBroker) LeaseOwner(leaseID string) (string, string, bool, error) {
	f.calls = append(f.calls, "LeaseOwner")
	if f.leaseOwner == nil {
		return "", "", false, nil
	}
	return f.leaseOwner(leaseID)
}

func (f *fakeBroker) ExtendLease(leaseID string, seconds int64) (command.ExtendLeaseResult, error) {
	f.calls = append(f.calls, "ExtendLease")
	if f.extendLease == nil {
		return command.ExtendLeaseResult{}, nil
	}
	return f.extendLease(leaseID, seconds)
}

func (f *fakeBroker) GroupPartitions(group string) ([]broker.Cursor, error) {
	f.calls = append(f.calls, "GroupPartitions")
	return f.cursors[group], nil
}

// newTestServer is the HTTP API over f.
func newTestServer(f *fakeBroker, opts Options) *Server {
	return New(f, slog.New(slog.NewTextHandler(io.Discard, nil)), opts)
}

// do serves one request; header holds "Name: value" lines.
func do(s *Server, method, target, body string, header ...string) *httptest.ResponseRecorder {
	var r *http.Request
	if body == "" {
		r = httptest.NewRequest(method, target, nil)
	} else {
		r = httptest.NewRequest(method, target, strings.NewReader(body))
	}
	for _, h := range header {
		name, value, _ := strings.Cut(h, ": ")
		r.Header.Set(name, value)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, r)
	return rec
}

// errorOf checks that rec is an error answer, exactly {"error","code"} in
// JSON with a message, and returns it as the client package reads it.
func errorOf(t *testing.T, rec *httptest.ResponseRecorder) client.ErrorBody {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.DisallowUnknownFields()
	var e client.ErrorBody
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("error answer %q is not {\"error\",\"code\"}: %v", rec.Body, err)
	}
	if e.Error == "" || e.Code == "" {
		t.Errorf("error answer %q lacks a message or a code", rec.Body)
	}
	return e
}

// jsonEqual checks that got is the JSON document want, whatever the order
// of object members.
func jsonEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("answer %q is not JSON: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expectation %q: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("answer\n  %s\nwant\n  %s", bytes.TrimSpace(got), want)
	}
}
