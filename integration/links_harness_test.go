package integration

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
)

// links puts a TCP proxy in front of every node's raft listener so a test
// can cut the raft link between any two nodes: a network partition on one
// machine. Node i listens and dials from 127.0.0.<i+1>, so the proxy in
// front of a node tells its peers apart by their source address; peers
// reach node i only through its proxy (its --advertise-raft).
type links struct {
	t     testing.TB
	mu    sync.Mutex
	cut   map[[2]int]bool
	conns map[[2]int]map[net.Conn]bool // open connections per link
}

// linkKey names the link between nodes a and b, either direction.
func linkKey(a, b int) [2]int { return [2]int{min(a, b), max(a, b)} }

// startPartitionableCluster starts a cluster whose raft links pass
// through proxies the returned links can cut and heal.
func startPartitionableCluster(t testing.TB, size int, extra ...string) (*cluster, *links) {
	t.Helper()
	c, l := newPartitionableCluster(t, size)
	c.start(extra...)
	return c, l
}

// newPartitionableCluster prepares such a cluster without starting it.
func newPartitionableCluster(t testing.TB, size int) (*cluster, *links) {
	l := &links{t: t, cut: map[[2]int]bool{}, conns: map[[2]int]map[net.Conn]bool{}}
	c := newCluster(t, size)
	for _, n := range c.nodes {
		n.raftAddr = freeAddrOn(t, nodeIP(n.id))
		n.raftAdvertise = l.proxy(n.id, n.raftAddr)
	}
	return c, l
}

// nodeIP is the loopback address node id listens and dials from.
func nodeIP(id int) string { return fmt.Sprintf("127.0.0.%d", id+1) }

// proxy listens for connections to node dst and forwards those whose link
// is not cut to target; it returns the address peers should dial.
func (l *links) proxy(dst int, target string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go l.forward(dst, in, target)
		}
	}()
	return ln.Addr().String()
}

func (l *links) forward(dst int, in net.Conn, target string) {
	src := 0
	ip := in.RemoteAddr().(*net.TCPAddr).IP.To4()
	if ip != nil && ip[0] == 127 {
		src = int(ip[3]) - 1
	}
	out, err := net.Dial("tcp", target)
	if err != nil {
		in.Close()
		return
	}
	key := linkKey(src, dst)
	l.mu.Lock()
	if l.cut[key] {
		l.mu.Unlock()
		in.Close()
		out.Close()
		return
	}
	if l.conns[key] == nil {
		l.conns[key] = map[net.Conn]bool{}
	}
	l.conns[key][in] = true
	l.mu.Unlock()
	go func() { io.Copy(out, in); out.Close(); in.Close() }()
	io.Copy(in, out)
	in.Close()
	out.Close()
	l.mu.Lock()
	delete(l.conns[key], in)
	l.mu.Unlock()
}

// isolate cuts every raft link between node id and the others.
func (l *links) isolate(c *cluster, id int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range c.nodes {
		if n.id == id {
			continue
		}
		key := linkKey(id, n.id)
		l.cut[key] = true
		for conn := range l.conns[key] {
			conn.Close() // the forwarder closes the other side
		}
	}
}

// heal restores every link.
func (l *links) heal() {
	l.mu.Lock()
	l.cut = map[[2]int]bool{}
	l.mu.Unlock()
}
