package raftnode

import (
	"strconv"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// voteGuard is a transport that answers vote requests "not granted" for a
// node repaired from its peers until its log holds an entry of a term
// above noVoteThrough (see repair.go for why). Every other RPC passes.
type voteGuard struct {
	*raft.NetworkTransport
	rpcs          chan raft.RPC
	id            raft.ServerID
	noVoteThrough uint64
	logs          raft.StableStore
	raft          atomic.Pointer[raft.Raft]
	lifted        atomic.Bool
}

func newVoteGuard(t *raft.NetworkTransport, id raft.ServerID, logs raft.StableStore, noVoteThrough uint64) *voteGuard {
	g := &voteGuard{NetworkTransport: t, rpcs: make(chan raft.RPC), id: id, noVoteThrough: noVoteThrough, logs: logs}
	go g.filter()
	return g
}

// Consumer is the channel raft reads RPCs from.
func (g *voteGuard) Consumer() <-chan raft.RPC { return g.rpcs }

func (g *voteGuard) filter() {
	for rpc := range g.NetworkTransport.Consumer() {
		switch req := rpc.Command.(type) {
		case *raft.RequestVoteRequest:
			if g.withholding() {
				rpc.Respond(&raft.RequestVoteResponse{RPCHeader: g.header(), Term: req.Term}, nil)
				continue
			}
		case *raft.RequestPreVoteRequest:
			if g.withholding() {
				rpc.Respond(&raft.RequestPreVoteResponse{RPCHeader: g.header(), Term: req.Term}, nil)
				continue
			}
		}
		g.rpcs <- rpc
	}
}

func (g *voteGuard) header() raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(g.id), Addr: []byte(g.LocalAddr())}
}

// withholding reports whether votes are still withheld, and lifts the
// guard for good (also across restarts) once the log has caught up.
func (g *voteGuard) withholding() bool {
	if g.lifted.Load() {
		return false
	}
	r := g.raft.Load()
	if r == nil {
		return true
	}
	lastTerm, _ := strconv.ParseUint(r.Stats()["last_log_term"], 10, 64)
	if lastTerm <= g.noVoteThrough {
		return true
	}
	if err := g.logs.SetUint64(keyNoVoteThroughTerm, 0); err != nil {
		return true
	}
	g.lifted.Store(true)
	return false
}
