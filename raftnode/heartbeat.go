package raftnode

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"golang.org/x/time/rate"
)

// heartbeatGate is raft's network transport with the heartbeat fast path
// narrowed to heartbeats that cannot change the node's term.
//
// hashicorp/raft (v1.7.3) answers a heartbeat on the transport's
// goroutine, beside its main loop, so that a node busy writing its log or
// installing a snapshot still hears its leader in time. But a heartbeat
// from a newer term makes the node a follower of that term right there,
// with nothing to order it against the main loop. A leader whose main loop
// is dispatching entries at that moment reads the new term, stamps its own
// entries with it, stores them and only then steps down. The new leader's
// entries at those indexes carry the same term, so by raft's log matching
// rule the old leader takes them for its own and keeps its entries: the
// two replicas apply different entries at one index, and their states
// part for good (hashicorp/raft#695; waggle's soak caught it as a state
// digest that differed on one node after a run of elections).
//
// The gate lets a heartbeat take the fast path only on a follower, and
// only when its term is at most the follower's current term, which only
// grows: handling it then leaves the term as it is or ignores the
// heartbeat, never raises it. Any other heartbeat (and every heartbeat
// before raft runs) is handed to the main loop with the other RPCs, where
// a term change is ordered with dispatching. Candidates go there too:
// raft's handler rewrites the term of any node that is not a follower, and
// a candidate's main loop raises its term at any moment, so on the fast
// path the two could cross and take the term back. What is left is a
// follower whose election timer fires as the heartbeat is handled; the
// fix for that belongs in raft itself.
type heartbeatGate struct {
	*raft.NetworkTransport
	// node is raft (a nodeState), nil before it runs: until then every
	// heartbeat goes through the main loop.
	node atomic.Value

	rpcs     chan raft.RPC
	stop     chan struct{}
	stopOnce sync.Once

	snapshotSend *rate.Limiter // paces InstallSnapshot (transport.go); nil: no pace
	// pacing ends the pace's waits (stopPacing), so a paced send does not
	// hold raft's shutdown up.
	pacing     context.Context
	stopPacing context.CancelFunc
}

func newHeartbeatGate(t *raft.NetworkTransport) *heartbeatGate {
	g := &heartbeatGate{NetworkTransport: t, rpcs: make(chan raft.RPC), stop: make(chan struct{})}
	g.pacing, g.stopPacing = context.WithCancel(context.Background())
	go g.forward()
	return g
}

// nodeState is what the gate asks of the node's raft (*raft.Raft).
type nodeState interface {
	CurrentTerm() uint64
	State() raft.RaftState
}

// watch gives the gate the node's raft once it runs.
func (g *heartbeatGate) watch(n nodeState) { g.node.Store(n) }

// Consumer is the channel raft's main loop reads RPCs from: the
// transport's, and the heartbeats the gate holds back from the fast path.
func (g *heartbeatGate) Consumer() <-chan raft.RPC { return g.rpcs }

// SetHeartbeatHandler implements raft.Transport: fn answers the
// heartbeats the fast path may take; the rest go to the main loop.
func (g *heartbeatGate) SetHeartbeatHandler(fn func(raft.RPC)) {
	g.NetworkTransport.SetHeartbeatHandler(func(rpc raft.RPC) {
		if fn != nil && g.fastPathSafe(rpc) {
			fn(rpc)
			return
		}
		g.toMainLoop(rpc)
	})
}

func (g *heartbeatGate) fastPathSafe(rpc raft.RPC) bool {
	req, ok := rpc.Command.(*raft.AppendEntriesRequest)
	n, running := g.node.Load().(nodeState)
	return ok && running && n.State() == raft.Follower && req.Term <= n.CurrentTerm()
}

func (g *heartbeatGate) forward() {
	in := g.NetworkTransport.Consumer()
	for {
		select {
		case rpc := <-in:
			g.toMainLoop(rpc)
		case <-g.stop:
			return
		}
	}
}

func (g *heartbeatGate) toMainLoop(rpc raft.RPC) {
	select {
	case g.rpcs <- rpc:
	case <-g.stop:
		rpc.Respond(nil, raft.ErrTransportShutdown)
	}
}

// Close implements raft.WithClose.
func (g *heartbeatGate) Close() error {
	g.stopOnce.Do(func() { close(g.stop) })
	return g.NetworkTransport.Close()
}
