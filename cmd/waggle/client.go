package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/waggle-mq/waggle/client"
)

// testClock, when set (by tests only), replaces the clock the clients of
// the admin commands retry by.
var testClock interface {
	sleep(time.Duration)
	now() time.Time
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

// client is a client of --server with the flags' token, TLS trust and
// retry bound.
func (o *clientOptions) client() *client.Client {
	c := client.New(o.server)
	c.Token, c.RetryFor = o.token, o.retryTimeout
	if conf := o.tlsConfig(); conf != nil {
		c.HTTP.Transport = &http.Transport{TLSClientConfig: conf}
	}
	if testClock != nil {
		c.Sleep, c.Now = testClock.sleep, testClock.now
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
