package client

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// stepClock is a clock that moves only when slept on; install puts it
// into a client.
type stepClock struct {
	at   time.Time
	naps []time.Duration
}

func (k *stepClock) install(c *Client) {
	c.Now = func() time.Time { return k.at }
	c.Sleep = func(d time.Duration) { k.naps = append(k.naps, d); k.at = k.at.Add(d) }
}

// answering serves the answers in turn, one a request (the last one for
// every request after), and counts the requests.
func answering(t *testing.T, answers ...func(w http.ResponseWriter)) (*httptest.Server, *int) {
	t.Helper()
	n := new(int)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		answers[min(*n, len(answers)-1)](w)
		*n++
	}))
	t.Cleanup(srv.Close)
	return srv, n
}

func status(code int, retryAfter, body string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

func TestErrorFormatting(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  Error
		want string
	}{
		{"a waggle answer", Error{Status: 404, Code: "not_found", Msg: "no queue q", URL: "http://n:1/api/v1/resources/queues/q"},
			"no queue q (not_found, HTTP 404)"},
		{"a waggle answer with Retry-After", Error{Status: 503, Code: "no_leader", Msg: "no leader yet", RetryAfter: time.Second},
			"no leader yet (no_leader, HTTP 503)"},
		{"a foreign answer", Error{Status: 404, URL: "http://n:1/api/v1/x"},
			"http://n:1/api/v1/x answered HTTP 404, not a waggle answer (is this a waggle node?)"},
		{"a foreign 400 over http: perhaps a TLS port", Error{Status: 400, URL: "http://n:1/api/v1/x"},
			"http://n:1/api/v1/x answered HTTP 400, not a waggle answer (if the node serves TLS, use https:// (and --ca-file))"},
		{"a foreign 400 over https", Error{Status: 400, URL: "https://n:1/api/v1/x"},
			"https://n:1/api/v1/x answered HTTP 400, not a waggle answer (is this a waggle node?)"},
		{"a foreign 502 over http", Error{Status: 502, URL: "http://n:1/health"},
			"http://n:1/health answered HTTP 502, not a waggle answer (is this a waggle node?)"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestErrorRetryable(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
		want   bool
	}{
		{503, "no_leader", true},
		{503, "outcome_unknown", true},
		{503, "upgrade_in_progress", true},
		{503, "", true}, // a proxy in front of a node that is starting
		{429, "overloaded", true},
		{400, "invalid_request", false},
		{404, "not_found", false},
		{409, "answer_not_kept", false},
		{422, "idempotency_key_reused", false},
		{500, "internal", false},
		{502, "", false},
		{507, "storage_full", false},
	} {
		if got := (&Error{Status: tc.status, Code: tc.code}).Retryable(); got != tc.want {
			t.Errorf("HTTP %d %s: Retryable() = %v, want %v", tc.status, tc.code, got, tc.want)
		}
	}
}

// An error answer becomes an *Error with its body's code and message, the
// request's URL and the Retry-After in whole seconds (ignored when not a
// positive number).
func TestErrorAnswers(t *testing.T) {
	for _, tc := range []struct {
		name       string
		answer     func(w http.ResponseWriter)
		want       Error
		retryAfter time.Duration
	}{
		{"waggle's shape", status(404, "", `{"error":"no queue q","code":"not_found"}`),
			Error{Status: 404, Code: "not_found", Msg: "no queue q"}, 0},
		{"with Retry-After", status(503, "2", `{"error":"no leader","code":"no_leader"}`),
			Error{Status: 503, Code: "no_leader", Msg: "no leader"}, 2 * time.Second},
		{"Retry-After 0", status(429, "0", `{"error":"busy","code":"overloaded"}`),
			Error{Status: 429, Code: "overloaded", Msg: "busy"}, 0},
		{"Retry-After as a date", status(503, "Wed, 21 Oct 2015 07:28:00 GMT", `{"error":"x","code":"no_leader"}`),
			Error{Status: 503, Code: "no_leader", Msg: "x"}, 0},
		{"not JSON", status(502, "", `<html>bad gateway</html>`), Error{Status: 502}, 0},
		{"no body", status(500, "", ``), Error{Status: 500}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := answering(t, tc.answer)
			c := New(srv.URL)
			c.RetryFor = 0
			code, err := c.Call(http.MethodPost, "/api/v1/x?y=1", map[string]int{"a": 1}, nil)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T), want an *Error", err, err)
			}
			tc.want.URL, tc.want.RetryAfter = srv.URL+"/api/v1/x?y=1", tc.retryAfter
			if *e != tc.want || code != tc.want.Status {
				t.Errorf("status %d, error %+v, want %+v", code, *e, tc.want)
			}
		})
	}
}

