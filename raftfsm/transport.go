package raftfsm

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/tlsconf"
)

// streamLayer carries raft's TCP connections. Unlike raft's own TCP stream
// layer it dials from the host it listens on, so a peer (or a test's
// partition proxy) sees connections come from the node's own address, and
// it advertises an address of its own choosing: the one peers dial, which
// may be a proxy or a NAT address in front of the listener.
//
// With TLS it is mutual TLS: the listener requires a certificate the
// cluster's CA signed, and the dialer presents its own and checks the
// peer's, so a node without the cluster's certificate can neither join nor
// send a raft message.
type streamLayer struct {
	net.Listener
	advertise net.Addr
	dialer    net.Dialer
	tls       *tlsconf.Config // nil: plain TCP
}

// Addr is the advertised address, the one the cluster configuration names.
func (s *streamLayer) Addr() net.Addr { return s.advertise }

// Dial opens a connection to a peer's advertised address.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := s.dialer
	d.Timeout = timeout
	conn, err := d.Dial("tcp", string(address))
	if err != nil || s.tls == nil {
		return conn, err
	}
	host, _, _ := net.SplitHostPort(string(address))
	tc := tls.Client(conn, s.tls.ClientFor(host))
	tc.SetDeadline(time.Now().Add(timeout))
	if err := tc.Handshake(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("raft TLS handshake with %s: %w", address, err)
	}
	tc.SetDeadline(time.Time{})
	return tc, nil
}

// newTransport listens on bind and advertises advertise; tlsConf nil means
// plain TCP.
func newTransport(bind, advertise string, tlsConf *tlsconf.Config, logger hclog.Logger) (*raft.NetworkTransport, error) {
	adv, err := net.ResolveTCPAddr("tcp", advertise)
	if err != nil {
		return nil, fmt.Errorf("raft advertise address %q: %w", advertise, err)
	}
	if adv.IP == nil || adv.IP.IsUnspecified() {
		return nil, fmt.Errorf("raft advertise address %q is not one peers can dial", advertise)
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raft listener on %s: %w", bind, err)
	}
	if adv.Port == 0 { // bound to a port the system picked: advertise it
		adv = &net.TCPAddr{IP: adv.IP, Port: ln.Addr().(*net.TCPAddr).Port, Zone: adv.Zone}
	}
	layer := &streamLayer{Listener: ln, advertise: adv, tls: tlsConf}
	if tlsConf != nil {
		layer.Listener = tls.NewListener(ln, tlsConf.Peer)
	}
	if local := ln.Addr().(*net.TCPAddr); !local.IP.IsUnspecified() {
		layer.dialer.LocalAddr = &net.TCPAddr{IP: local.IP}
	}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  layer,
		MaxPool: 8,
		Timeout: 10 * time.Second,
		Logger:  logger,
	}), nil
}
