package raftnode

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/raftmux"
	"github.com/waggle-mq/waggle/store"
	"github.com/waggle-mq/waggle/tlsconf"
)

// Three nodes run two raft groups, each group with its own store and raft
// directory, over one raft listener per node. A topic created in one group
// exists on every member of that group and on none of the other's.
func TestGroupsShareANodesListener(t *testing.T) {
	const nodes, groups = 3, 2
	muxes := make([]*raftmux.Mux, nodes)
	var peers []Peer
	for i := range muxes {
		m, err := Listen("127.0.0.1:0", "127.0.0.1:0", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		muxes[i] = m
		peers = append(peers, Peer{ID: fmt.Sprint(i + 1), Addr: m.Addr().String()})
	}
	var members [groups][nodes]*Node
	var stores [groups][nodes]*store.Store
	for g := range groups {
		for i := range nodes {
			dir := filepath.Join(t.TempDir(), fmt.Sprintf("group-%d", g))
			st, err := store.Open(filepath.Join(dir, "state"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			n, err := StartNode(NodeConfig{ID: peers[i].ID, Mux: muxes[i], Group: uint32(g), Dir: dir, Peers: peers}, st)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n.Shutdown() })
			members[g][i], stores[g][i] = n, st
		}
	}
	leader := func(g int) *Node {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			for _, n := range members[g] {
				if n.Raft.State() == raft.Leader {
					return n
				}
			}
		}
		t.Fatalf("group %d has no leader", g)
		return nil
	}
	for g := range groups {
		cmd := &command.CreateTopicCommand{NowMs: 1, Name: fmt.Sprintf("topic-of-group-%d", g), Partitions: 1}
		if err := leader(g).Raft.Apply(command.Seal(cmd.Encode()), 5*time.Second).Error(); err != nil {
			t.Fatalf("group %d: %v", g, err)
		}
	}
	for g := range groups {
		for i, st := range stores[g] {
			for other := range groups {
				name := fmt.Sprintf("topic-of-group-%d", other)
				want := other == g
				waitForTrue(t, fmt.Sprintf("node %d of group %d holds %s: %v", i+1, g, name, want), func() bool {
					err := st.View(func(tx *store.Tx) error { _, err := tx.Queue(name); return err })
					return (err == nil) == want && (err == nil || errors.Is(err, store.ErrNotFound))
				})
			}
		}
	}
}

// waitForTrue polls cond for up to 10 s.
func waitForTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not true after 10 s: %s", what)
		}
	}
}

// Over mutual TLS a group's connection reaches its layer on the peer; a
// peer whose certificate another CA signed is refused, and the listener
// logs the failed handshake at error level (an operator's CA rotation
// gone wrong must show).
func TestListenWithTLSRoutesGroupsAndLogsForeignPeers(t *testing.T) {
	certs, foreign := t.TempDir(), t.TempDir()
	hosts := []string{"127.0.0.1"}
	if err := tlsconf.DevCerts(certs, []string{"a", "b"}, hosts); err != nil {
		t.Fatal(err)
	}
	if err := tlsconf.DevCerts(foreign, []string{"x"}, hosts); err != nil {
		t.Fatal(err)
	}
	load := func(dir, name string) *tlsconf.Config {
		c, err := tlsconf.Load(tlsconf.Files{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem"), CA: filepath.Join(dir, "ca.pem")})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	var logged syncBuffer
	listen := func(c *tlsconf.Config, log hclog.Logger) *raftmux.Mux {
		m, err := Listen("127.0.0.1:0", "127.0.0.1:0", c, log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	a := listen(load(certs, "a"), nil)
	b := listen(load(certs, "b"), hclog.New(&hclog.LoggerOptions{Output: &logged, Level: hclog.Info}))
	x := listen(load(foreign, "x"), nil)
	from, to := mustLayer(t, a, 3), mustLayer(t, b, 3)
	c, err := from.Dial(raft.ServerAddress(b.Addr().String()), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("hello"))
	in, err := to.Accept()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(in, got); err != nil || string(got) != "hello" {
		t.Fatalf("group 3 over TLS read %q, %v", got, err)
	}
	in.Close()

	if c, err := mustLayer(t, x, 3).Dial(raft.ServerAddress(b.Addr().String()), 5*time.Second); err == nil {
		c.Close()
		t.Fatal("a peer of another CA completed the handshake")
	}
	waitForTrue(t, "the refused handshake is logged at error level", func() bool {
		s := logged.String()
		return strings.Contains(s, "[ERROR]") && strings.Contains(s, "TLS handshake failed")
	})
}

func mustLayer(t *testing.T, m *raftmux.Mux, g uint32) *raftmux.Layer {
	t.Helper()
	l, err := m.Layer(g)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