// Call, CallRetry and CallKeyed retry what the server asked to be sent
// again, waiting as Retry-After says or else 100 ms doubling to 2 s, until
// RetryFor has passed; a POST through Call, an answer that is not
// retryable and RetryFor 0 are tried once.
func TestRetries(t *testing.T) {
	busy := status(503, "", `{"error":"no leader","code":"no_leader"}`)
	ok := status(200, "", `{"ok":true}`)
	for _, tc := range []struct {
		name     string
		call     func(c *Client) (int, error)
		retryFor time.Duration
		answers  []func(w http.ResponseWriter)
		tries    int
		naps     []time.Duration
		gaveUp   bool // the error says it gave up
		fails    bool
	}{
		{"a GET through Call", func(c *Client) (int, error) { return c.Call(http.MethodGet, "/x", nil, nil) },
			10 * time.Second, []func(http.ResponseWriter){busy, busy, busy, ok}, 4,
			[]time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}, false, false},
		{"Retry-After is obeyed", func(c *Client) (int, error) { return c.CallRetry(http.MethodPost, "/x", nil, nil) },
			10 * time.Second, []func(http.ResponseWriter){status(429, "3", `{"error":"busy","code":"overloaded"}`), ok}, 2,
			[]time.Duration{3 * time.Second}, false, false},
		{"the pause stops doubling at 2 s", func(c *Client) (int, error) { return c.CallRetry(http.MethodGet, "/x", nil, nil) },
			time.Minute, []func(http.ResponseWriter){busy, busy, busy, busy, busy, busy, busy, ok}, 8,
			[]time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
				1600 * time.Millisecond, 2 * time.Second, 2 * time.Second}, false, false},
		{"gives up past RetryFor", func(c *Client) (int, error) { return c.CallKeyed(http.MethodPost, "/x", nil, nil) },
			time.Second, []func(http.ResponseWriter){busy}, 4, // at 0, 0.1, 0.3 and 0.7 s; 1.5 s is past
			[]time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}, true, true},
		{"a POST through Call is sent once", func(c *Client) (int, error) { return c.Call(http.MethodPost, "/x", nil, nil) },
			10 * time.Second, []func(http.ResponseWriter){busy, ok}, 1, nil, false, true},
		{"RetryFor 0", func(c *Client) (int, error) { return c.CallRetry(http.MethodGet, "/x", nil, nil) },
			0, []func(http.ResponseWriter){busy, ok}, 1, nil, false, true},
		{"an answer that is not retryable", func(c *Client) (int, error) { return c.CallRetry(http.MethodGet, "/x", nil, nil) },
			10 * time.Second, []func(http.ResponseWriter){status(500, "", `{"error":"disk on fire","code":"internal"}`), ok}, 1, nil, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, tries := answering(t, tc.answers...)
			c := New(srv.URL)
			c.RetryFor = tc.retryFor
			clock := &stepClock{at: time.Unix(0, 0)}
			clock.install(c)
			_, err := tc.call(c)
			if (err != nil) != tc.fails || *tries != tc.tries {
				t.Fatalf("%d tries, error %v; want %d tries, failing %v", *tries, err, tc.tries, tc.fails)
			}
			if !slices.Equal(clock.naps, tc.naps) {
				t.Errorf("paused %v, want %v", clock.naps, tc.naps)
			}
			var e *Error
			if tc.fails && !errors.As(err, &e) {
				t.Errorf("error %v does not unwrap to the server's *Error", err)
			}
			if gaveUp := err != nil && strings.Contains(err.Error(), "gave up after retrying for "+tc.retryFor.String()+" (--retry-timeout)"); gaveUp != tc.gaveUp {
				t.Errorf("error %v: says it gave up %v, want %v", err, gaveUp, tc.gaveUp)
			}
		})
	}
}

