package raftnode

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
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
// The gate lets a heartbeat take the fast path only when its term is at
// most the node's current term, which only grows: handling it can then
// leave the term as it is or ignore the heartbeat, never raise it. Any
// other heartbeat (and every heartbeat before raft runs) is handed to the
// main loop with the other RPCs, where a term change is ordered with
// dispatching.
type heartbeatGate struct {
	*raft.NetworkTransport
	// term is the node's current term; nil (before raft runs) sends
	// every heartbeat through the main loop.
	term atomic.Pointer[func() uint64]

	rpcs     chan raft.RPC
	stop     chan struct{}
	stopOnce sync.Once
}

func newHeartbeatGate(t *raft.NetworkTransport) *heartbeatGate {
	g := &heartbeatGate{NetworkTransport: t, rpcs: make(chan raft.RPC), stop: make(chan struct{})}
	go g.forward()
	return g
}

// watchTerm gives the gate the node's current term once raft runs.
func (g *heartbeatGate) watchTerm(term func() uint64) { g.term.Store(&term) }

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
	term := g.term.Load()
	return ok && term != nil && req.Term <= (*term)()
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
