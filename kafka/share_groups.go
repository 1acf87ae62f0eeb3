package kafka

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/broker"
)

// Share groups (KIP-932): membership. Like KIP-848 groups, a share group
// lives in its coordinator's memory (the raft leader of the group's raft
// group); after a leader change members are unknown and join again. What
// must survive, the records each member holds and their delivery counts,
// lives in the replicated leases (fsm/share.go), not here.
//
// Every member is assigned every partition of the topics it subscribes
// to: in a share group a partition is not owned, its records are leased
// out as members fetch (one lease per partition at a time, as HTTP pops),
// so the assignment only tells each member where to fetch.

// Bounds on what share groups make the leader hold.
const (
	maxShareGroupMembers = 1000
	shareMinHeartbeat    = 100 * time.Millisecond
)

// Share group states, as ShareGroupDescribe and ListGroups name them.
const groupTypeShare = "share"

type smember struct {
	id, rackID           string
	clientID, clientHost string
	epoch, previousEpoch int32
	subscribed           []string // sorted
	lastSeen             time.Time
}

type sgroup struct {
	name    string
	epoch   int32
	members map[string]*smember
	topics  map[string]topicMeta // subscribed topics that exist
	// The group's configs share.session.timeout.ms and
	// share.heartbeat.interval.ms as of its last heartbeat.
	sessionTimeout, heartbeatInterval time.Duration
}

// shareTopicNames is every topic a share group's members subscribe to,
// plus extra: what a heartbeat looks up before shareHeartbeat.
func (co *coordinator) shareTopicNames(group string, extra []string) []string {
	co.mu.Lock()
	defer co.mu.Unlock()
	var members map[string]*smember
	if g := co.shares[group]; g != nil {
		members = g.members
	}
	return subscribedNames(members, func(m *smember) []string { return m.subscribed }, extra)
}

func shareHeartbeatError(req *kmsg.ShareGroupHeartbeatRequest, code int16, msg string) *kmsg.ShareGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	resp.ErrorCode = code
	if msg != "" {
		resp.ErrorMessage = kmsg.StringPtr(msg)
	}
	return resp
}

// checkShareHeartbeat refuses malformed heartbeats (INVALID_REQUEST).
func checkShareHeartbeat(req *kmsg.ShareGroupHeartbeatRequest) (int16, string) {
	switch {
	case req.GroupID == "":
		return kerr.InvalidRequest.Code, "GroupId can't be empty."
	case !broker.ValidGroupName(req.GroupID):
		return kerr.InvalidGroupID.Code, ""
	case req.MemberID == "" || len(req.MemberID) > maxMemberIDLen:
		return kerr.InvalidRequest.Code, "MemberId must be given (clients make their own) and at most 255 bytes."
	case req.MemberEpoch < epochLeave:
		return kerr.InvalidRequest.Code, "MemberEpoch is invalid."
	case req.RackID != nil && *req.RackID == "":
		return kerr.InvalidRequest.Code, "RackId can't be empty."
	case len(req.SubscribedTopicNames) > maxSubscribedTopics:
		return kerr.InvalidRequest.Code, "Too many subscribed topics."
	case req.MemberEpoch == epochJoin && len(req.SubscribedTopicNames) == 0:
		return kerr.InvalidRequest.Code, "SubscribedTopicNames must be set in first request."
	}
	return 0, ""
}

