// Package raftmux carries several raft groups over one listener.
//
// Each group gets a Layer, a raft.StreamLayer of its own: raft's network
// transport runs on it unchanged. A connection dialled for group g > 0
// starts with a two-part header, the byte Magic and g as a uvarint; a
// connection without it belongs to group 0. raft's own messages start with
// their RPC type, a byte from 0 to 4, never Magic, so a node that predates
// groups (it sends no header and serves only group 0) and a node that has
// them talk to each other unchanged. A connection that starts with
// ProbeMagic asks for a group's raft term instead (see Layer.ProbeTerm).
package raftmux

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Magic opens the header of a connection for a group other than 0. It is
// none of hashicorp/raft's RPC types (0 to 4).
const Magic byte = 0xF7

// ProbeMagic opens a term probe: ProbeMagic and a group as a uvarint (0
// allowed). The node answers the group's current raft term, 8 bytes
// big-endian, and closes; a node that does not run the group, or whose
// group does not answer probes, closes without answering. A node that
// predates probes closes too (it reads no group header).
const ProbeMagic byte = 0xF8

// headerTimeout bounds how long an accepted connection may take to send
// its first bytes (and, with TLS, to finish the handshake they wait for).
const headerTimeout = 10 * time.Second

// DialFunc opens a connection to a peer's advertised raft address (with
// TLS, handshake done).
type DialFunc func(address string, timeout time.Duration) (net.Conn, error)

// Mux shares one listener among the raft groups of a node.
type Mux struct {
	ln        net.Listener
	advertise net.Addr
	dial      DialFunc
	log       hclog.Logger

	mu     sync.Mutex
	groups map[uint32]*Layer
	closed bool
	done   chan struct{} // closed when the accept loop ends
}

// New serves ln: connections are handed to the Layer of the group they
// name. advertise is the address peers dial, which the groups' raft
// configurations name; dial opens connections to peers; log (nil: none)
// gets the listener's failures.
func New(ln net.Listener, advertise net.Addr, dial DialFunc, log hclog.Logger) *Mux {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	m := &Mux{ln: ln, advertise: advertise, dial: dial, log: log,
		groups: map[uint32]*Layer{}, done: make(chan struct{})}
	go m.accept()
	return m
}

// Layer returns the stream layer of group g, for raft.NewNetworkTransport.
// Each group has one: asking again for an open group is an error.
func (m *Mux) Layer(g uint32) (*Layer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, net.ErrClosed
	}
	if _, ok := m.groups[g]; ok {
		return nil, fmt.Errorf("raftmux: group %d already has a layer", g)
	}
	l := &Layer{m: m, group: g, conns: make(chan net.Conn), closed: make(chan struct{})}
	m.groups[g] = l
	return l, nil
}

// Addr is the advertised address.
func (m *Mux) Addr() net.Addr { return m.advertise }

// Close stops the listener and every group's layer.
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	layers := make([]*Layer, 0, len(m.groups))
	for _, l := range m.groups {
		layers = append(layers, l)
	}
	m.mu.Unlock()
	err := m.ln.Close()
	<-m.done
	for _, l := range layers {
		l.Close()
	}
	return err
}

func (m *Mux) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

