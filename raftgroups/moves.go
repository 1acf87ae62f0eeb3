package raftgroups

import (
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// Replica moves. Group 0 records the nodes that should replicate a data
// group (broker.Service.SetReplicas); the group's leader walks its raft
// configuration there one change at a time, so the group keeps a quorum
// of caught-up voters throughout:
//
//  1. a node it should have joins as a non-voter: it gets a snapshot and
//     the log since, and counts in no quorum while it catches up;
//  2. a non-voter that has applied the leader's commit index becomes a
//     voter;
//  3. once every node it should have votes, a member it should not have
//     is removed; the leader, when it is one of them, first hands its
//     leadership to the preferred replica, which then removes it.
//
// Each node starts its member of a group it should now replicate and
// stops the member of one that removed it (node/moves.go).

// maxCatchingUp bounds the groups a node leads that have a member
// catching up at once: each costs a snapshot sent and a log streamed, so
// a decommission moves a node's groups a few at a time, not all at once.
const maxCatchingUp = 1

// caughtUpSlack is how far behind the leader's commit index a non-voter
// may be and count as caught up (Consul's autopilot allows 250 entries).
const caughtUpSlack = 256

// moveReplicas takes data group g (led by this node) one step towards the
// replicas group 0 records for it, adding a non-voter only when mayAdd.
// It reports whether it added one.
func (s *Set) moveReplicas(g *Group, mayAdd bool) bool {
	want, err := s.recorded(g.ID)
	if err != nil || len(want) == 0 || !s.metaCurrent() {
		return false
	}
	have, err := configuration(g.Node.Raft)
	if err != nil {
		return false
	}
	r := g.Node.Raft
	// A non-voter the record no longer names (a move re-planned while it
	// caught up) leaves first: removing it touches no quorum, and it would
	// hold the slot of the one that catches up.
	for _, h := range have {
		if h.Suffrage != raft.Voter && !slices.Contains(want, string(h.ID)) {
			if err := r.RemoveServer(h.ID, 0, 5*time.Second).Error(); err != nil {
				s.log.Warn("could not remove a non-voter the record no longer names", "group", g.ID, "member", h.ID, "err", err)
			} else {
				s.log.Info("removed a non-voter the record no longer names", "group", g.ID, "member", h.ID)
			}
			return false
		}
	}
	for _, id := range want {
		if _, ok := find(have, raft.ServerID(id)); ok || !mayAdd {
			continue // one catching up at a time: the others wait for its promotion
		}
		addr, ok := s.raftAddr(id)
		if !ok {
			continue
		}
		if err := r.AddNonvoter(raft.ServerID(id), addr, 0, 5*time.Second).Error(); err != nil {
			s.log.Warn("could not add a replica to a raft group", "group", g.ID, "member", id, "err", err)
			return false
		}
		s.log.Info("added a replica to a raft group as a non-voter: it catches up", "group", g.ID, "member", id)
		return true
	}
	for _, id := range want {
		h, ok := find(have, raft.ServerID(id))
		if !ok {
			return false // not added yet: nothing is removed before it votes
		}
		if h.Suffrage == raft.Voter {
			continue
		}
		// Within caughtUpSlack entries of the commit index sampled before
		// asking: under a steady stream of writes a replica's applied
		// index trails the leader's by the entries in flight.
		commit := r.CommitIndex()
		if s.cfg.CaughtUp == nil || !s.cfg.CaughtUp(id, g.ID, commit-min(commit, caughtUpSlack)) {
			return false // still catching up: nothing is removed before it votes
		}
		if err := r.AddVoter(h.ID, h.Address, 0, 5*time.Second).Error(); err != nil {
			s.log.Warn("could not promote a caught-up replica", "group", g.ID, "member", id, "err", err)
		} else {
			s.log.Info("promoted a caught-up replica to voter", "group", g.ID, "member", id)
		}
		return false
	}
	s.mu.Lock()
	// A member removed while its heartbeats failed is no longer watched:
	// no resumed heartbeat will clear its mark when it is added again.
	for id := range s.unreachable[g.ID] {
		if _, ok := find(have, id); !ok {
			delete(s.unreachable[g.ID], id)
		}
	}
	down := slices.ContainsFunc(want, func(id string) bool { return s.unreachable[g.ID][raft.ServerID(id)] })
	s.mu.Unlock()
	if down {
		return false // a new voter fails its heartbeats: keep the old ones until it answers
	}
	for _, h := range have {
		if slices.Contains(want, string(h.ID)) {
			continue
		}
		if h.ID == s.self {
			s.handOver(g, have, want)
			return false
		}
		if err := r.RemoveServer(h.ID, 0, 5*time.Second).Error(); err != nil {
			s.log.Warn("could not remove a replica from a raft group", "group", g.ID, "member", h.ID, "err", err)
		} else {
			s.log.Info("removed a replica from a raft group", "group", g.ID, "member", h.ID)
		}
		return false
	}
	return false
}

// handOver hands the leadership of g, which this node leaves, to the
// first of want that votes and answers its heartbeats, at most once per
// handOffBackoff (a transfer stalls the group's writes while it runs).
func (s *Set) handOver(g *Group, have []raft.Server, want []string) {
	s.mu.Lock()
	if time.Now().Before(s.notBefore[g.ID]) {
		s.mu.Unlock()
		return
	}
	var to raft.Server
	for _, id := range want {
		if v, ok := voter(have, raft.ServerID(id)); ok && !s.unreachable[g.ID][v.ID] {
			to = v
			break
		}
	}
	if to.ID == "" {
		s.mu.Unlock()
		return
	}
	s.notBefore[g.ID] = time.Now().Add(handOffBackoff)
	s.mu.Unlock()
	if err := g.Node.Raft.LeadershipTransferToServer(to.ID, to.Address).Error(); err != nil {
		s.log.Warn("could not hand over a raft group this node leaves", "group", g.ID, "to", to.ID, "err", err)
	}
}

// catchingUp reports whether g (led by this node) has a non-voter that
// its record names: a replica catching up.
func (s *Set) catchingUp(g *Group) bool {
	want, err := s.recorded(g.ID)
	servers, cerr := configuration(g.Node.Raft)
	return err == nil && cerr == nil && slices.ContainsFunc(servers, func(sv raft.Server) bool {
		return sv.Suffrage != raft.Voter && slices.Contains(want, string(sv.ID))
	})
}

// metaCurrent reports whether this node's copy of group 0 (the replica
// directory, the members' addresses) is current: it leads group 0 or has
// heard from its leader lately. A lagging copy could undo a newer move.
func (s *Set) metaCurrent() bool {
	meta := s.All()[0].Node.Raft
	return meta.State() == raft.Leader || time.Since(meta.LastContact()) <= metaContact
}

// raftAddr is node id's raft address, from group 0's configuration: every
// group of a node shares its raft listener.
func (s *Set) raftAddr(id string) (raft.ServerAddress, bool) {
	servers, err := configuration(s.All()[0].Node.Raft)
	if err != nil {
		return "", false
	}
	sv, ok := find(servers, raft.ServerID(id))
	return sv.Address, ok
}

// Moving reports, for data group g led by this node, whether its raft
// configuration differs from the replicas group 0 records: a move is
// under way. False on a node that does not lead g.
func (s *Set) Moving(g uint32) bool {
	grp := s.Get(g)
	if grp == nil || grp.Node.Raft.State() != raft.Leader {
		return false
	}
	have, err := configuration(grp.Node.Raft)
	want := s.Replicas(g)
	if err != nil || want == nil || len(have) != len(want) {
		return err == nil && want != nil
	}
	for _, h := range have {
		if h.Suffrage != raft.Voter || !slices.Contains(want, string(h.ID)) {
			return true
		}
	}
	return false
}