// shareHeartbeat serves a ShareGroupHeartbeat. fetched holds the topics
// shareTopicNames named, as looked up since (nil: no such topic);
// session and heartbeat are the group's configs (zero: the defaults).
func (co *coordinator) shareHeartbeat(req *kmsg.ShareGroupHeartbeatRequest, clientID, clientHost string, fetched map[string]*topicMeta, session, heartbeat time.Duration) *kmsg.ShareGroupHeartbeatResponse {
	if code, msg := checkShareHeartbeat(req); code != 0 {
		return shareHeartbeatError(req, code, msg)
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	now := co.now()
	if co.consumers[req.GroupID] != nil || co.groups[req.GroupID] != nil && len(co.groups[req.GroupID].members) > 0 {
		return shareHeartbeatError(req, kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a share group.", req.GroupID))
	}
	g := co.shares[req.GroupID]
	if req.MemberEpoch == epochLeave {
		if g == nil || g.members[req.MemberID] == nil {
			return shareHeartbeatError(req, kerr.UnknownMemberID.Code, "")
		}
		co.removeShareMember(g, req.MemberID)
		resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		resp.MemberID, resp.MemberEpoch = kmsg.StringPtr(req.MemberID), epochLeave
		return resp
	}
	var m *smember
	bump := false
	if req.MemberEpoch == epochJoin {
		if g == nil {
			if len(co.groups)+len(co.consumers)+len(co.shares) >= maxGroups {
				return shareHeartbeatError(req, kerr.GroupMaxSizeReached.Code, "Too many groups on this coordinator.")
			}
			g = &sgroup{name: req.GroupID, members: map[string]*smember{}, topics: map[string]topicMeta{}}
			co.shares[req.GroupID] = g
		}
		if m = g.members[req.MemberID]; m == nil {
			if len(g.members) >= maxShareGroupMembers {
				return shareHeartbeatError(req, kerr.GroupMaxSizeReached.Code, "")
			}
			m = &smember{id: req.MemberID}
			g.members[m.id] = m
			bump = true
		}
	} else {
		switch {
		case g == nil || g.members[req.MemberID] == nil:
			return shareHeartbeatError(req, kerr.UnknownMemberID.Code, "")
		case req.MemberEpoch != g.members[req.MemberID].epoch && req.MemberEpoch != g.members[req.MemberID].previousEpoch:
			return shareHeartbeatError(req, kerr.FencedMemberEpoch.Code, "")
		}
		m = g.members[req.MemberID]
	}
	g.sessionTimeout, g.heartbeatInterval = session, heartbeat
	m.lastSeen, m.clientID, m.clientHost = now, clientID, clientHost
	if req.RackID != nil {
		m.rackID = *req.RackID
	}
	if req.SubscribedTopicNames != nil {
		subs := slices.Compact(slices.Sorted(slices.Values(req.SubscribedTopicNames)))
		if !slices.Equal(subs, m.subscribed) {
			m.subscribed, bump = subs, true
		}
	}
	if g.refreshTopics(fetched) {
		bump = true
	}
	if bump {
		g.epoch++
	}
	// No revocation in a share group: a member moves to the group's epoch
	// on its own heartbeat.
	advanced := m.epoch != g.epoch
	if advanced {
		m.previousEpoch, m.epoch = m.epoch, g.epoch
	}
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	resp.MemberID, resp.MemberEpoch = kmsg.StringPtr(m.id), m.epoch
	resp.HeartbeatIntervalMillis = int32(g.heartbeatIntervalOr(co.consumerCfg.HeartbeatInterval).Milliseconds())
	if advanced || req.SubscribedTopicNames != nil || req.MemberEpoch == epochJoin {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		for _, t := range g.assignment(m) {
			tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			tp.TopicID, tp.Partitions = t.TopicID, t.Partitions
			a.TopicPartitions = append(a.TopicPartitions, tp)
		}
		resp.Assignment = &a
	}
	return resp
}

// heartbeatIntervalOr is the group's heartbeat interval, or def.
func (g *sgroup) heartbeatIntervalOr(def time.Duration) time.Duration {
	return max(cmp.Or(g.heartbeatInterval, def), shareMinHeartbeat)
}

// refreshTopics records the topics looked up and forgets those nobody
// subscribes to; it reports whether the assignment changed.
func (g *sgroup) refreshTopics(fetched map[string]*topicMeta) bool {
	subscribed := map[string]bool{}
	for _, m := range g.members {
		for _, n := range m.subscribed {
			subscribed[n] = true
		}
	}
	return refreshTopics(g.topics, fetched, subscribed)
}

// assignment is every partition of the topics m subscribes to, by topic
// name.
func (g *sgroup) assignment(m *smember) []kmsg.AssignmentTopicPartition {
	var out []kmsg.AssignmentTopicPartition
	for _, n := range m.subscribed {
		t, ok := g.topics[n]
		if !ok {
			continue
		}
		a := kmsg.NewAssignmentTopicPartition()
		a.TopicID, a.Topic = t.id, n
		for p := range t.partitions {
			a.Partitions = append(a.Partitions, p)
		}
		out = append(out, a)
	}
	return out
}

// removeShareMember drops a member; the group goes with its last member.
// The records it holds stay leased until its session closes or their
// lock runs out.
func (co *coordinator) removeShareMember(g *sgroup, id string) {
	delete(g.members, id)
	if len(g.members) == 0 {
		delete(co.shares, g.name)
		return
	}
	g.epoch++
}

// expireShares removes members not heard from within their group's
// session timeout (share.session.timeout.ms).
func (co *coordinator) expireShares(now time.Time) {
	for _, g := range co.shares {
		timeout := cmp.Or(g.sessionTimeout, co.consumerCfg.SessionTimeout)
		for _, id := range slices.Sorted(maps.Keys(g.members)) {
			if now.Sub(g.members[id].lastSeen) > timeout {
				co.removeShareMember(g, id)
			}
		}
	}
}

// shareGroupView is a snapshot of a share group for ShareGroupDescribe
// and ListGroups.
type shareGroupView struct {
	name    string
	epoch   int32
	members []shareMemberView
}

type shareMemberView struct {
	id, rackID, clientID, clientHost string
	epoch                            int32
	subscribed                       []string
	assigned                         []kmsg.AssignmentTopicPartition
}

// state names a share group's state as Kafka does.
func (v shareGroupView) state() string {
	if len(v.members) == 0 {
		return cstateEmpty
	}
	return cstateStable
}

// describeShare snapshots one share group; false when there is none.
func (co *coordinator) describeShare(name string) (shareGroupView, bool) {
	co.mu.Lock()
	defer co.mu.Unlock()
	g := co.shares[name]
	if g == nil {
		return shareGroupView{}, false
	}
	v := shareGroupView{name: g.name, epoch: g.epoch}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		v.members = append(v.members, shareMemberView{id: m.id, rackID: m.rackID, clientID: m.clientID, clientHost: m.clientHost,
			epoch: m.epoch, subscribed: slices.Clone(m.subscribed), assigned: g.assignment(m)})
	}
	return v, true
}
