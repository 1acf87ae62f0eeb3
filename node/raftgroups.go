package node

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/broker/httpapi"
	"github.com/waggle-mq/waggle/raftgroups"
)

// joinGroups tells each group's service which group it serves and how to
// reach its leader, and lists the cluster's count groups by id: the
// services of those this node runs and serves (raftgroups'
// ServedAtStart), as they are and forwarding their
// writes to the group's leader (one of each with one group: a follower
// forwards what it cannot refuse, a Kafka topic created through it, say),
// and the others, which it reaches through their replicas (with a
// replication factor). Each list has the other's gaps.
func joinGroups(set *raftgroups.Set, count int, client *http.Client, scheme string) (groups, forwarding []*broker.Service, remote []*broker.RemoteGroup) {
	all := set.All()
	meta := all[0].Svc
	groups, forwarding = make([]*broker.Service, count), make([]*broker.Service, count)
	for _, g := range all {
		g.Svc.JoinGroup(g.ID, meta, client, scheme)
		if set.ServedAtStart(g.ID) { // else relayed until its member has caught up (node/moves.go)
			groups[g.ID], forwarding[g.ID] = g.Svc, g.Svc.Forwarding()
		}
	}
	if set.Placement().Everywhere() {
		return groups, forwarding, nil
	}
	remote = make([]*broker.RemoteGroup, count)
	for id := range uint32(count) {
		if groups[id] == nil {
			remote[id] = broker.NewRemoteGroup(id, meta, replicasOf(set, id), client, scheme)
		}
	}
	return groups, forwarding, remote
}

// directory reaches every data group through its replicas (nil for group
// 0): those in remote as they are, the node's own through the same
// calls, for what only a group's leader knows. Nil without a replication
// factor.
func directory(set *raftgroups.Set, remote []*broker.RemoteGroup, client *http.Client, scheme string) []*broker.RemoteGroup {
	if remote == nil {
		return nil
	}
	out := make([]*broker.RemoteGroup, len(remote))
	for id := uint32(1); id < uint32(len(remote)); id++ {
		out[id] = remote[id]
		if out[id] == nil {
			out[id] = broker.NewRemoteGroup(id, set.All()[0].Svc, replicasOf(set, id), client, scheme)
		}
	}
	return out
}

// replicasOf answers the nodes that replicate group g now.
func replicasOf(set *raftgroups.Set, g uint32) func() []string {
	return func() []string { return set.Replicas(g) }
}

// asListener is groups as a listener takes them: each local service as
// it is, each group in remote as remoteAs makes it (nil remote: every
// group is local).
func asListener[T any](groups []*broker.Service, remote []*broker.RemoteGroup, remoteAs func(*broker.RemoteGroup) T) []T {
	out := make([]T, len(groups))
	for g, svc := range groups {
		if svc != nil {
			out[g] = any(svc).(T)
		} else if remote != nil && remote[g] != nil {
			out[g] = remoteAs(remote[g])
		}
	}
	return out
}

// remoteGroups is remote as the HTTP API takes it (nil stays nil).
func remoteGroups(remote []*broker.RemoteGroup) []httpapi.RemoteGroup {
	if remote == nil {
		return nil
	}
	out := make([]httpapi.RemoteGroup, len(remote))
	for g, rg := range remote {
		if rg != nil {
			out[g] = rg
		}
	}
	return out
}

// mapAll converts each of in: services to the interface a listener
// takes, groups to their services.
func mapAll[T, U any](in []T, as func(T) U) []U {
	var out []U
	for _, v := range in {
		out = append(out, as(v))
	}
	return out
}

// groupHealth reports each raft group's state on this node for /health
// (those it runs now: replicas move); nil when the cluster has only
// group 0.
func groupHealth(set *raftgroups.Set, count int) func() []broker.Health {
	if count <= 1 {
		return nil
	}
	return func() []broker.Health {
		out := make([]broker.Health, 0, len(set.All()))
		for _, g := range set.All() {
			h := g.Svc.Health()
			h.Moving = set.Moving(g.ID)
			out = append(out, h)
		}
		return out
	}
}

// canLead reports whether a member may be handed a raft group's
// leadership: its /health answers (a node shutting down has closed its
// HTTP listener) and its storage is not full. Its questions end with ctx.
func canLead(ctx context.Context, meta *broker.Service, client *http.Client, scheme string) func(id string) bool {
	return func(id string) bool {
		members, err := meta.Members()
		if err != nil {
			return false
		}
		for _, m := range members {
			if m.ID != id || m.HTTPAddr == "" {
				continue
			}
			h, err := fetchPeerHealth(ctx, client, scheme, m.HTTPAddr)
			return err == nil && (h.StorageFull == nil || !*h.StorageFull)
		}
		return false
	}
}

// groupLog is log naming raft group g, unless the node runs group 0
// alone: a single-group node's lines stay as they were.
func groupLog(log *slog.Logger, set *raftgroups.Set, g *raftgroups.Group) *slog.Logger {
	if g.ID == 0 && len(set.All()) == 1 {
		return log
	}
	return log.With("group", g.ID)
}
