package httpapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
	var e errorBody
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
