package raftnode

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"golang.org/x/time/rate"

	"github.com/waggle-mq/waggle/raftmux"
	"github.com/waggle-mq/waggle/tlsconf"
)

// Listen opens a node's raft listener on bind, advertised to peers as
// advertise, and returns the mux that shares it among the node's raft
// groups; tlsConf nil means plain TCP.
//
// Unlike raft's own TCP stream layer it dials from the host it listens on,
// so a peer (or a test's partition proxy) sees connections come from the
// node's own address, and it advertises an address of its own choosing:
// the one peers dial, which may be a proxy or a NAT address in front of the
// listener.
//
// With TLS it is mutual TLS: the listener requires a certificate the
// cluster's CA signed, and the dialer presents its own and checks the
// peer's, so a node without the cluster's certificate can neither join nor
// send a raft message.
func Listen(bind, advertise string, tlsConf *tlsconf.Config, logger hclog.Logger) (*raftmux.Mux, error) {
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
	var dialer net.Dialer
	if local := ln.Addr().(*net.TCPAddr); !local.IP.IsUnspecified() {
		dialer.LocalAddr = &net.TCPAddr{IP: local.IP}
	}
	dial := func(address string, timeout time.Duration) (net.Conn, error) {
		d := dialer
		d.Timeout = timeout
		conn, err := d.Dial("tcp", address)
		if err != nil || tlsConf == nil {
			return conn, err
		}
		host, _, _ := net.SplitHostPort(address)
		tc := tls.Client(conn, tlsConf.ClientFor(host))
		tc.SetDeadline(time.Now().Add(timeout))
		if err := tc.Handshake(); err != nil {
			conn.Close()
			return nil, fmt.Errorf("raft TLS handshake with %s: %w", address, err)
		}
		tc.SetDeadline(time.Time{})
		return tc, nil
	}
	if tlsConf != nil {
		ln = tls.NewListener(ln, tlsConf.Peer)
	}
	return raftmux.New(ln, adv, dial, logger), nil
}

// newTransport runs raft's network transport for one group on the node's
// shared listener, behind a heartbeat gate (see heartbeatGate), and
// returns the group's layer too.
func newTransport(mux *raftmux.Mux, group uint32, logger hclog.Logger, snapshotSend *rate.Limiter) (*heartbeatGate, *raftmux.Layer, error) {
	layer, err := mux.Layer(group)
	if err != nil {
		return nil, nil, err
	}
	g := newHeartbeatGate(raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  layer,
		MaxPool: 8,
		Timeout: 10 * time.Second,
		Logger:  logger,
	}))
	g.snapshotSend = snapshotSend
	return g, layer, nil
}

// InstallSnapshot sends a snapshot to a peer, no faster than the node's
// snapshot pace (NodeConfig.SnapshotSend). Raft gives the send a deadline
// of 10 s per 256 KiB (its timeout scale), far above any pace set.
func (g *heartbeatGate) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	if g.snapshotSend != nil {
		data = &pacedReader{r: data, pace: g.snapshotSend, ctx: g.pacing}
	}
	return g.NetworkTransport.InstallSnapshot(id, target, args, resp, data)
}

// pacedReader reads r no faster than pace allows.
type pacedReader struct {
	r    io.Reader
	pace *rate.Limiter
	ctx  context.Context // ends the waits: the node shuts down
}

func (p *pacedReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b[:min(len(b), p.pace.Burst())])
	if n > 0 {
		if werr := p.pace.WaitN(p.ctx, n); werr != nil {
			return n, werr
		}
	}
	return n, err
}