func (m *Mux) accept() {
	defer close(m.done)
	var delay time.Duration
	for {
		c, err := m.ln.Accept()
		if err != nil {
			if m.isClosed() {
				return
			}
			// A transient failure (out of file descriptors): back off as
			// net/http's server does, up to a second.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			m.log.Warn("raft listener: accept failed", "err", err, "retryIn", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		go m.route(c)
	}
}

// route reads the header of an accepted connection and hands it to its
// group's layer. A connection for a group this node does not run (yet:
// groups start one after another) is closed; raft's dialler retries.
func (m *Mux) route(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(headerTimeout))
	if tc, ok := c.(*tls.Conn); ok {
		// A peer without the cluster's certificate is an operator's
		// problem (a CA rotation gone wrong): say so at error level.
		if err := tc.Handshake(); err != nil {
			m.log.Error("raft listener: TLS handshake failed", "remote", c.RemoteAddr(), "error", err)
			c.Close()
			return
		}
	}
	r := bufio.NewReaderSize(c, 16)
	g, probe, err := readHeader(r)
	if err != nil {
		m.log.Debug("raft listener: no group header", "remote", c.RemoteAddr(), "err", err)
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	conn := &bufferedConn{Conn: c, r: r}
	m.mu.Lock()
	l := m.groups[g]
	m.mu.Unlock()
	if l == nil {
		m.log.Debug("raft listener: connection for a group not running here", "group", g, "remote", c.RemoteAddr())
		c.Close()
		return
	}
	if probe {
		l.answerProbe(c)
		return
	}
	select {
	case l.conns <- conn:
	case <-l.closed:
		c.Close()
	}
}

// readHeader reads the group a connection is for, and whether it is a
// probe, leaving in r every byte that follows the header (for group 0,
// which has none, every byte).
func readHeader(r *bufio.Reader) (group uint32, probe bool, err error) {
	first, err := r.Peek(1)
	if err != nil {
		return 0, false, err
	}
	switch first[0] {
	case Magic:
	case ProbeMagic:
		probe = true
	default:
		return 0, false, nil
	}
	r.ReadByte()
	group, err = readGroup(r)
	if err == nil && group == 0 && !probe {
		err = errors.New("raftmux: group 0 in a header")
	}
	return group, probe, err
}

// readGroup reads a group id, a uvarint.
func readGroup(r *bufio.Reader) (uint32, error) {
	// A group id is a uint32, at most 5 bytes of uvarint. Read no more, or
	// a peer sending 0xff bytes would hold the connection until the timeout.
	var g uint64
	for i := 0; ; i++ {
		if i == binary.MaxVarintLen32 {
			return 0, fmt.Errorf("raftmux: group id longer than %d bytes", i)
		}
		b, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		g |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			break
		}
	}
	if g > math.MaxUint32 {
		return 0, fmt.Errorf("raftmux: group %d in a header", g)
	}
	return uint32(g), nil
}

// header is what a connection for group g starts with.
func header(g uint32) []byte {
	if g == 0 {
		return nil
	}
	return binary.AppendUvarint([]byte{Magic}, uint64(g))
}

// bufferedConn reads through the reader that read its header, which may
// hold the first bytes of raft's stream.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// Layer is one group's raft.StreamLayer on the shared listener.
type Layer struct {
	m     *Mux
	group uint32
	conns chan net.Conn
	once  sync.Once
	// closed is closed by Close; Accept then answers net.ErrClosed.
	closed chan struct{}
	// term answers probes (nil: none are answered).
	term atomic.Pointer[func() (uint64, bool)]
}

// AnswerProbes makes the layer answer term probes with term(); a probe is
// closed unanswered when term's second result is false.
func (l *Layer) AnswerProbes(term func() (uint64, bool)) { l.term.Store(&term) }

func (l *Layer) answerProbe(c net.Conn) {
	defer c.Close()
	term := l.term.Load()
	if term == nil {
		return
	}
	t, ok := (*term)()
	if !ok {
		return
	}
	c.SetWriteDeadline(time.Now().Add(headerTimeout))
	c.Write(binary.BigEndian.AppendUint64(nil, t))
}

// ProbeTerm asks the peer at address for its current raft term in this
// layer's group; it works before either side's raft runs.
func (l *Layer) ProbeTerm(address string, timeout time.Duration) (uint64, error) {
	c, err := l.m.dial(address, timeout)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(binary.AppendUvarint([]byte{ProbeMagic}, uint64(l.group))); err != nil {
		return 0, err
	}
	var answer [8]byte
	if _, err := io.ReadFull(c, answer[:]); err != nil {
		return 0, fmt.Errorf("raftmux: %s answered no term probe: %w", address, err)
	}
	return binary.BigEndian.Uint64(answer[:]), nil
}

var _ raft.StreamLayer = (*Layer)(nil)

// Accept waits for the next connection for this group.
func (l *Layer) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close stops this group's layer; the shared listener and the other groups
// go on. Its group may ask the Mux for a new layer afterwards.
func (l *Layer) Close() error {
	l.once.Do(func() {
		close(l.closed)
		l.m.mu.Lock()
		if l.m.groups[l.group] == l {
			delete(l.m.groups, l.group)
		}
		l.m.mu.Unlock()
	})
	return nil
}

// Addr is the node's advertised raft address, the same for every group.
func (l *Layer) Addr() net.Addr { return l.m.advertise }

// Dial opens a connection to the same group on the peer at address.
func (l *Layer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := l.m.dial(string(address), timeout)
	if err != nil {
		return nil, err
	}
	if h := header(l.group); h != nil {
		c.SetWriteDeadline(time.Now().Add(timeout))
		if _, err := c.Write(h); err != nil {
			c.Close()
			return nil, fmt.Errorf("raftmux: send group header to %s: %w", address, err)
		}
		c.SetWriteDeadline(time.Time{})
	}
	return c, nil
}
