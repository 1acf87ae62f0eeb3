package kafka

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
)

// Partition reassignments (KIP-455: AlterPartitionAssignments 45,
// ListPartitionReassignments 46), in a cluster with a replication factor.
// A Kafka partition's replicas are its raft group's: every partition of
// every topic and queue placed in data group g is replicated by g's
// nodes. So a reassignment moves a whole group: it records the group's
// new replicas in group 0 (broker.Service.SetReplicas, as `waggle cluster
// move` does), and the group's leader moves them there in the background
// (add a non-voter, let it catch up, promote it, remove the others;
// raftgroups/moves.go). A group is moving while its raft configuration,
// as its leader reports it, is not the set group 0 records.

// replicaView is what the reassignment APIs read of a data group: a
// *broker.RemoteGroup of Config.Directory (a fake in unit tests).
type replicaView interface {
	// Replicas are the nodes group 0 records for the group, its
	// preferred leader first.
	Replicas() []string
	// Leader is the group's leader as a replica reports it; its Members
	// are the group's raft configuration, empty when no leader answered.
	Leader() broker.GroupLeader
}

// replicaViews are the groups of dir as the reassignment APIs read them:
// nil at group 0, which never moves.
func replicaViews(dir []*broker.RemoteGroup) []replicaView {
	out := make([]replicaView, len(dir))
	for g, rg := range dir {
		if rg != nil { // a nil *RemoteGroup must stay a nil view
			out[g] = rg
		}
	}
	return out
}

// groupMove is a data group's replicas as group 0 records them and as its
// leader has them.
type groupMove struct {
	leader   string   // the node leading the group
	recorded []string // where the group should be, preferred leader first
	members  []string // its raft configuration: voters and non-voters
	voters   []string // the voters among members (nil: not known)
}

// moving reports whether the group's members are not yet its recorded
// replicas, or one of them does not vote yet.
func (m groupMove) moving() bool {
	want := slices.Sorted(slices.Values(m.recorded))
	return !slices.Equal(slices.Sorted(slices.Values(m.members)), want) ||
		(m.voters != nil && !slices.Equal(slices.Sorted(slices.Values(m.voters)), want))
}

// replicas are every node the group has or should have: the recorded
// replicas, then the members on their way out (KIP-455's replica set
// during a reassignment: the target and the replicas being removed).
func (m groupMove) replicas() []string { return append(slices.Clone(m.recorded), m.removing()...) }

// adding are the recorded replicas not yet in the group's configuration.
func (m groupMove) adding() []string { return without(m.recorded, m.members) }

// removing are the members not among the recorded replicas.
func (m groupMove) removing() []string { return without(m.members, m.recorded) }

