package raftnode

import (
	"errors"
	"strconv"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// voteGuard is a transport that answers vote requests "not granted" for a
// node repaired from its peers until its log holds an entry of a term
// above noVoteThrough (see repair.go for why), or, for a node on a new data
// directory (see amnesia.go), until its peers say the cluster is new or its
// log has caught up with a leader's commit. Every other RPC passes.
type voteGuard struct {
	*heartbeatGate
	rpcs          chan raft.RPC
	id            raft.ServerID
	noVoteThrough uint64
	logs          raft.StableStore
	raft          atomic.Pointer[raft.Raft]
	lifted        atomic.Bool
	logger        hclog.Logger

	// amnesia: the node started on a new data directory. clusterTerm is
	// the highest term its peers answered (0: none yet; 1: a new
	// cluster); catchUpTo is the commit index of the first append from a
	// leader of that term or a newer one (0: none yet).
	amnesia     bool
	clusterTerm atomic.Uint64
	catchUpTo   atomic.Uint64
}

func newVoteGuard(t *heartbeatGate, id raft.ServerID, logs raft.StableStore, noVoteThrough uint64, amnesia bool, logger hclog.Logger) *voteGuard {
	g := &voteGuard{heartbeatGate: t, rpcs: make(chan raft.RPC), id: id, noVoteThrough: noVoteThrough, amnesia: amnesia, logs: logs, logger: logger}
	go g.filter()
	return g
}

// Consumer is the channel raft reads RPCs from.
func (g *voteGuard) Consumer() <-chan raft.RPC { return g.rpcs }

func (g *voteGuard) filter() {
	for rpc := range g.heartbeatGate.Consumer() {
		switch req := rpc.Command.(type) {
		case *raft.AppendEntriesRequest:
			if t := g.clusterTerm.Load(); g.amnesia && t > 1 && req.Term >= t && req.LeaderCommitIndex > 0 {
				g.catchUpTo.CompareAndSwap(0, req.LeaderCommitIndex)
			}
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

// errNoCampaign fails this node's own vote requests while it withholds
// votes. raft grants a candidate's vote for itself without asking the
// transport: a node that may have forgotten entries must not stand either,
// or its own vote and one from a peer behind it could elect it without
// them. (Any error but raft's "unexpected command" one counts as refused.)
var errNoCampaign = errors.New("raftnode: withholding votes, so not standing for election until the log has caught up")

// RequestPreVote implements raft.WithPreVote's transport call: refused
// while votes are withheld (see errNoCampaign).
func (g *voteGuard) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if g.withholding() {
		return errNoCampaign
	}
	return g.heartbeatGate.RequestPreVote(id, target, args, resp)
}

// RequestVote implements raft.Transport: refused while votes are withheld.
func (g *voteGuard) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if g.withholding() {
		return errNoCampaign
	}
	return g.heartbeatGate.RequestVote(id, target, args, resp)
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
	stats := r.Stats()
	if g.amnesia {
		switch t := g.clusterTerm.Load(); {
		case t == 0:
			return true // no peer has answered yet
		case t > 1:
			// raft's commit index on a follower only counts entries it
			// accepted and holds.
			to := g.catchUpTo.Load()
			commit, _ := strconv.ParseUint(stats["commit_index"], 10, 64)
			snap, _ := strconv.ParseUint(stats["last_snapshot_index"], 10, 64)
			if to == 0 || max(commit, snap) < to {
				return true
			}
		}
	} else if lastTerm, _ := strconv.ParseUint(stats["last_log_term"], 10, 64); lastTerm <= g.noVoteThrough {
		return true
	}
	if err := errors.Join(g.logs.SetUint64(keyNoVoteThroughTerm, 0), g.logs.SetUint64(keyNewDirectory, 0)); err != nil {
		return true
	}
	if g.lifted.Swap(true) {
		return false
	}
	g.logger.Warn("votes again: the log has caught up")
	return false
}
