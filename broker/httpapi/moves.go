package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/raftgroups"
)

// Replica moves, with a replication factor: group 0 records which nodes
// should replicate each data group, and each group's leader moves its
// replicas there (add as non-voter, catch up, promote, remove the old).

// groupReplicasJSON is one data group's replicas.
type groupReplicasJSON struct {
	Group uint32 `json:"group"`
	// Replicas are the nodes that should replicate the group, the
	// preferred leader first.
	Replicas []json.Number `json:"replicas"`
	// Leader is the group's leader (null while none is known); Members
	// its raft configuration as the leader reports it.
	Leader  *json.Number  `json:"leader"`
	Members []json.Number `json:"members"`
	// Moving: the members are not yet the replicas.
	Moving bool `json:"moving"`
}

// noFactor answers 409 when the cluster has no replication factor: every
// node replicates every group, there is nothing to move.
func (s *Server) noFactor(w http.ResponseWriter) bool {
	if s.remote != nil {
		return false
	}
	writeError(w, http.StatusConflict, "not_replicated", "every node replicates every raft group: replicas move only with --replication-factor")
	return true
}

// dataGroup parses the {group} path value: a data group of the cluster.
func (s *Server) dataGroup(w http.ResponseWriter, r *http.Request) (uint32, bool) {
	g, err := strconv.ParseUint(r.PathValue("group"), 10, 32)
	if err != nil || g == 0 || g >= uint64(s.groupCount()) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("this cluster has no data group %q (1 to %d)", r.PathValue("group"), s.groupCount()-1))
		return 0, false
	}
	return uint32(g), true
}

// groupReplicas lists every data group's replicas, leader and members.
func (s *Server) groupReplicas(w http.ResponseWriter, r *http.Request) {
	if s.noFactor(w) {
		return
	}
	out := []groupReplicasJSON{}
	for g := uint32(1); g < uint32(s.groupCount()); g++ {
		out = append(out, s.replicasJSON(g))
	}
	writeJSON(w, http.StatusOK, map[string]any{"groups": out})
}

func (s *Server) replicasJSON(g uint32) groupReplicasJSON {
	want, l := s.replicasOf(g), s.remote[g].Leader()
	gj := groupReplicasJSON{Group: g, Replicas: numbers(want), Members: numbers(l.Members)}
	if l.ID != "" {
		gj.Leader = ptr(json.Number(l.ID))
	}
	// Moving until every member is a recorded replica and votes.
	want = slices.Sorted(slices.Values(want))
	gj.Moving = len(l.Members) == 0 || !slices.Equal(slices.Sorted(slices.Values(l.Members)), want) ||
		!slices.Equal(slices.Sorted(slices.Values(l.Voters)), want)
	return gj
}

func numbers(ids []string) []json.Number {
	out := make([]json.Number, len(ids))
	for i, id := range ids {
		out[i] = json.Number(id)
	}
	return out
}

// setGroupReplicas records (PUT {"replicas": [...]}) the nodes that
// should replicate a data group, the preferred leader first.
func (s *Server) setGroupReplicas(w http.ResponseWriter, r *http.Request) {
	if s.noFactor(w) {
		return
	}
	g, ok := s.dataGroup(w, r)
	if !ok {
		return
	}
	var req struct {
		Replicas []json.Number `json:"replicas"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	if len(req.Replicas) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request", "replicas lists the nodes to replicate the group, the preferred leader first")
		return
	}
	nodes := make([]string, len(req.Replicas))
	for i, n := range req.Replicas {
		nodes[i] = n.String()
	}
	if err := s.svc.SetReplicas(g, nodes); err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.replicasJSON(g))
}

// decommission moves every replica off a node ({"node"}): in each data
// group it replicates, the node is replaced by the voter that replicates
// the fewest groups among those the group lacks. The node keeps serving
// until its groups have moved (GET /api/v1/cluster/groups); then it can
// be removed.
func (s *Server) decommission(w http.ResponseWriter, r *http.Request) {
	if s.noFactor(w) {
		return
	}
	var req struct {
		Node json.Number `json:"node"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	members, err := s.svc.Members()
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	node := req.Node.String()
	spare := s.liveVoters(r.Context(), members, node) // the voters that may take replicas
	if !slices.ContainsFunc(members, func(m broker.Member) bool { return m.ID == node }) {
		writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("node %q is not a member of the cluster", node))
		return
	}
	plan, err := raftgroups.PlanDecommission(s.allReplicas(), node, spare)
	if err != nil {
		writeError(w, http.StatusConflict, "cannot_decommission", err.Error())
		return
	}
	s.record(w, plan, map[string]any{"node": req.Node})
}

// allReplicas is every data group's replicas now, by group.
func (s *Server) allReplicas() map[uint32][]string {
	out := map[uint32][]string{}
	for g := uint32(1); g < uint32(s.groupCount()); g++ {
		out[g] = s.replicasOf(g)
	}
	return out
}

// rebalance evens out the replicas the voters hold (a node just added
// holds none): while one holds two more than another, one of its
// replicas moves there.
func (s *Server) rebalance(w http.ResponseWriter, r *http.Request) {
	if s.noFactor(w) {
		return
	}
	members, err := s.svc.Members()
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	s.record(w, raftgroups.PlanRebalance(s.allReplicas(), s.liveVoters(r.Context(), members, "")), map[string]any{})
}

// liveVoters are the voters among members, other than except, whose
// /health answers within a second: a replica is never planned onto a
// node that is down (its move would wait for it).
func (s *Server) liveVoters(ctx context.Context, members []broker.Member, except string) []string {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	live := make([]bool, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		if !m.Voter || m.ID == except || m.HTTPAddr == "" {
			continue
		}
		wg.Go(func() {
			_, err := s.fetchHealth(ctx, m.HTTPAddr)
			live[i] = err == nil
		})
	}
	wg.Wait()
	var out []string
	for i, m := range members {
		if live[i] {
			out = append(out, m.ID)
		}
	}
	return out
}

// record writes plan's replicas in group 0, group by group, and answers
// answer with the groups moved under "groups".
func (s *Server) record(w http.ResponseWriter, plan map[uint32][]string, answer map[string]any) {
	moved := []groupReplicasJSON{}
	for _, g := range slices.Sorted(maps.Keys(plan)) {
		if err := s.svc.SetReplicas(g, plan[g]); err != nil {
			s.writeBrokerError(w, err)
			return
		}
		moved = append(moved, s.replicasJSON(g))
	}
	answer["groups"] = moved
	writeJSON(w, http.StatusOK, answer)
}
