package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker/httpapi"
)

// checkExposure is the safe default: a node reachable from other machines
// must have auth on, and raft between machines must be TLS, unless the
// operator says --insecure. Loopback stays zero-config.
func checkExposure(o serveOptions, tlsOn bool) error {
	if o.insecure {
		return nil
	}
	for _, l := range []struct{ flag, addr string }{{"--http-addr", o.httpAddr}, {"--kafka-addr", o.kafkaAddr}, {"--raft-addr", o.raftAddr}} {
		if loopback(l.addr) {
			continue
		}
		if !o.authOn {
			return fmt.Errorf("%s %s is reachable from other machines and --auth is off: refusing to start (turn --auth on, or pass --insecure)", l.flag, l.addr)
		}
		if l.flag == "--raft-addr" && !tlsOn {
			return fmt.Errorf("--raft-addr %s is reachable from other machines without TLS: refusing to start (give --tls-cert/--tls-key/--tls-ca, or pass --insecure)", l.addr)
		}
	}
	return nil
}

// loopback reports whether addr listens on a loopback address only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loadAuth reads the auth flags' files.
func loadAuth(o serveOptions) (httpapi.AuthConfig, error) {
	c := httpapi.AuthConfig{Enabled: o.authOn}
	if !o.authOn {
		if o.bootstrapTokenFile != "" || o.jwtHS256KeyFile != "" || o.jwtPublicKeyFile != "" {
			return c, errors.New("--bootstrap-token-file and --jwt-* need --auth")
		}
		return c, nil
	}
	if o.bootstrapTokenFile != "" {
		raw, err := os.ReadFile(o.bootstrapTokenFile)
		if err != nil {
			return c, fmt.Errorf("--bootstrap-token-file: %w", err)
		}
		if c.BootstrapToken = strings.TrimSpace(string(raw)); len(c.BootstrapToken) < 16 {
			return c, errors.New("--bootstrap-token-file: the token must be at least 16 characters")
		}
	}
	var err error
	switch {
	case o.jwtHS256KeyFile != "" && o.jwtPublicKeyFile != "":
		return c, errors.New("give one of --jwt-hs256-key-file and --jwt-public-key-file")
	case o.jwtHS256KeyFile != "":
		var secret []byte
		if secret, err = os.ReadFile(o.jwtHS256KeyFile); err == nil {
			c.JWT, err = auth.NewHS256Verifier(secret, o.jwtAudience)
		}
	case o.jwtPublicKeyFile != "":
		c.JWT, err = auth.NewPublicKeyVerifier(o.jwtPublicKeyFile, o.jwtAudience)
	}
	if err != nil {
		return c, fmt.Errorf("JWT key: %w", err)
	}
	return c, nil
}
