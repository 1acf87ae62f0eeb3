package httpapi

import (
	"bytes"
	"crypto/sha256"
	"io"
	"net/http"
	"unicode/utf8"

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
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", "reading the body: "+err.Error())
			return
		}
		digest := sha256.New()
		io.WriteString(digest, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+"\n")
		digest.Write(body)
		var k broker.RequestKey
		k.Key = key
		copy(k.BodyHash[:], digest.Sum(nil))
		r.Body = io.NopCloser(bytes.NewReader(body))
		h(w, r.WithContext(broker.WithRequestKey(r.Context(), k)))
	}
}
