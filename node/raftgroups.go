package node

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/raftgroups"
)

// joinGroups tells each group's service which group it serves and how to
// reach its leader, and lists the groups' services, as they are and
// forwarding their writes to the group's leader (one of each with one
// group: a follower forwards what it cannot refuse, a Kafka topic created
// through it, say).
func joinGroups(set *raftgroups.Set, client *http.Client, scheme string) (groups, forwarding []*broker.Service) {
	all := set.All()
	for _, g := range all {
		g.Svc.JoinGroup(g.ID, all[0].Svc, client, scheme)
		groups, forwarding = append(groups, g.Svc), append(forwarding, g.Svc.Forwarding())
	}
	return groups, forwarding
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

// groupHealth reports each raft group's state on this node for /health;
// nil when the cluster has only group 0.
func groupHealth(set *raftgroups.Set) func() []broker.Health {
	if len(set.All()) == 1 {
		return nil
	}
	return func() []broker.Health {
		out := make([]broker.Health, 0, len(set.All()))
		for _, g := range set.All() {
			out = append(out, g.Svc.Health())
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

// groupLog is log naming raft group g, when the node runs more than one:
// a single-group node's lines stay as they were.
func groupLog(log *slog.Logger, set *raftgroups.Set, g *raftgroups.Group) *slog.Logger {
	if len(set.All()) == 1 {
		return log
	}
	return log.With("group", g.ID)
}
