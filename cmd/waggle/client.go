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
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// apiClient talks to a waggle node's HTTP API for the admin commands.
type apiClient struct {
	base  string
	token string // sent as a bearer token when set
	http  *http.Client
}

func newAPIClient(server string) *apiClient {
	return &apiClient{base: strings.TrimRight(server, "/"), http: &http.Client{Timeout: 70 * time.Second}}
}

// apiError is an error answer from the server.
type apiError struct {
	Status int
	Code   string
	Msg    string
}

func (e *apiError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("server answered %d", e.Status)
	}
	return fmt.Sprintf("%s (%s, HTTP %d)", e.Msg, e.Code, e.Status)
}

// call sends a request and decodes a JSON answer into out (when non-nil).
// It returns the status; 204 leaves out untouched.
func (c *apiClient) call(method, path string, in, out any) (int, error) {
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
	resp, err := c.http.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			return 0, fmt.Errorf("cannot reach waggle at %s (is it running? set --server or WAGGLE_SERVER): %v", c.base, uerr.Err)
		}
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 400 {
		var e struct{ Error, Code string }
		json.Unmarshal(raw, &e)
		return resp.StatusCode, &apiError{Status: resp.StatusCode, Code: e.Code, Msg: e.Error}
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("unexpected answer from %s: %v", path, err)
		}
	}
	return resp.StatusCode, nil
}

// clientOptions are the flags every admin command shares.
type clientOptions struct {
	server string
	output string
	token  string
	caFile string
}

func (o *clientOptions) addFlags(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&o.server, "server", "http://127.0.0.1:6632", "a waggle node's HTTP address (env WAGGLE_SERVER)")
	cmd.PersistentFlags().StringVarP(&o.output, "output", "o", "table", "table or json")
	cmd.PersistentFlags().StringVar(&o.token, "token", "", "bearer token for a node with --auth (env WAGGLE_TOKEN)")
	cmd.PersistentFlags().StringVar(&o.caFile, "ca-file", "", "PEM CA to trust for an https --server (env WAGGLE_CA_FILE)")
}

func (o *clientOptions) client() *apiClient {
	c := newAPIClient(o.server)
	c.token = o.token
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
