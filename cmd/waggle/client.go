package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// apiClient talks to a waggle node's HTTP API for the admin commands.
type apiClient struct {
	base  string
	token string // sent as a bearer token when set
	http  *http.Client
	// retryFor bounds how long a call that may be repeated (see call) is
	// retried while the cluster answers "try again"; 0: never.
	retryFor time.Duration
	sleep    func(time.Duration)
	now      func() time.Time
}

// newAPIClient talks to server, a URL or a bare host:port (http).
func newAPIClient(server string) *apiClient {
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	c := &apiClient{base: strings.TrimRight(server, "/"), http: &http.Client{Timeout: 70 * time.Second}, sleep: time.Sleep, now: time.Now}
	if testClock != nil {
		c.sleep, c.now = testClock.sleep, testClock.now
	}
	return c
}

// testClock, when set (by tests only), replaces the clock retries read and
// the pause between them.
var testClock interface {
	sleep(time.Duration)
	now() time.Time
}

// apiError is an error answer from the server.
type apiError struct {
	Status     int
	Code       string
	Msg        string
	URL        string
	RetryAfter time.Duration // the server's Retry-After, 0 when absent
}

func (e *apiError) Error() string {
	if e.Code == "" {
		// Not waggle's error shape: say where the answer came from.
		hint := "is this a waggle node?"
		if e.Status == http.StatusBadRequest && strings.HasPrefix(e.URL, "http://") {
			hint = "if the node serves TLS, use https:// (and --ca-file)"
		}
		return fmt.Sprintf("%s answered HTTP %d, not a waggle answer (%s)", e.URL, e.Status, hint)
	}
	return fmt.Sprintf("%s (%s, HTTP %d)", e.Msg, e.Code, e.Status)
}

// again reports whether the server asked for the call to be made again
// later: no leader yet, an outcome it could not learn, an upgrade in
// progress, or too much load (503 and 429, with Retry-After).
func (e *apiError) again() bool {
	return e.Status == http.StatusServiceUnavailable || e.Status == http.StatusTooManyRequests
}

// call sends a request and decodes a JSON answer into out (when non-nil).
// It returns the status; 204 leaves out untouched. A GET is retried as
// callRetry does: reading twice changes nothing.
func (c *apiClient) call(method, path string, in, out any) (int, error) {
	if method == http.MethodGet {
		return c.callRetry(method, path, in, out)
	}
	return c.once(method, path, in, out)
}

// callRetry is call for a request that is safe to send again (a read, or a
// push whose every message carries a transactionId: a repeat answers
// duplicate). While the server answers 503 or 429 it waits as Retry-After
// says (else 100 ms, doubling to 2 s) and tries again, for up to retryFor.
func (c *apiClient) callRetry(method, path string, in, out any) (int, error) {
	return c.retry(method, path, "", in, out)
}

// callKeyed is call for a write the server applies once per
// Idempotency-Key: it mints a key (a UUIDv7) and sends the write, and
// again under the same key as callRetry does, so a retry after an outcome
// it could not learn gets the first answer and applies nothing twice.
func (c *apiClient) callKeyed(method, path string, in, out any) (int, error) {
	return c.retry(method, path, uuid.Must(uuid.NewV7()).String(), in, out)
}

func (c *apiClient) retry(method, path, key string, in, out any) (int, error) {
	deadline := c.now().Add(c.retryFor)
	wait := 100 * time.Millisecond
	for {
		status, err := c.send(method, path, key, in, out)
		var ae *apiError
		if err == nil || c.retryFor <= 0 || !errors.As(err, &ae) || !ae.again() {
			return status, err
		}
		pause := wait
		if ae.RetryAfter > 0 {
			pause = ae.RetryAfter
		}
		if c.now().Add(pause).After(deadline) {
			return status, fmt.Errorf("%w; gave up after retrying for %s (--retry-timeout)", err, c.retryFor)
		}
		c.sleep(pause)
		wait = min(2*wait, 2*time.Second)
	}
}

// once sends one request.
func (c *apiClient) once(method, path string, in, out any) (int, error) {
	return c.send(method, path, "", in, out)
}

// send sends one request, with an Idempotency-Key when key is not empty.
func (c *apiClient) send(method, path, key string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, unreachable(c.base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 400 {
		var e struct{ Error, Code string }
		json.Unmarshal(raw, &e)
		ae := &apiError{Status: resp.StatusCode, Code: e.Code, Msg: e.Error, URL: c.base + path}
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			ae.RetryAfter = time.Duration(secs) * time.Second
		}
		return resp.StatusCode, ae
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("unexpected answer from %s: %v", path, err)
		}
	}
	return resp.StatusCode, nil
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

// clientOptions are the flags every admin command shares.
type clientOptions struct {
	server       string
	output       string
	token        string
	caFile       string
	retryTimeout time.Duration
}

func (o *clientOptions) addFlags(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&o.server, "server", "http://127.0.0.1:6632", "a waggle node's HTTP address (env WAGGLE_SERVER)")
	cmd.PersistentFlags().StringVarP(&o.output, "output", "o", "table", "table or json")
	cmd.PersistentFlags().StringVar(&o.token, "token", "", "bearer token for a node with --auth (env WAGGLE_TOKEN)")
	cmd.PersistentFlags().StringVar(&o.caFile, "ca-file", "", "PEM CA to trust for an https --server (env WAGGLE_CA_FILE)")
	cmd.PersistentFlags().DurationVar(&o.retryTimeout, "retry-timeout", 15*time.Second,
		"how long to retry reads and pushes while the cluster has no leader or is busy (0: no retries)")
}

func (o *clientOptions) client() *apiClient {
	c := newAPIClient(o.server)
	c.token, c.retryFor = o.token, o.retryTimeout
	if conf := o.tlsConfig(); conf != nil {
		c.http.Transport = &http.Transport{TLSClientConfig: conf}
	}
	return c
}

// tlsConfig trusts --ca-file; nil without one (the system's roots).
func (o *clientOptions) tlsConfig() *tls.Config {
	if o.caFile == "" {
		return nil
	}
	pool := x509.NewCertPool()
	if pem, err := os.ReadFile(o.caFile); err == nil && pool.AppendCertsFromPEM(pem) {
		return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return nil
}

// print writes v as indented JSON with -o json, else calls table.
func (o *clientOptions) print(cmd *cobra.Command, v any, table func(t *tableWriter)) error {
	switch o.output {
	case "json":
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "table":
		t := newTable(cmd.OutOrStdout())
		table(t)
		return t.flush()
	default:
		return fmt.Errorf("-o must be table or json, not %q", o.output)
	}
}