// A keyed write (kv once, kv put and delete, ack) is sent again under the
// same Idempotency-Key while the server answers 503: a retry after an
// outcome the client could not learn gets the first answer. Each call
// mints its own key.
func TestRetriesAKeyedWriteUnderOneKey(t *testing.T) {
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		if len(keys) < 3 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":"the leader went away","code":"outcome_unknown"}`))
			return
		}
		w.Write([]byte(`{"won":true}`))
	}))
	defer srv.Close()
	c := New(srv.URL)
	c.RetryFor = 10 * time.Second
	clock := &stepClock{at: time.Unix(0, 0)}
	clock.install(c)
	var out struct{ Won bool }
	if _, err := c.CallKeyed(http.MethodPost, "/api/v1/kv/once", map[string]any{"ns": "n", "key": "k"}, &out); err != nil || !out.Won {
		t.Fatalf("once through two 503s: %v %+v", err, out)
	}
	if len(keys) != 3 || keys[0] == "" || keys[0] != keys[1] || keys[1] != keys[2] {
		t.Fatalf("the tries carried keys %q, want one key three times", keys)
	}
	if len(clock.naps) != 2 || clock.naps[0] != time.Second {
		t.Errorf("paused %v between tries, want Retry-After's 1s twice", clock.naps)
	}
	if _, err := c.CallKeyed(http.MethodPost, "/api/v1/kv/once", map[string]any{"ns": "n", "key": "k"}, &out); err != nil || keys[3] == keys[0] {
		t.Fatalf("a second call reused the first call's key: %q (%v)", keys, err)
	}
	if _, err := c.CallRetry(http.MethodPost, "/api/v1/push", nil, nil); err != nil || keys[4] != "" {
		t.Fatalf("CallRetry sent Idempotency-Key %q (%v), want none", keys[4], err)
	}
}

var uuidV7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// The keys are UUIDv7s: the time in milliseconds first, then random bits.
func TestKeysAreUUIDv7(t *testing.T) {
	at := time.UnixMilli(0x0123456789ab)
	seen := map[string]bool{}
	for range 100 {
		k := newKey(at)
		if !uuidV7.MatchString(k) || !strings.HasPrefix(k, "01234567-89ab-7") {
			t.Fatalf("key %q is not a UUIDv7 of %v", k, at)
		}
		if seen[k] {
			t.Fatalf("key %q minted twice", k)
		}
		seen[k] = true
	}
}

// A request carries the token, a JSON body and its Content-Type; a JSON
// answer is decoded, a 204 leaves out untouched, and an answer that does
// not decode says which call gave it.
func TestCallSendsAndDecodes(t *testing.T) {
	type seen struct{ method, path, authz, contentType, body string }
	var got seen
	reply := `{"name":"q","options":{"leaseTime":30},"partitions":[{"name":"Default","messages":2},{"name":"b","messages":3}]}`
	code := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = seen{r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("Content-Type"), string(b)}
		w.WriteHeader(code)
		io.WriteString(w, reply)
	}))
	defer srv.Close()
	c := New(srv.URL + "/") // a trailing slash is dropped
	c.Token = "s3cret"
	var q Queue
	if status, err := c.Call(http.MethodPost, "/api/v1/configure", map[string]any{"queue": "q"}, &q); err != nil || status != 200 {
		t.Fatalf("configure: %d %v", status, err)
	}
	if want := (seen{"POST", "/api/v1/configure", "Bearer s3cret", "application/json", `{"queue":"q"}`}); got != want {
		t.Errorf("the server got %+v, want %+v", got, want)
	}
	if q.Name != "q" || q.Options.LeaseTime != 30 || len(q.Partitions) != 2 || q.Messages() != 5 {
		t.Errorf("decoded %+v (%d messages)", q, q.Messages())
	}

	code, reply = http.StatusNoContent, ""
	q = Queue{Name: "kept"}
	if status, err := c.Call(http.MethodGet, "/api/v1/pop/queue/q", nil, &q); err != nil || status != 204 || q.Name != "kept" {
		t.Errorf("a 204: %d %v, %+v", status, err, q)
	}
	if got.body != "" {
		t.Errorf("a call without in sent the body %q", got.body)
	}

	code, reply = http.StatusOK, `[1,2]`
	if _, err := c.Call(http.MethodGet, "/api/v1/resources/queues/q", nil, &q); err == nil || !strings.Contains(err.Error(), "unexpected answer from /api/v1/resources/queues/q") {
		t.Errorf("an answer of the wrong shape: %v", err)
	}
}

