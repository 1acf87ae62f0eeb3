// Package tlsconf builds the TLS settings a node serves and dials with from
// its certificate, key and the cluster's CA, and makes development
// certificates.
//
// One certificate per node serves all three listeners. Raft traffic is
// mutual TLS: a peer must present a certificate the cluster's CA signed, or
// the connection ends in the handshake, before any raft message is read.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Files names a node's PEM files.
type Files struct {
	Cert, Key, CA string
}

// Enabled reports whether any TLS file was given.
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// Config is a node's TLS settings.
type Config struct {
	// Server is for the HTTP and Kafka listeners: clients check the node's
	// certificate; a client certificate is optional, and one the cluster's
	// CA signed makes its holder an admin on HTTP (other nodes are).
	Server *tls.Config
	// Peer is for the raft listener: it requires a client certificate
	// signed by the cluster's CA.
	Peer *tls.Config
	// Client is for dialing other nodes (raft and forwarded HTTP): it
	// presents the node's certificate and trusts only the cluster's CA.
	Client *tls.Config
}

// Load reads the files; all three are needed.
func Load(f Files) (*Config, error) {
	if f.Cert == "" || f.Key == "" || f.CA == "" {
		return nil, errors.New("TLS needs --tls-cert, --tls-key and --tls-ca together")
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("node certificate: %w", err)
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("CA %s holds no PEM certificate", f.CA)
	}
	certs := []tls.Certificate{cert}
	return &Config{
		Server: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: certs,
			ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool},
		Peer: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: certs,
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool},
		Client: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: certs, RootCAs: pool},
	}, nil
}

// ClientFor returns the client settings with the server name to check set
// to host, as a dialer of a raw connection needs.
func (c *Config) ClientFor(host string) *tls.Config {
	conf := c.Client.Clone()
	conf.ServerName = host
	return conf
}
