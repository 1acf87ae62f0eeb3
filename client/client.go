package client

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client talks to one waggle node's HTTP API. Its fields may be set
// between New and the first call.
type Client struct {
	// BaseURL is the node's address with its scheme and no trailing
	// slash; a call's path is appended to it.
	BaseURL string
	// Token, when set, is sent as a bearer token.
	Token string
	// HTTP sends the requests; nil: http.DefaultClient.
	HTTP *http.Client
	// RetryFor bounds how long a call that may be repeated (CallRetry,
	// CallKeyed, a GET through Call) is retried while the cluster answers
	// "try again" (Error.Retryable); 0: never.
	RetryFor time.Duration
	// Sleep and Now are the clock retries read and wait on; nil:
	// time.Sleep and time.Now (tests replace them).
	Sleep func(time.Duration)
	Now   func() time.Time
}

// New returns a client of server, a URL or a bare host:port (then plain
// http), with a 70 s timeout per request and no retries.
func New(server string) *Client {
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	return &Client{BaseURL: strings.TrimRight(server, "/"), HTTP: &http.Client{Timeout: 70 * time.Second}}
}

func (c *Client) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

func (c *Client) sleep(d time.Duration) {
	if c.Sleep == nil {
		time.Sleep(d)
		return
	}
	c.Sleep(d)
}

// Error is an error answer from the server: its status, and the code and
// message of its ErrorBody (empty when the answer was not waggle's).
type Error struct {
	// Status is the answer's HTTP status, 400 or above.
	Status int
	// Code and Msg are the body's code and error (ErrorBody).
	Code string
	Msg  string
	// URL is the request's: which node, and which call, answered.
	URL string
	// RetryAfter is the server's Retry-After; 0 when absent.
	RetryAfter time.Duration
}

// Error says what the server answered. An answer without waggle's error
// shape names the URL that gave it, and what to check.
func (e *Error) Error() string {
	if e.Code == "" {
		hint := "is this a waggle node?"
		if e.Status == http.StatusBadRequest && strings.HasPrefix(e.URL, "http://") {
			hint = "if the node serves TLS, use https:// (and --ca-file)"
		}
		return fmt.Sprintf("%s answered HTTP %d, not a waggle answer (%s)", e.URL, e.Status, hint)
	}
	return fmt.Sprintf("%s (%s, HTTP %d)", e.Msg, e.Code, e.Status)
}

// Retryable reports whether the server asked for the call to be made
// again later: no leader yet, an outcome it could not learn, an upgrade
// in progress, or too much load (503 and 429, with Retry-After).
func (e *Error) Retryable() bool {
	return e.Status == http.StatusServiceUnavailable || e.Status == http.StatusTooManyRequests
}

// errorOf makes the Error for an answer of status >= 400 with body raw to
// a request for url.
func errorOf(status int, header http.Header, raw []byte, url string) *Error {
	var body ErrorBody
	json.Unmarshal(raw, &body)
	e := &Error{Status: status, Code: body.Code, Msg: body.Error, URL: url}
	if secs, err := strconv.Atoi(header.Get("Retry-After")); err == nil && secs > 0 {
		e.RetryAfter = time.Duration(secs) * time.Second
	}
	return e
}

// ReadError reads resp, an error answer to a request for path, into an
// Error (reading at most 1 MiB of its body). It is for callers that send
// their own requests with NewRequest and Do, such as a download.
func (c *Client) ReadError(resp *http.Response, path string) *Error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return errorOf(resp.StatusCode, resp.Header, raw, c.BaseURL+path)
}

// NewRequest makes a request for path on the node, carrying the bearer
// token when the client has one.
func (c *Client) NewRequest(method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequest(method, c.BaseURL+path, body)
	if err != nil {
		return nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

// Do sends req. A request that got no answer is explained: a node that
// cannot be reached, or a TLS handshake that failed and what to fix. Any
// answer, error statuses too, is returned as it is.
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, unreachable(c.BaseURL, err)
	}
	return resp, nil
}

