package integration

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"sync"
	"testing"
)

// links puts a TCP proxy in front of every node's raft listener so a test
// can cut the raft link between any two nodes: a network partition on one
// machine. Node i listens and dials from 127.0.0.<i+1>, so the proxy in
// front of a node tells its peers apart by their source address; peers
// reach node i only through its proxy (its --advertise-raft).
//
// A link can also be cut one way: what one node sends the other is
// dropped, while the other way still flows. Raft's messages are requests
// and answers on connections either side opens, so the receiving side
// acts on what arrives (a follower takes a leader's heartbeats) and the
// sender never hears back.
type links struct {
	t     testing.TB
	mu    sync.Mutex
	cut   map[[2]int]bool
	muted map[[2]int]bool              // from, to: bytes from one node to the other are dropped
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
	l := newLinks(t)
	c := newCluster(t, size)
	for _, n := range c.nodes {
		n.raftAddr = freeAddrOn(t, nodeIP(n.id))
		n.raftAdvertise = l.proxy(n.id, n.raftAddr)
	}
	return c, l
}

// newLinks makes links with every link whole and no proxy yet.
func newLinks(t testing.TB) *links {
	return &links{t: t, cut: map[[2]int]bool{}, muted: map[[2]int]bool{}, conns: map[[2]int]map[net.Conn]bool{}}
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
	// A connection keeps the direction it was opened with: changing it
	// closes the link's connections (cutOneWay, heal), so no stream loses
	// bytes in the middle.
	toDst, toSrc := l.muted[[2]int{src, dst}], l.muted[[2]int{dst, src}]
	l.mu.Unlock()
	go func() { relay(out, in, toDst); out.Close(); in.Close() }()
	relay(in, out, toSrc)
	in.Close()
	out.Close()
	l.mu.Lock()
	delete(l.conns[key], in)
	l.mu.Unlock()
}

// relay copies from src to dst, or reads and drops it all when muted.
func relay(dst io.Writer, src io.Reader, muted bool) {
	if muted {
		dst = io.Discard
	}
	io.Copy(dst, src)
}

// isolate cuts every raft link between node id and the others.
func (l *links) isolate(c *cluster, id int) {
	l.cutLinks(isolation(nodeIDs(c), id)...)
}

// cutLinks cuts the raft link between each pair of nodes, both ways, and
// closes the connections open on it; the others stay as they are.
func (l *links) cutLinks(pairs ...[2]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range pairs {
		key := linkKey(p[0], p[1])
		l.cut[key] = true
		for conn := range l.conns[key] {
			conn.Close() // the forwarder closes the other side
		}
	}
}

// cutOneWay drops what node from sends node to, for each pair, while the
// other way flows; it closes the connections open on those links.
func (l *links) cutOneWay(pairs ...[2]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range pairs {
		l.muted[p] = true
		for conn := range l.conns[linkKey(p[0], p[1])] {
			conn.Close()
		}
	}
}

// cutNow lists the links cut, in order.
func (l *links) cutNow() [][2]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Collect(maps.Keys(l.cut))
	slices.SortFunc(out, func(a, b [2]int) int { return cmp.Or(a[0]-b[0], a[1]-b[1]) })
	return out
}

// heal restores every link. Connections that drop one way are closed:
// their senders reconnect and are heard again.
func (l *links) heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = map[[2]int]bool{}
	for p := range l.muted {
		for conn := range l.conns[linkKey(p[0], p[1])] {
			conn.Close()
		}
	}
	l.muted = map[[2]int]bool{}
}

// nodeIDs lists the ids of c's nodes.
func nodeIDs(c *cluster) []int {
	var ids []int
	for _, n := range c.nodes {
		ids = append(ids, n.id)
	}
	return ids
}

// The partition shapes Jepsen's nemeses use, as the links they cut among
// the nodes all. Each is a set of pairs for cutLinks.

// isolation cuts node id off from every other node.
func isolation(all []int, id int) [][2]int { return split(all, []int{id}) }

// split cuts every link between the nodes of side and the rest: two
// components, side and the others (majority/minority when side is smaller
// than half).
func split(all, side []int) [][2]int {
	var cut [][2]int
	for _, a := range side {
		for _, b := range all {
			if !slices.Contains(side, b) {
				cut = append(cut, linkKey(a, b))
			}
		}
	}
	return cut
}

// ring cuts every link but those between neighbours in order (the last
// and the first are neighbours too): each node sees exactly two others,
// and every node is in a majority of its own with them.
func ring(order []int) [][2]int {
	var cut [][2]int
	for i, a := range order {
		for j := i + 1; j < len(order); j++ {
			if j != i+1 && !(i == 0 && j == len(order)-1) {
				cut = append(cut, linkKey(a, order[j]))
			}
		}
	}
	return cut
}

// bridge splits order into two halves joined through its middle node,
// which sees every other; the halves do not see each other. With five
// nodes each half and the bridge is a majority.
func bridge(order []int) [][2]int {
	mid := len(order) / 2
	return split(slices.Delete(slices.Clone(order), mid, mid+1), order[:mid])
}

// reach lists, for each node of all, the others it still has a link to
// once cut is cut.
func reach(all []int, cut [][2]int) map[int][]int {
	out := map[int][]int{}
	for _, a := range all {
		for _, b := range all {
			if a != b && !slices.Contains(cut, linkKey(a, b)) {
				out[a] = append(out[a], b)
			}
		}
	}
	return out
}
