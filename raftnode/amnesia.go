package raftnode

import (
	"time"

	"github.com/waggle-mq/waggle/raftmux"
)

// A voter whose data directory was wiped and that is started again with
// its old flags bootstraps an empty log and would vote as if it had never
// acknowledged anything. Raft's safety rests on a voter keeping what it
// acknowledged: with one other voter down, its vote could elect a leader
// that lacks entries the cluster committed with its help (KIP-853 gives
// Kafka's voters a directory id against exactly this).
//
// So a node of a static cluster that starts on a new data directory grants
// no vote at first, and asks its peers for their raft terms (a probe on
// the raft listener, which a peer answers whether or not its raft runs
// yet). A new cluster answers term 1 (bootstrapped) or 0 (not started),
// and the node votes from then on. A term of 2 or more means the cluster
// has elected leaders: the directory may be a wiped one, and the node
// votes again only once its log reaches the commit index of the first
// append it gets from a leader of that term or a newer one. Such a leader
// was elected without this node's vote since the wipe, so its log holds
// every committed entry, also those this node acknowledged before; and
// every entry committed with this node's acknowledgement was committed
// before the wipe, so that commit index covers them. The node's own commit
// index must reach it: raft counts there only entries it accepted.
//
// While it withholds its vote the node does not stand for election either
// (voteGuard.RequestVote): raft grants a candidate's vote for itself
// without asking anyone.
//
// The guard errs to the safe side: a node first started after its
// cluster's first election waits to catch up before it votes, and a node
// that hears from no peer grants no vote until one answers. The new
// directory is marked in raft's stable store before anything else is
// written, so a restart before the guard lifts asks the peers again. A
// node started with --join has no peers to ask and is not guarded.

// amnesiaProbeTimeout bounds one probe of one peer.
const amnesiaProbeTimeout = time.Second

// askPeers probes the node's peers, round after round, until one answers
// or stop is closed, and gives the guard the highest term answered.
func (g *voteGuard) askPeers(layer *raftmux.Layer, cfg NodeConfig, stop <-chan struct{}) {
	type answer struct {
		term uint64
		err  error
	}
	for round := 0; ; round++ {
		answers := make(chan answer, len(cfg.Peers))
		asked := 0
		for _, p := range cfg.Peers {
			if p.ID == cfg.ID {
				continue
			}
			asked++
			go func(addr string) {
				term, err := layer.ProbeTerm(addr, amnesiaProbeTimeout)
				answers <- answer{term, err}
			}(p.Addr)
		}
		var term uint64
		heard := false
		for range asked {
			if a := <-answers; a.err == nil {
				term, heard = max(term, a.term), true
			}
		}
		if heard {
			g.learnClusterTerm(term, cfg)
			return
		}
		if round%20 == 0 {
			cfg.Logger.Warn("a new data directory: withholding votes until a peer answers whether the cluster has run before", "peers", asked)
		}
		select {
		case <-stop:
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// learnClusterTerm records the highest term the peers answered.
func (g *voteGuard) learnClusterTerm(term uint64, cfg NodeConfig) {
	if term <= 1 {
		g.clusterTerm.Store(1)
		return
	}
	cfg.Logger.Warn("this data directory is new, but the cluster has elected leaders before: this node may have acknowledged "+
		"entries it no longer holds, so it withholds its vote until its log has caught up with a leader of the term below",
		"term", term)
	g.clusterTerm.Store(term)
}