// A caller sending its own request (a download) gets the same token, the
// same explanation of a node that did not answer, and the same *Error.
func TestOwnRequests(t *testing.T) {
	var authz string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		authz = r.Header.Get("Authorization")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":"no leader","code":"no_leader"}`)
	}))
	defer srv.Close()
	c := New(srv.URL)
	c.Token = "t"
	req, err := c.NewRequest(http.MethodGet, "/api/v1/cluster/backup?group=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	e := c.ReadError(resp, "/api/v1/cluster/backup?group=1")
	want := Error{Status: 503, Code: "no_leader", Msg: "no leader", URL: srv.URL + "/api/v1/cluster/backup?group=1", RetryAfter: time.Second}
	if *e != want || authz != "Bearer t" {
		t.Errorf("error %+v with Authorization %q, want %+v and Bearer t", *e, authz, want)
	}

	c = New(closedPort(t))
	req, _ = c.NewRequest(http.MethodGet, "/", nil)
	if _, err := c.Do(req); err == nil || !strings.Contains(err.Error(), "cannot reach waggle at "+c.BaseURL) {
		t.Errorf("Do against nothing: %v", err)
	}
}

func TestNewTakesAURLOrHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:6632":         "http://127.0.0.1:6632",
		"http://n:1/":            "http://n:1",
		"https://n.example:443":  "https://n.example:443",
		"https://n.example/a//":  "https://n.example/a",
		"localhost:6632/prefix/": "http://localhost:6632/prefix",
	} {
		if got := New(in).BaseURL; got != want {
			t.Errorf("New(%q).BaseURL = %q, want %q", in, got, want)
		}
	}
}

// closedPort is an address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestExplainsAnUnreachableServer(t *testing.T) {
	c := New(closedPort(t))
	_, err := c.Call(http.MethodGet, "/api/v1/resources/queues", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "cannot reach waggle at "+c.BaseURL+" (is it running? set --server or WAGGLE_SERVER)") {
		t.Fatalf("error for an unreachable server: %v", err)
	}
}

// Regression (issue 30): a TLS failure was reported as "cannot reach
// waggle … (is it running?)" though the server answered. Each kind says
// what to fix instead.
func TestExplainsTLSTrouble(t *testing.T) {
	answer := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, `{"queues":[]}`) })
	secure, plain := httptest.NewTLSServer(answer), httptest.NewServer(answer)
	defer secure.Close()
	defer plain.Close()
	for _, tc := range []struct{ name, server, want string }{
		{"a certificate nobody told the client to trust", secure.URL, "TLS certificate was not accepted"},
		{"http to an https server", "http://" + secure.Listener.Addr().String(), "use https://"},
		{"https to an http server", "https://" + plain.Listener.Addr().String(), "answered without TLS"},
	} {
		_, err := New(tc.server).Call(http.MethodGet, "/api/v1/resources/queues", nil, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "is it running") {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// An answer that is not waggle's says which URL answered and what to check.
func TestNamesTheURLOfAForeignAnswer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	_, err := New(strings.TrimPrefix(srv.URL, "http://")).Call(http.MethodGet, "/api/v1/resources/queues", nil, nil)
	if err == nil || !strings.Contains(err.Error(), srv.URL+"/api/v1/") || !strings.Contains(err.Error(), "is this a waggle node?") {
		t.Fatalf("a non-waggle server: %v", err)
	}
}

// A Client built as a literal, without New, works: the default HTTP
// client and the real clock.
func TestZeroClient(t *testing.T) {
	srv, tries := answering(t, status(503, "", `{"error":"x","code":"no_leader"}`), status(200, "", `{}`))
	c := &Client{BaseURL: srv.URL, RetryFor: time.Second}
	if _, err := c.Call(http.MethodGet, "/x", nil, nil); err != nil || *tries != 2 {
		t.Fatalf("%d tries, %v", *tries, err)
	}
}
