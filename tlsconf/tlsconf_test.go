package tlsconf

import (
	"crypto/tls"
	"net"
	"path/filepath"
	"testing"
)

func load(t *testing.T, dir, name string) *Config {
	c, err := Load(Files{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem"), CA: filepath.Join(dir, "ca.pem")})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// handshake runs a TLS handshake between server and client settings over
// an in-memory pipe and returns the client's error.
func handshake(server, client *tls.Config) error {
	a, b := net.Pipe()
	done := make(chan error, 1)
	go func() {
		err := tls.Server(a, server).Handshake()
		a.Close() // a failed side hangs up, so the other stops waiting
		done <- err
	}()
	err := tls.Client(b, client).Handshake()
	b.Close()
	if serr := <-done; err == nil {
		err = serr
	}
	return err
}

// Peers of one CA complete the mutual handshake; a peer whose
// certificate another CA signed does not, in either direction.
func TestPeerTLSIsMutual(t *testing.T) {
	ours, theirs := t.TempDir(), t.TempDir()
	for _, dir := range []string{ours, theirs} {
		if err := DevCerts(dir, []string{"node-1", "node-2"}, []string{"127.0.0.1"}); err != nil {
			t.Fatal(err)
		}
	}
	n1, n2, foreign := load(t, ours, "node-1"), load(t, ours, "node-2"), load(t, theirs, "node-1")
	if err := handshake(n1.Peer, n2.ClientFor("127.0.0.1")); err != nil {
		t.Fatalf("two nodes of one cluster: %v", err)
	}
	if err := handshake(n1.Peer, foreign.ClientFor("127.0.0.1")); err == nil {
		t.Fatal("a foreign node was let in")
	}
	if err := handshake(foreign.Peer, n2.ClientFor("127.0.0.1")); err == nil {
		t.Fatal("a node trusted a foreign listener")
	}
	noCert := n2.ClientFor("127.0.0.1")
	noCert.Certificates = nil
	if err := handshake(n1.Peer, noCert); err == nil {
		t.Fatal("a peer without a certificate was let in")
	}
	if err := handshake(n1.Server, noCert); err != nil {
		t.Fatalf("a client without a certificate on the client listener: %v", err)
	}
}

func TestLoadNeedsAllThreeFiles(t *testing.T) {
	if _, err := Load(Files{Cert: "a.pem"}); err == nil {
		t.Fatal("loaded without a key and a CA")
	}
}
