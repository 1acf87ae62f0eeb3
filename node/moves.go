package node

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/broker/httpapi"
	"github.com/waggle-mq/waggle/kafka"
	"github.com/waggle-mq/waggle/raftgroups"
)

// With a replication factor a data group's replicas move when group 0's
// record of them changes (raftgroups/moves.go has the leader's side).
// Each node follows the record for its own members:
//
//   - a group it should now replicate: it starts a member that waits for
//     the leader to add it, and serves the group's requests itself (rather
//     than relaying them) once the member votes and has applied what its
//     leader committed;
//   - a group it should no longer replicate: once the group's leader has
//     removed it, it relays the group's requests to the replicas again,
//     stops its member and deletes its directory.

// followEvery is how often a node compares its groups with the record.
const followEvery = time.Second

// groupLoops are the goroutines a node runs for one of its raft groups
// (maintenance, log format raises), stopped when it leaves the group.
type groupLoops struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// mover is what a node needs to follow replica moves: its groups, its
// frontends' tables, and how it reaches groups it does not run.
type mover struct {
	n      *Node
	api    *httpapi.Server
	remote []*broker.RemoteGroup // by group, every data group (directory)
	kafka  []kafka.Broker        // by group, each data group's *kafka.Remote
	served map[uint32]bool       // the groups whose requests this node serves itself
}

// follow keeps the node's groups as group 0 records them until ctx ends.
func (m *mover) follow(ctx context.Context) {
	tick := time.NewTicker(followEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for g := uint32(1); g < uint32(len(m.remote)); g++ {
			m.step(g)
		}
	}
}

// step takes group g one step towards the record on this node.
func (m *mover) step(g uint32) {
	n := m.n
	want := slices.Contains(n.set.Replicas(g), n.id)
	grp := n.set.Get(g)
	switch {
	case grp == nil && want:
		joined, err := n.set.Join(g, func(grp *raftgroups.Group) {
			grp.Svc.JoinGroup(g, n.set.All()[0].Svc, n.peerClient, n.scheme)
		})
		if err != nil {
			n.log.Error("could not start a member of a raft group this node now replicates", "group", g, "err", err)
			return
		}
		n.log.Info("started a member of a raft group this node now replicates; it waits for the leader", "group", g)
		n.startGroupLoops(joined)
	case grp != nil && want && !m.served[g] && m.caughtUp(grp):
		m.api.PlaceGroup(g, grp.Svc, grp.Svc.Forwarding(), true)
		n.ks.PlaceGroup(g, grp.Svc, grp.Svc.Forwarding())
		m.served[g] = true
		n.log.Info("serving a raft group's requests: its member has caught up", "group", g)
	case grp != nil && !want && m.removed(grp):
		m.leave(grp)
	}
}

// leaveDrain is how long a node that left a group keeps its member open
// after it stopped routing requests there: requests that started on it
// finish first (a long poll is cut short by the close).
const leaveDrain = 5 * time.Second

// leave relays g's requests to its replicas from now on, lets the
// requests that started on this node's member finish, then stops the
// member and deletes its directory.
func (m *mover) leave(g *raftgroups.Group) {
	n := m.n
	// The HTTP table keeps the member beside the mark for the drain: a
	// request that read the mark before the swap still finds it.
	m.api.PlaceGroup(g.ID, g.Svc, g.Svc.Forwarding(), false)
	n.ks.PlaceGroup(g.ID, m.kafka[g.ID], m.kafka[g.ID])
	m.served[g.ID] = false
	m.remote[g.ID].ForgetLeader()
	select {
	case <-n.ctx.Done():
		return
	case <-time.After(leaveDrain):
	}
	n.stopGroupLoops(g.ID)
	if err := n.set.Leave(g.ID); err != nil {
		n.log.Error("could not delete the member of a raft group this node left", "group", g.ID, "err", err)
		return
	}
	m.api.PlaceGroup(g.ID, nil, nil, false)
	n.log.Info("left a raft group: its replicas moved away", "group", g.ID)
}

// caughtUp reports whether this node's member of g votes and has applied
// about what its leader committed: its copy may serve reads.
func (m *mover) caughtUp(g *raftgroups.Group) bool {
	r := g.Node.Raft
	if isVoter(r, m.n.id) != 1 {
		return false
	}
	h := g.Svc.Health()
	return h.LeaderID != "" && h.Applied+servedSlack >= h.Commit
}

// servedSlack is how far a member's applied index may trail its commit
// index for it to serve the group: under a steady stream of writes the
// two are rarely equal, and a follower's reads lag as much anyway.
const servedSlack = 256

