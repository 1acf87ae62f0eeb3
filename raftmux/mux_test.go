package raftmux

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

func tcpDial(address string, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", address, timeout)
}

func newMux(t *testing.T) *Mux {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := New(ln, ln.Addr(), tcpDial, nil)
	t.Cleanup(func() { m.Close() })
	return m
}

func layer(t *testing.T, m *Mux, g uint32) *Layer {
	t.Helper()
	l, err := m.Layer(g)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// acceptOne accepts one connection on l and reads n bytes from it.
func acceptOne(t *testing.T, l *Layer, n int) []byte {
	t.Helper()
	got := make(chan []byte, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		b := make([]byte, n)
		if _, err := io.ReadFull(c, b); err != nil {
			got <- nil
			return
		}
		got <- b
	}()
	select {
	case b := <-got:
		return b
	case <-time.After(5 * time.Second):
		t.Fatalf("group %d accepted nothing", l.group)
		return nil
	}
}

// Each group's connections reach that group's layer with their bytes
// intact, including a first byte that looks like a raft RPC type.
func TestConnectionsReachTheirGroup(t *testing.T) {
	a, b := newMux(t), newMux(t)
	for _, g := range []uint32{0, 1, 300} {
		from, to := layer(t, a, g), layer(t, b, g)
		c, err := from.Dial(raft.ServerAddress(b.Addr().String()), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		msg := []byte{0, byte(g), Magic, 'x'}
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if got := acceptOne(t, to, len(msg)); !bytes.Equal(got, msg) {
			t.Fatalf("group %d received %v, want %v", g, got, msg)
		}
		c.Close()
	}
}

// A peer without groups dials plainly and writes raft's stream from its
// first byte: that is group 0.
func TestAConnectionWithoutHeaderIsGroupZero(t *testing.T) {
	m := newMux(t)
	zero, one := layer(t, m, 0), layer(t, m, 1)
	go func() { // group 1 must not get it
		if c, err := one.Accept(); err == nil {
			c.Close()
			t.Error("group 1 accepted a connection without a header")
		}
	}()
	c, err := net.Dial("tcp", m.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := []byte{1, 2, 3}
	c.Write(msg)
	if got := acceptOne(t, zero, 3); !bytes.Equal(got, msg) {
		t.Fatalf("group 0 received %v, want %v", got, msg)
	}
}

// A connection for a group that does not run here is closed, and a
// malformed header too; the listener goes on serving.
func TestUnknownGroupAndBadHeaderAreClosed(t *testing.T) {
	m := newMux(t)
	five := layer(t, m, 5)
	for _, h := range [][]byte{header(9), {Magic, 0}, {Magic, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}} {
		c, err := net.Dial("tcp", m.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write(h)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("header %v: read answered %v, want the connection closed (EOF)", h, err)
		}
		c.Close()
	}
	c, err := five.Dial(raft.ServerAddress(m.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte{42})
	if got := acceptOne(t, five, 1); !bytes.Equal(got, []byte{42}) {
		t.Fatalf("after the bad connections group 5 received %v", got)
	}
}

// Closing one group's layer ends its Accept and frees the group for a new
// layer; the other groups and the listener go on. Closing the mux ends
// every layer.
func TestCloseOneLayerThenTheMux(t *testing.T) {
	m := newMux(t)
	one, two := layer(t, m, 1), layer(t, m, 2)
	if _, err := m.Layer(1); err == nil {
		t.Fatal("a second layer for an open group was handed out")
	}
	one.Close()
	if _, err := one.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed layer: %v", err)
	}
	again := layer(t, m, 1)
	c, err := again.Dial(raft.ServerAddress(m.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte{7})
	if got := acceptOne(t, again, 1); !bytes.Equal(got, []byte{7}) {
		t.Fatalf("the group's new layer received %v", got)
	}
	c.Close()
	m.Close()
	if _, err := two.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after the mux closed: %v", err)
	}
	if _, err := m.Layer(3); err == nil {
		t.Fatal("a closed mux handed out a layer")
	}
}

// countFSM counts the entries applied to it.
type countFSM struct {
	mu sync.Mutex
	n  int
}

func (f *countFSM) Apply(*raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return f.n
}
func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, errors.New("no snapshots") }
func (f *countFSM) Restore(io.ReadCloser) error         { return errors.New("no snapshots") }

// Three nodes, each with one listener, run two raft groups. Each group
// elects its own leader and commits on its own, and moving one group's
// leadership leaves the other's where it is.
func TestTwoRaftGroupsShareOneListenerPerNode(t *testing.T) {
	const nodes, groups = 3, 2
	muxes := make([]*Mux, nodes)
	for i := range muxes {
		muxes[i] = newMux(t)
	}
	var rafts [groups][nodes]*raft.Raft
	for g := range groups {
		var conf raft.Configuration
		for i, m := range muxes {
			conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(fmt.Sprint(i)), Address: raft.ServerAddress(m.Addr().String())})
		}
		for i, m := range muxes {
			trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
				Stream: layer(t, m, uint32(g)), MaxPool: 2, Timeout: 2 * time.Second,
				Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Error}),
			})
			rc := raft.DefaultConfig()
			rc.LocalID = conf.Servers[i].ID
			rc.Logger = hclog.New(&hclog.LoggerOptions{Name: fmt.Sprintf("g%d-n%d", g, i), Level: hclog.Error})
			rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
			logs, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
			if err := raft.BootstrapCluster(rc, logs, logs, snaps, trans, conf); err != nil {
				t.Fatal(err)
			}
			r, err := raft.NewRaft(rc, &countFSM{}, logs, logs, snaps, trans)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Shutdown().Error() })
			rafts[g][i] = r
		}
	}
	leaderOf := func(g int) int {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			for i, r := range rafts[g] {
				if r.State() == raft.Leader {
					return i
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("group %d elected no leader", g)
		return -1
	}
	for g := range groups {
		r := rafts[g][leaderOf(g)]
		for k := 1; k <= 10; k++ {
			f := r.Apply([]byte("x"), 5*time.Second)
			if err := f.Error(); err != nil {
				t.Fatalf("group %d apply %d: %v", g, k, err)
			}
			if got := f.Response().(int); got != k {
				t.Fatalf("group %d entry %d applied as the %dth: the groups' logs mixed", g, k, got)
			}
		}
	}
	// Move group 0's leadership to another node; group 1's stays.
	l0, l1 := leaderOf(0), leaderOf(1)
	target := (l0 + 1) % nodes
	if err := rafts[0][l0].LeadershipTransferToServer(raft.ServerID(fmt.Sprint(target)), raft.ServerAddress(muxes[target].Addr().String())).Error(); err != nil {
		t.Fatal(err)
	}
	if got := leaderOf(0); got != target {
		t.Fatalf("group 0 led by node %d after the transfer to %d", got, target)
	}
	if got := leaderOf(1); got != l1 {
		t.Fatalf("group 1's leader moved from %d to %d with group 0's", l1, got)
	}
}

// A term probe is answered by a group that answers probes, also group 0,
// and by nothing else; the group's raft stream is not touched.
func TestTermProbes(t *testing.T) {
	m := newMux(t)
	zero, five, six := layer(t, m, 0), layer(t, m, 5), layer(t, m, 6)
	zero.AnswerProbes(func() (uint64, bool) { return 3, true })
	five.AnswerProbes(func() (uint64, bool) { return 1 << 40, true })
	six.AnswerProbes(func() (uint64, bool) { return 0, false }) // its term unreadable
	addr := m.Addr().String()
	for _, c := range []struct {
		l    *Layer
		want uint64
	}{{zero, 3}, {five, 1 << 40}} {
		if got, err := c.l.ProbeTerm(addr, time.Second); err != nil || got != c.want {
			t.Fatalf("group %d probe: %d, %v; want %d", c.l.group, got, err, c.want)
		}
	}
	if got, err := six.ProbeTerm(addr, time.Second); err == nil {
		t.Fatalf("group 6 cannot read its term, yet a probe got %d", got)
	}
	other := newMux(t)
	seven := layer(t, other, 7)
	if got, err := seven.ProbeTerm(addr, time.Second); err == nil {
		t.Fatalf("group 7 does not run there, yet a probe got %d", got)
	}
	c, err := five.Dial(raft.ServerAddress(addr), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte{42})
	if got := acceptOne(t, five, 1); !bytes.Equal(got, []byte{42}) {
		t.Fatalf("after the probes group 5 received %v", got)
	}
}
