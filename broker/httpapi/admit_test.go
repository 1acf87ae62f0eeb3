package httpapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/client"
)

// Once the request bodies being worked on fill the in-flight budget, a
// write is answered 429 overloaded with Retry-After before anything reads
// its body or reaches the broker; bodiless reads pass; room comes back as
// requests finish.
func TestOverloadIsAnswered429(t *testing.T) {
	s := New(nil, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{InFlightBytes: 64 << 10})
	if !s.inFlight.TryAcquire(60 << 10) { // requests already in progress
		t.Fatal("budget")
	}
	body := strings.Repeat("x", 8<<10)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/push", strings.NewReader(body)))
	var e client.ErrorBody
	json.Unmarshal(rec.Body.Bytes(), &e)
	if rec.Code != http.StatusTooManyRequests || e.Code != "overloaded" || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("full budget: %d %+v, Retry-After %q", rec.Code, e, rec.Header().Get("Retry-After"))
	}
	release, ok := s.admit(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/health", nil))
	if !ok {
		t.Fatal("a GET was refused for want of body budget")
	}
	release()
	s.inFlight.Release(60 << 10)
	release, ok = s.admit(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/api/v1/push", strings.NewReader(body)))
	if !ok {
		t.Fatal("refused with the budget free")
	}
	release()
	if !s.inFlight.TryAcquire(64 << 10) {
		t.Fatal("an admitted request did not give its room back")
	}
}

// A request whose handler ends in a panic, as a forward does when the
// leader breaks off mid-answer (http.ErrAbortHandler), gives its room in
// the budget back; a DELETE with a body counts against the budget.
func TestAbortedRequestReleasesItsRoom(t *testing.T) {
	f := &fakeBroker{push: func([]broker.PushItem) ([]broker.PushResult, error) { panic(http.ErrAbortHandler) }}
	s := New(f, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{InFlightBytes: 64 << 10})
	srv := httptest.NewServer(s)
	defer srv.Close()
	for range 20 { // 20 x 8 KiB: without the release the budget runs out
		resp, err := http.Post(srv.URL+"/api/v1/push", "application/json", strings.NewReader(`{"items":[{"queue":"q","payload":1}]}`+strings.Repeat(" ", 8<<10)))
		if err == nil {
			resp.Body.Close()
		}
	}
	if !s.inFlight.TryAcquire(64 << 10) {
		t.Fatal("aborted requests kept their room in the in-flight budget")
	}
	s.inFlight.Release(64 << 10)

	s.inFlight.TryAcquire(60 << 10)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodDelete, "/api/v1/dlq", strings.NewReader(strings.Repeat("x", 8<<10))))
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("a DELETE with an 8 KiB body into a full budget: %d", rec.Code)
	}
}
