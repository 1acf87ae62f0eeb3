package raftfsm

import (
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// streamLayer carries raft's TCP connections. Unlike raft's own TCP stream
// layer it dials from the host it listens on, so a peer (or a test's
// partition proxy) sees connections come from the node's own address, and
// it advertises an address of its own choosing: the one peers dial, which
// may be a proxy or a NAT address in front of the listener.
type streamLayer struct {
	net.Listener
	advertise net.Addr
	dialer    net.Dialer
}

// Addr is the advertised address, the one the cluster configuration names.
func (s *streamLayer) Addr() net.Addr { return s.advertise }

// Dial opens a connection to a peer's advertised address.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := s.dialer
	d.Timeout = timeout
	return d.Dial("tcp", string(address))
}

// newTransport listens on bind and advertises advertise.
func newTransport(bind, advertise string, logger hclog.Logger) (*raft.NetworkTransport, error) {
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
	layer := &streamLayer{Listener: ln, advertise: adv}
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