// removed reports whether g's leader has taken this node's member out of
// the group, committed. A removed member hears nothing more from the
// leader, so its own configuration may still list it: the leader is asked
// (through the replicas the record names).
func (m *mover) removed(g *raftgroups.Group) bool {
	if g.Node.Raft.State() == raft.Leader {
		return false // it hands its leadership over first
	}
	ctx, cancel := context.WithTimeout(m.n.ctx, 5*time.Second)
	defer cancel()
	members, err := m.remote[g.ID].CommittedMembers(ctx)
	return err == nil && len(members) > 0 && !slices.Contains(members, m.n.id)
}

// isVoter is 1 when id votes in r's configuration, 0 when it is a
// non-voter, -1 when it is not a member (or the configuration cannot be
// read: 0).
func isVoter(r *raft.Raft, id string) int {
	f := r.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	for _, sv := range f.Configuration().Servers {
		if string(sv.ID) == id {
			if sv.Suffrage == raft.Voter {
				return 1
			}
			return 0
		}
	}
	return -1
}

// peerCaughtUp reports whether node's member of raft group group has
// applied index, from its /health (raftgroups.Config.CaughtUp).
func peerCaughtUp(ctx context.Context, meta *broker.Service, client *http.Client, scheme string) func(node string, group uint32, index uint64) bool {
	return func(node string, group uint32, index uint64) bool {
		members, err := meta.Members()
		if err != nil {
			return false
		}
		i := slices.IndexFunc(members, func(m broker.Member) bool { return m.ID == node })
		if i < 0 || members[i].HTTPAddr == "" {
			return false
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		h, err := fetchPeerHealth(ctx, client, scheme, members[i].HTTPAddr)
		if err != nil {
			return false
		}
		for _, raw := range h.Groups {
			var g struct {
				ID      uint32 `json:"id"`
				Applied uint64 `json:"applied"`
			}
			if json.Unmarshal(raw, &g) == nil && g.ID == group {
				return g.Applied >= index
			}
		}
		return false
	}
}

// replaceDeadEvery is how often group 0's leader looks for dead nodes
// (Config.ReplaceDeadAfter).
const replaceDeadEvery = 2 * time.Second

// replaceDead runs on every node; while it leads group 0 it moves the
// replicas of a voter whose /health has not answered for after to the
// live voters with the fewest (raftgroups.PlanDecommission), as
// `waggle cluster decommission` would. The dead node stays a member of
// the cluster: when it comes back it holds no replica, and a rebalance
// gives it its share again.
func (m *mover) replaceDead(ctx context.Context, after time.Duration) {
	n := m.n
	meta := n.set.All()[0].Svc
	downSince := map[string]time.Time{}
	tick := time.NewTicker(replaceDeadEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !meta.IsLeader() {
			clear(downSince) // a new leader watches afresh
			continue
		}
		members, err := meta.Members()
		if err != nil {
			continue
		}
		var live []string
		for id := range downSince {
			if !slices.ContainsFunc(members, func(mb broker.Member) bool { return mb.ID == id && mb.Voter }) {
				delete(downSince, id) // removed from the cluster
			}
		}
		for _, mb := range members {
			if !mb.Voter {
				continue
			}
			if mb.ID == n.id || m.answers(ctx, mb) {
				delete(downSince, mb.ID)
				live = append(live, mb.ID)
			} else if downSince[mb.ID].IsZero() {
				downSince[mb.ID] = time.Now()
			}
		}
		for id, since := range downSince {
			if time.Since(since) >= after {
				m.moveOff(id, live, since)
			}
		}
	}
}

// answers reports whether member's /health answers within a second.
func (m *mover) answers(ctx context.Context, member broker.Member) bool {
	if member.HTTPAddr == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := fetchPeerHealth(ctx, m.n.peerClient, m.n.scheme, member.HTTPAddr)
	return err == nil
}

// moveOff records new replicas, among live, for every data group dead
// replicates (nothing when it replicates none).
func (m *mover) moveOff(dead string, live []string, since time.Time) {
	n := m.n
	replicas := map[uint32][]string{}
	for g := uint32(1); g < uint32(len(m.remote)); g++ {
		replicas[g] = n.set.Replicas(g)
	}
	plan, err := raftgroups.PlanDecommission(replicas, dead, live)
	if err != nil {
		n.log.Warn("a dead node's replicas cannot move: too few live voters", "node", dead, "err", err)
		return
	}
	meta := n.set.All()[0].Svc
	for g, nodes := range plan {
		if err := meta.SetReplicas(g, nodes); err != nil {
			n.log.Warn("could not move a dead node's replica", "node", dead, "group", g, "err", err)
			return
		}
		n.log.Warn("moving a dead node's replica", "node", dead, "down", time.Since(since).Round(time.Second), "group", g, "replicas", nodes)
	}
}