// Call sends a request with in (when non-nil) as its JSON body and
// decodes a JSON answer into out (when non-nil). It returns the status;
// 204 leaves out untouched, and an answer of 400 or above is an *Error. A
// GET is retried as CallRetry does: reading twice changes nothing. Other
// methods are sent once.
func (c *Client) Call(method, path string, in, out any) (int, error) {
	if method == http.MethodGet {
		return c.CallRetry(method, path, in, out)
	}
	return c.send(method, path, "", in, out)
}

// CallRetry is Call for a request that is safe to send again (a read, or
// a push whose every message carries a transactionId: a repeat answers
// duplicate). While the server answers 503 or 429 it waits as Retry-After
// says (else 100 ms, doubling to 2 s) and tries again, for up to RetryFor.
func (c *Client) CallRetry(method, path string, in, out any) (int, error) {
	return c.retry(method, path, "", in, out)
}

// CallKeyed is Call for a write the server applies once per
// Idempotency-Key: it mints a key (a UUIDv7) and sends the write, and
// again under the same key as CallRetry does, so a retry after an outcome
// it could not learn gets the first answer and applies nothing twice.
func (c *Client) CallKeyed(method, path string, in, out any) (int, error) {
	return c.retry(method, path, newKey(time.Now()), in, out)
}

func (c *Client) retry(method, path, key string, in, out any) (int, error) {
	deadline := c.now().Add(c.RetryFor)
	wait := 100 * time.Millisecond
	for {
		status, err := c.send(method, path, key, in, out)
		var e *Error
		if err == nil || c.RetryFor <= 0 || !errors.As(err, &e) || !e.Retryable() {
			return status, err
		}
		pause := wait
		if e.RetryAfter > 0 {
			pause = e.RetryAfter
		}
		if c.now().Add(pause).After(deadline) {
			return status, fmt.Errorf("%w; gave up after retrying for %s (--retry-timeout)", err, c.RetryFor)
		}
		c.sleep(pause)
		wait = min(2*wait, 2*time.Second)
	}
}

// send sends one request, with an Idempotency-Key when key is not empty.
func (c *Client) send(method, path, key string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := c.NewRequest(method, path, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 400 {
		return resp.StatusCode, errorOf(resp.StatusCode, resp.Header, raw, c.BaseURL+path)
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("unexpected answer from %s: %v", path, err)
		}
	}
	return resp.StatusCode, nil
}

// newKey mints an Idempotency-Key: a UUIDv7 (RFC 9562) for time now, its
// millisecond timestamp first and 74 random bits after.
func newKey(now time.Time) string {
	var u [16]byte
	rand.Read(u[:]) // never fails (crypto/rand's documented promise)
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(now.UnixMilli()))
	copy(u[:6], ms[2:])
	u[6] = 0x70 | u[6]&0x0f // version 7
	u[8] = 0x80 | u[8]&0x3f // variant 10
	h := hex.EncodeToString(u[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// unreachable explains a request to base that got no answer. A TLS
// handshake that failed is not a server that is down: it says what to fix.
func unreachable(base string, err error) error {
	var uerr *url.Error
	if !errors.As(err, &uerr) {
		return err
	}
	var verify *tls.CertificateVerificationError
	switch {
	case errors.As(err, &verify):
		return fmt.Errorf("waggle at %s answered, but its TLS certificate was not accepted (give its certificate authority with --ca-file, or a --server name the certificate holds): %v", base, verify.Err)
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"): // net/http's words
		return fmt.Errorf("waggle at %s answered without TLS: give --server as http://…", base)
	case strings.Contains(err.Error(), "tls: "):
		return fmt.Errorf("waggle at %s answered, but the TLS handshake failed: %v", base, uerr.Err)
	}
	return fmt.Errorf("cannot reach waggle at %s (is it running? set --server or WAGGLE_SERVER): %v", base, uerr.Err)
}
