package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/store"
)

// IdempotencyKeyHeader names a write for keyed apply: the same key sent
// again within the window (10 minutes) gets the first answer, whatever the
// write, instead of being applied twice.
const IdempotencyKeyHeader = "Idempotency-Key"

// keyed passes a write that carries an Idempotency-Key to the broker keyed
// by it and by a digest of the request (method, path, query and body), so
// the key sent again with another request is refused rather than answered
// with the first one's outcome. It runs on the leader; a follower forwards
// the header with the request.
func (s *Server) keyed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(IdempotencyKeyHeader)
		if key == "" {
			h(w, r)
			return
		}
		if len(key) > store.MaxRequestKeyBytes || !utf8.ValidString(key) {
			writeError(w, http.StatusBadRequest, "invalid_request", "Idempotency-Key must be valid UTF-8 of at most 255 bytes")
			return
		}
		// One byte over the limit is enough for the handler to answer 413.
		body, err := readBody(io.LimitReader(r.Body, MaxBodyBytes+1), r.ContentLength)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", "reading the body: "+err.Error())
			return
		}
		digest := sha256.New()
		// The parsed query, re-encoded: a forward may drop parameters it
		// cannot parse, and the leader must see the same digest either way.
		io.WriteString(digest, r.Method+" "+r.URL.Path+"?"+r.URL.Query().Encode()+"\n")
		digest.Write(body)
		var k broker.RequestKey
		k.Key = key
		copy(k.BodyHash[:], digest.Sum(nil))
		r.Body = io.NopCloser(bytes.NewReader(body))
		h(w, r.WithContext(broker.WithRequestKey(r.Context(), k)))
	}
}

// keyedRetryDeadline bounds how long the node that took a keyed write
// retries it across leader changes before answering outcome_unknown.
const keyedRetryDeadline = 10 * time.Second

// keyedWrite serves a write on the leader, applied keyed by its
// Idempotency-Key (see keyed). The node that takes the request from the
// client mints a key when it carries none (unless mint is false: a push
// relies on its transactionIds) and, until keyedRetryDeadline, sends the
// request again under the same key whenever the answer leaves the outcome
// open (no_leader, outcome_unknown, a forward that broke off): a retry of
// an applied write gets its first answer, so the client sees
// outcome_unknown only when no leader answered in that time.
func (s *Server) keyedWrite(h http.HandlerFunc, mint bool) http.HandlerFunc {
	serve := s.leaderOnly(s.keyed(h))
	return func(w http.ResponseWriter, r *http.Request) {
		// The node that forwarded it retries; and before the cluster
		// carries keyed writes (a rolling upgrade) nothing makes a retry
		// safe: a client's key is refused there (upgrade_in_progress).
		b := s.b(r)
		if _, ok := s.elsewhere(r); ok {
			b = s.svc // relayed: the cluster's format as group 0 has it
		}
		if r.Header.Get(forwardedHeader) != "" || !b.KeyedWrites() {
			serve(w, r)
			return
		}
		if r.Header.Get(IdempotencyKeyHeader) == "" {
			if !mint {
				serve(w, r)
				return
			}
			r.Header.Set(IdempotencyKeyHeader, uuid.Must(uuid.NewV7()).String())
		}
		body, err := readBody(io.LimitReader(r.Body, MaxBodyBytes+1), r.ContentLength)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", "reading the body: "+err.Error())
			return
		}
		if len(body) > MaxBodyBytes {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", "request body over 1 MiB")
			return
		}
		r.ContentLength = int64(len(body)) // what a forward sends
		deadline := time.Now().Add(keyedRetryDeadline)
		for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
			answer := &bufferedAnswer{header: http.Header{}, code: http.StatusOK}
			r.Body = io.NopCloser(bytes.NewReader(body))
			serve(answer, r)
			if !answer.outcomeOpen() || time.Now().Add(wait).After(deadline) {
				answer.sendTo(w)
				return
			}
			select {
			case <-time.After(wait):
			case <-r.Context().Done():
				answer.sendTo(w)
				return
			}
		}
	}
}

// bufferedAnswer holds an answer until it is known to be the last one.
type bufferedAnswer struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (a *bufferedAnswer) Header() http.Header         { return a.header }
func (a *bufferedAnswer) WriteHeader(code int)        { a.code = code }
func (a *bufferedAnswer) Write(b []byte) (int, error) { return a.body.Write(b) }

// outcomeOpen reports whether the answer leaves open whether the write was
// applied, or says nothing was for want of a leader: both are worth
// another try under the same key.
func (a *bufferedAnswer) outcomeOpen() bool {
	if a.code != http.StatusServiceUnavailable {
		return false
	}
	var e errorBody
	return json.Unmarshal(a.body.Bytes(), &e) == nil && (e.Code == "no_leader" || e.Code == "outcome_unknown")
}

func (a *bufferedAnswer) sendTo(w http.ResponseWriter) {
	for k, v := range a.header {
		w.Header()[k] = v
	}
	w.WriteHeader(a.code)
	w.Write(a.body.Bytes())
}