// stopped is what a cancel records: the members the group has now, so
// the move stops where it is. Waggle cannot go back to the replicas from
// before the move: it does not keep them, and those already removed have
// left the group. The leader comes first (it keeps the lead), then the
// members in the order of the record they were moving to. A group caught
// with more members than a group may be recorded with keeps the leader
// and the recorded replicas first; the rest are removed.
func (m groupMove) stopped() []string {
	var out []string
	if slices.Contains(m.members, m.leader) {
		out = append(out, m.leader)
	}
	for _, n := range m.recorded {
		if slices.Contains(m.members, n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	for _, n := range m.members {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out[:min(len(out), command.MaxReplicas)]
}

// without is a's elements not in b, in a's order.
func without(a, b []string) []string {
	var out []string
	for _, n := range a {
		if !slices.Contains(b, n) {
			out = append(out, n)
		}
	}
	return out
}

// brokerIDs are node ids as Kafka broker ids, in order.
func brokerIDs(nodes []string) []int32 {
	out := make([]int32, 0, len(nodes))
	for _, n := range nodes {
		if id, err := strconv.ParseInt(n, 10, 32); err == nil {
			out = append(out, int32(id))
		}
	}
	return out
}

// leaderWait bounds how long a reassignment request waits for a data
// group's leader to answer (an election, or a hand-over in a move, is
// under way).
const leaderWait = 3 * time.Second

// leaderRetry is how often it asks again meanwhile.
const leaderRetry = 250 * time.Millisecond

// waitUntil is when a reassignment request stops waiting for leaders: its
// timeout, at most leaderWait from now.
func waitUntil(timeoutMillis int32) time.Time {
	wait := leaderWait
	if t := time.Duration(timeoutMillis) * time.Millisecond; t > 0 && t < wait {
		wait = t
	}
	return time.Now().Add(wait)
}

// moveOf reads data group g's move, asking again until its leader reports
// the group's members or deadline passes (false).
func (s *Server) moveOf(g uint32, deadline time.Time) (mv groupMove, ok bool) {
	v := s.views[g]
	s.retryUntil(deadline, func() bool {
		l := v.Leader()
		mv, ok = groupMove{leader: l.ID, recorded: v.Replicas(), members: l.Members, voters: l.Voters}, len(l.Members) > 0
		return ok
	})
	return mv, ok
}

// lookupTopicUntil is lookupTopic, asked again while the topic's raft
// group has no leader to answer (a move hands the lead over) until
// deadline passes.
func (s *Server) lookupTopicUntil(name string, deadline time.Time) (t broker.TopicInfo, ok bool, err error) {
	s.retryUntil(deadline, func() bool {
		t, ok, err = s.lookupTopic(name)
		return err == nil || !(errors.Is(err, errBehind) || remoteUnavailable(err))
	})
	return t, ok, err
}

// retryUntil calls try every leaderRetry until it succeeds, deadline
// passes or the listener closes.
func (s *Server) retryUntil(deadline time.Time, try func() bool) {
	for !try() {
		if time.Now().Add(leaderRetry).After(deadline) {
			return
		}
		select {
		case <-time.After(leaderRetry):
		case <-s.ctx.Done():
			return
		}
	}
}

// errNoGroupLeader is the message of a request that needed a data group's
// members while the group had no leader to report them.
func errNoGroupLeader(g uint32) string {
	return fmt.Sprintf("raft group %d has no leader to report its members (an election is under way): retry", g)
}

// checkReplicas is why replicas cannot be a data group's replicas, or ""
// (broker.Service.SetReplicas checks the same again on group 0's leader).
func checkReplicas(replicas []int32, voters []string) string {
	switch {
	case len(replicas) == 0:
		return "an empty replica list: name the brokers to replicate the partition, the preferred leader first (a null list cancels a reassignment)"
	case len(replicas) > command.MaxReplicas:
		return fmt.Sprintf("%d replicas: a raft group has at most %d", len(replicas), command.MaxReplicas)
	}
	for i, r := range replicas {
		if slices.Contains(replicas[:i], r) {
			return fmt.Sprintf("broker %d is named twice", r)
		}
		if !slices.Contains(voters, strconv.Itoa(int(r))) {
			return fmt.Sprintf("broker %d is not a voting member of the cluster", r)
		}
	}
	return ""
}

// voters are the node ids of the cluster's voters (group 0's members):
// the brokers a data group may be moved to.
func (s *Server) voters() ([]string, error) {
	members, err := s.svc.Members()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range members {
		if m.Voter {
			out = append(out, m.ID)
		}
	}
	return out, nil
}

// setReplicasCode is the Kafka error code of a failed SetReplicas. A
// write this node could not make as group 0's leader (it lost the lead),
// or whose outcome is unknown, answers NOT_CONTROLLER, which clients
// retry: recording replicas sets a state, so doing it twice is harmless.
func setReplicasCode(err error) int16 {
	switch {
	case errors.Is(err, broker.ErrInvalid):
		return kerr.InvalidReplicaAssignment.Code
	case errors.Is(err, broker.ErrNotLeader), errors.Is(err, broker.ErrOutcomeUnknown):
		return kerr.NotController.Code
	default:
		return errCode(err)
	}
}
