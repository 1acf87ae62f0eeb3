package kafka

import (
	"cmp"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/broker"
)

// The KIP-848 consumer group protocol (ConsumerGroupHeartbeat): the
// coordinator, not a member, assigns partitions. Like the classic groups,
// these groups live in the raft leader's memory under the coordinator's
// lock; after a leader change members are unknown and join again with
// epoch 0. A group id is either classic or consumer at any one time.
//
// Each group has an epoch, bumped whenever what the assignment depends on
// changes (members, subscriptions, assignor, partition counts); the target
// assignment is recomputed at once and its epoch is the group's. Members
// move towards their target one heartbeat at a time (KIP-848
// reconciliation): partitions leaving a member are revoked first, and the
// member's epoch advances to the target's only once it has reported them
// gone; a partition reaches its new owner only once nobody else holds it.

// Consumer group states, as ConsumerGroupDescribe and ListGroups name them.
// The target assignment is computed as soon as the group epoch moves, so
// Assigning shows only while a group re-formed after a leader change is
// held (failover.go).
const (
	cstateEmpty       = "Empty"
	cstateAssigning   = "Assigning"
	cstateReconciling = "Reconciling"
	cstateStable      = "Stable"
)

// Server-side assignors (ConsumerGroupHeartbeat's ServerAssignor).
const (
	assignorUniform = "uniform"
	assignorRange   = "range"
)

// Member epochs with a meaning of their own (KIP-848).
const (
	epochJoin        = 0
	epochLeave       = -1
	epochStaticLeave = -2 // a static member away for a while: it keeps its partitions
)

// Bounds on what one client can make the leader hold.
const (
	maxConsumerGroupMembers = 1000   // per group: GROUP_MAX_SIZE_REACHED beyond
	maxGroups               = 10_000 // classic and consumer together
	maxSubscribedTopics     = 10_000
	maxMemberIDLen          = 255
)

// ConsumerGroupConfig tunes the KIP-848 groups.
type ConsumerGroupConfig struct {
	// SessionTimeout removes a member not heard from for this long
	// (Kafka's group.consumer.session.timeout.ms, 45 s).
	SessionTimeout time.Duration
	// HeartbeatInterval is the interval members are told to heartbeat at
	// (group.consumer.heartbeat.interval.ms, 5 s).
	HeartbeatInterval time.Duration
	// FailoverGrace is how long a new leader holds back the groups
	// re-formed on it (failover.go); zero: HeartbeatInterval plus 15 s, at
	// most SessionTimeout.
	FailoverGrace time.Duration
}

// DefaultConsumerGroupConfig is Kafka's defaults.
func DefaultConsumerGroupConfig() ConsumerGroupConfig {
	return ConsumerGroupConfig{SessionTimeout: 45 * time.Second, HeartbeatInterval: 5 * time.Second}
}

// tp is one partition of a topic named by its KIP-516 id.
type tp struct {
	topic     [16]byte
	partition int32
}

// topicMeta is what the assignors need of a topic.
type topicMeta struct {
	id         [16]byte
	partitions int32
}

type cmember struct {
	id, instanceID, rackID string
	clientID, clientHost   string
	// epoch is the member's epoch (epochStaticLeave while a static member
	// is away); previousEpoch the one before, still accepted from a
	// member whose answer carrying the new one was lost (KIP-848).
	epoch, previousEpoch int32
	names                []string // the topics it subscribes to by name, sorted
	regex                string   // the pattern it subscribes with ("": none)
	matched              []string // the topics regex matched when last resolved (shared, sorted)
	subscribed           []string // names and matched together, sorted
	assignor             string   // "" when it names none
	rebalanceTimeout     time.Duration
	lastSeen             time.Time
	assigned             map[tp]bool // partitions it was told it owns
	revoking             map[tp]bool // taken from it; it may hold them until it reports them gone
	revokeBy             time.Time   // fenced if still revoking then (its rebalance timeout)
}

type cgroup struct {
	name            string
	epoch           int32
	assignmentEpoch int32
	assignor        string
	members         map[string]*cmember
	static          map[string]string    // instance id → member id
	topics          map[string]topicMeta // subscribed topics that exist
	target          map[string]map[tp]bool
	holder          map[tp]string // who holds a partition (assigned or revoking)
	holdUntil       time.Time     // re-formed in the failover grace: nothing is assigned until then (failover.go)
	// The group's configs consumer.session.timeout.ms and
	// consumer.heartbeat.interval.ms as of its last heartbeat (zero: the
	// coordinator's).
	sessionTimeout, heartbeatInterval time.Duration
}

// regexMatch is a subscribed pattern and the topics it matched, resolved
// before a heartbeat takes the coordinator's lock.
type regexMatch struct {
	pattern string
	topics  []string // sorted; shared, not to be changed
}

// memberRegex is the pattern a member subscribes with ("" when it has
// none or is unknown).
func (co *coordinator) memberRegex(group, memberID string) string {
	co.mu.Lock()
	defer co.mu.Unlock()
	if g := co.consumers[group]; g != nil {
		if m := g.members[memberID]; m != nil {
			return m.regex
		}
	}
	return ""
}

// consumerTopicNames is every topic group's members subscribe to, plus
// extra: what a heartbeat must look up before consumerHeartbeat.
func (co *coordinator) consumerTopicNames(group string, extra []string) []string {
	co.mu.Lock()
	defer co.mu.Unlock()
	var members map[string]*cmember
	if g := co.consumers[group]; g != nil {
		members = g.members
	}
	return subscribedNames(members, func(m *cmember) []string { return m.subscribed }, extra)
}

// subscribedNames is, in order, every topic one of members subscribes to
// and every one of extra.
func subscribedNames[M any](members map[string]M, subscribed func(M) []string, extra []string) []string {
	set := map[string]bool{}
	for _, n := range extra {
		set[n] = true
	}
	for _, m := range members {
		for _, n := range subscribed(m) {
			set[n] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// heartbeatError answers a ConsumerGroupHeartbeat with an error.
func heartbeatError(req *kmsg.ConsumerGroupHeartbeatRequest, code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.ErrorCode = code
	if msg != "" {
		resp.ErrorMessage = kmsg.StringPtr(msg)
	}
	return resp
}

// checkHeartbeat refuses malformed heartbeats (INVALID_REQUEST, as Kafka
// does) before any state is looked at.
func checkHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) (int16, string) {
	switch {
	case req.Group == "":
		return kerr.InvalidRequest.Code, "GroupId can't be empty."
	case !broker.ValidGroupName(req.Group):
		return kerr.InvalidGroupID.Code, ""
	case req.MemberEpoch < epochStaticLeave:
		return kerr.InvalidRequest.Code, "MemberEpoch is invalid."
	case req.MemberID == "" && req.MemberEpoch != epochJoin:
		return kerr.InvalidRequest.Code, "MemberId can't be empty."
	case len(req.MemberID) > maxMemberIDLen || (req.InstanceID != nil && len(*req.InstanceID) > maxMemberIDLen):
		return kerr.InvalidRequest.Code, "MemberId or InstanceId too long."
	case req.InstanceID != nil && *req.InstanceID == "":
		return kerr.InvalidRequest.Code, "InstanceId can't be empty."
	case len(req.SubscribedTopicNames) > maxSubscribedTopics:
		return kerr.InvalidRequest.Code, "Too many subscribed topics."
	case req.ServerAssignor != nil && *req.ServerAssignor != assignorUniform && *req.ServerAssignor != assignorRange:
		return kerr.UnsupportedAssignor.Code, fmt.Sprintf("ServerAssignor %q is not one of uniform, range.", *req.ServerAssignor)
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		if _, err := compileTopicRegex(*req.SubscribedTopicRegex); err != nil {
			return kerr.InvalidRegularExpression.Code, err.Error()
		}
	}
	if req.MemberEpoch == epochJoin {
		switch {
		case req.RebalanceTimeoutMillis <= 0:
			return kerr.InvalidRequest.Code, "RebalanceTimeoutMs must be provided in first request."
		case len(req.Topics) > 0:
			return kerr.InvalidRequest.Code, "TopicPartitions must be empty when (re-)joining."
		case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
			return kerr.InvalidRequest.Code, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
		}
	}
	return 0, ""
}

// newMemberID is a random URL-safe id, as KIP-848 v1 clients make their own.
func newMemberID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// heartbeatLookups is what a heartbeat's handler looked up outside the
// coordinator's lock.
type heartbeatLookups struct {
	// fetched holds the topics consumerTopicNames named, as looked up
	// since (nil: no such topic); a name absent from it keeps the group's
	// last knowledge.
	fetched map[string]*topicMeta
	// regex is the member's pattern as resolved for this heartbeat (nil:
	// none).
	regex *regexMatch
	// session and heartbeat are the group's configs
	// consumer.session.timeout.ms and consumer.heartbeat.interval.ms
	// (zero: the coordinator's).
	session, heartbeat time.Duration
}

// consumerHeartbeat serves a ConsumerGroupHeartbeat.
func (co *coordinator) consumerHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, clientID, clientHost string, looked heartbeatLookups) *kmsg.ConsumerGroupHeartbeatResponse {
	if code, msg := checkHeartbeat(req); code != 0 {
		return heartbeatError(req, code, msg)
	}
	var hold time.Time
	if req.MemberEpoch == epochJoin {
		hold = co.holdFor(req.Group, 0) // the server's session timeout applies
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	now := co.now()
	if cg := co.groups[req.Group]; cg != nil {
		if len(cg.members) > 0 || len(cg.pending) > 0 {
			// KIP-848: a group is either classic or consumer; Kafka
			// answers a consumer heartbeat to a classic group so.
			return heartbeatError(req, kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a consumer group.", req.Group))
		}
		cg.stopTimer()
		delete(co.groups, req.Group) // an empty classic group gives way
	}
	if co.shares[req.Group] != nil {
		return heartbeatError(req, kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a consumer group.", req.Group))
	}
	g := co.consumers[req.Group]
	if req.MemberEpoch < 0 {
		return co.consumerLeave(g, req, now)
	}
	if g == nil {
		if req.MemberEpoch != epochJoin {
			// The group is not here (a leader change forgot it): the
			// member is unknown and joins again.
			return heartbeatError(req, kerr.UnknownMemberID.Code, "")
		}
		if len(co.groups)+len(co.consumers) >= maxGroups {
			return heartbeatError(req, kerr.GroupMaxSizeReached.Code, "Too many groups on this coordinator.")
		}
		g = &cgroup{name: req.Group, assignor: assignorUniform, members: map[string]*cmember{}, static: map[string]string{},
			topics: map[string]topicMeta{}, target: map[string]map[tp]bool{}, holder: map[tp]string{}}
		if now.Before(hold) {
			g.holdUntil = hold
		}
	}
	var m *cmember
	bump := false
	if req.MemberEpoch == epochJoin {
		var code int16
		if m, bump, code = g.join(req, now); code != 0 {
			return heartbeatError(req, code, "")
		}
		co.consumers[req.Group] = g
	} else {
		var code int16
		if m, code = g.check(req); code != 0 {
			return heartbeatError(req, code, "")
		}
	}
	m.lastSeen, m.clientID, m.clientHost = now, clientID, clientHost
	if req.RebalanceTimeoutMillis > 0 {
		m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.RackID != nil {
		m.rackID = *req.RackID
	}
	g.sessionTimeout, g.heartbeatInterval = looked.session, looked.heartbeat
	if m.subscribe(req, looked.regex) {
		bump = true
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != m.assignor {
		m.assignor, bump = *req.ServerAssignor, true
	}
	if req.Topics != nil {
		g.released(m, req.Topics)
	}
	if g.refreshTopics(looked.fetched) {
		bump = true
	}
	if g.endHold(now) {
		bump = true
	}
	if bump {
		g.newEpoch()
	}
	if req.MemberEpoch == epochJoin {
		// Joining, the member owns nothing: what it no longer targets
		// needs no revocation.
		for p := range m.assigned {
			if !g.target[m.id][p] {
				delete(m.assigned, p)
				delete(g.holder, p)
			}
		}
	}
	changed := g.reconcile(m, now)

	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.MemberID = kmsg.StringPtr(m.id)
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = int32(co.heartbeatInterval(g, now).Milliseconds())
	// The assignment goes out when it changed, and on any full request
	// (one that lists what the member owns): that re-delivers it to a
	// member whose previous answer was lost.
	if changed || req.Topics != nil || req.MemberEpoch == epochJoin {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		for _, t := range g.byTopic(m.assigned) {
			at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			at.TopicID, at.Partitions = t.TopicID, t.Partitions
			a.Topics = append(a.Topics, at)
		}
		resp.Assignment = &a
	}
	return resp
}

// join admits a member sending epoch 0: a new one, a known one joining
// again (it now owns nothing; its assignment is sent again), or a new
// incarnation of a static member that left for a while.
func (g *cgroup) join(req *kmsg.ConsumerGroupHeartbeatRequest, now time.Time) (m *cmember, bump bool, code int16) {
	id := req.MemberID
	if id == "" {
		id = newMemberID()
	}
	if req.InstanceID != nil {
		if cur := g.static[*req.InstanceID]; cur != "" && cur != id {
			old := g.members[cur]
			if old.epoch != epochStaticLeave {
				return nil, false, kerr.UnreleasedInstanceID.Code
			}
			if g.members[id] != nil {
				return nil, false, kerr.InvalidRequest.Code // the id is another member's
			}
			// KIP-848 static membership: the new incarnation takes
			// the old one's place and partitions; the others do not
			// rebalance.
			g.rename(old, id)
		}
	}
	m = g.members[id]
	if m == nil {
		if len(g.members) >= maxConsumerGroupMembers {
			return nil, false, kerr.GroupMaxSizeReached.Code
		}
		m = &cmember{id: id, assigned: map[tp]bool{}, revoking: map[tp]bool{}}
		g.members[id] = m
		bump = true
	}
	if req.InstanceID != nil && m.instanceID == "" {
		m.instanceID = *req.InstanceID
		g.static[m.instanceID] = id
	}
	// Joining with epoch 0 and no partitions, the member released what
	// it was revoking; it is sent its assignment again.
	g.releaseAll(m.revoking)
	m.revoking, m.revokeBy = map[tp]bool{}, time.Time{}
	m.previousEpoch, m.epoch = m.epoch, epochJoin
	return m, bump, 0
}

// subscribe takes a heartbeat's subscription: the names it lists, its
// pattern, and what the pattern matched (sub, resolved for this heartbeat;
// a resolution of another pattern, raced by a newer heartbeat, is left for
// the next one). It reports whether the subscribed topics changed.
func (m *cmember) subscribe(req *kmsg.ConsumerGroupHeartbeatRequest, sub *regexMatch) bool {
	if req.SubscribedTopicNames != nil {
		m.names = slices.Compact(slices.Sorted(slices.Values(req.SubscribedTopicNames)))
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.regex {
		m.regex, m.matched = *req.SubscribedTopicRegex, nil
	}
	if sub != nil && sub.pattern == m.regex {
		m.matched = sub.topics
	}
	subs := m.names
	if len(m.matched) > 0 {
		subs = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(m.names), m.matched...))))
	}
	if slices.Equal(subs, m.subscribed) {
		return false
	}
	m.subscribed = subs
	return true
}

// rename moves a static member to a new member id.
func (g *cgroup) rename(m *cmember, id string) {
	delete(g.members, m.id)
	for p := range m.assigned {
		g.holder[p] = id
	}
	for p := range m.revoking {
		g.holder[p] = id
	}
	if t, ok := g.target[m.id]; ok {
		delete(g.target, m.id)
		g.target[id] = t
	}
	m.id = id
	g.members[id] = m
	g.static[m.instanceID] = id
}

// check finds the member of a heartbeat with a positive epoch and fences
// a stale one.
func (g *cgroup) check(req *kmsg.ConsumerGroupHeartbeatRequest) (*cmember, int16) {
	if g == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	if req.InstanceID != nil {
		if cur := g.static[*req.InstanceID]; cur != "" && cur != req.MemberID {
			return nil, kerr.FencedInstanceID.Code
		}
	}
	m := g.members[req.MemberID]
	switch {
	case m == nil:
		return nil, kerr.UnknownMemberID.Code
	case m.epoch == epochStaticLeave || req.MemberEpoch > m.epoch:
		return nil, kerr.FencedMemberEpoch.Code
	case req.MemberEpoch < m.epoch:
		// KIP-848: the previous epoch is accepted when the member owns
		// no more than it is assigned: the answer that moved it on may
		// have been lost.
		if req.MemberEpoch != m.previousEpoch || req.Topics == nil || !g.ownsOnly(req.Topics, m.assigned) {
			return nil, kerr.FencedMemberEpoch.Code
		}
	}
	return m, 0
}

// ownsOnly reports whether every partition in owned is in set.
func (g *cgroup) ownsOnly(owned []kmsg.ConsumerGroupHeartbeatRequestTopic, set map[tp]bool) bool {
	for _, t := range owned {
		for _, p := range t.Partitions {
			if !set[tp{t.TopicID, p}] {
				return false
			}
		}
	}
	return true
}

// released drops from m's revoking set what its heartbeat no longer
// lists: those partitions are free for their new owners.
func (g *cgroup) released(m *cmember, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) {
	still := map[tp]bool{}
	for _, t := range owned {
		for _, p := range t.Partitions {
			still[tp{t.TopicID, p}] = true
		}
	}
	for p := range m.revoking {
		if !still[p] {
			delete(m.revoking, p)
			delete(g.holder, p)
		}
	}
}

func (g *cgroup) releaseAll(set map[tp]bool) {
	for p := range set {
		delete(g.holder, p)
	}
}

// refreshTopics records the topics looked up; it reports whether a
// subscribed topic appeared, vanished or changed partitions.
func (g *cgroup) refreshTopics(fetched map[string]*topicMeta) bool {
	subscribed := map[string]bool{}
	for _, m := range g.members {
		for _, n := range m.subscribed {
			subscribed[n] = true
		}
	}
	return refreshTopics(g.topics, fetched, subscribed)
}

// refreshTopics records in topics what was looked up (fetched; nil: no
// such topic) and forgets the topics no member subscribes to any more; it
// reports whether a subscribed topic appeared, vanished or changed
// partitions.
func refreshTopics(topics map[string]topicMeta, fetched map[string]*topicMeta, subscribed map[string]bool) bool {
	changed := false
	for name, meta := range fetched {
		old, had := topics[name]
		switch {
		case meta == nil && had:
			delete(topics, name)
			changed = true
		case meta != nil && (!had || old != *meta):
			topics[name] = *meta
			changed = true
		}
	}
	for name := range topics {
		if !subscribed[name] {
			delete(topics, name)
		}
	}
	return changed
}

// newEpoch bumps the group epoch and computes the target assignment.
func (g *cgroup) newEpoch() {
	g.epoch++
	g.assignor = g.preferredAssignor()
	if g.holdUntil.IsZero() {
		g.target = g.assign()
	} else {
		// Held after a leader change: nobody is assigned anything yet.
		g.target = make(map[string]map[tp]bool, len(g.members))
	}
	g.assignmentEpoch = g.epoch
	// A static member that is away cannot acknowledge a revocation: what
	// it no longer targets is released at once (it consumes nothing).
	for _, m := range g.members {
		if m.epoch == epochStaticLeave {
			for p := range m.assigned {
				if !g.target[m.id][p] {
					delete(m.assigned, p)
					delete(g.holder, p)
				}
			}
		}
	}
}

// preferredAssignor is the assignor most members ask for (Kafka's rule);
// uniform when none asks or on a tie with it.
func (g *cgroup) preferredAssignor() string {
	counts := map[string]int{}
	for _, m := range g.members {
		if m.assignor != "" {
			counts[m.assignor]++
		}
	}
	if counts[assignorRange] > counts[assignorUniform] {
		return assignorRange
	}
	return assignorUniform
}

// reconcile moves m one step towards its target and reports whether its
// assignment changed. Partitions leaving it are revoked first; its epoch
// reaches the target's once nothing is left to revoke, and then it gains
// the target partitions nobody else holds.
func (g *cgroup) reconcile(m *cmember, now time.Time) bool {
	desired := g.target[m.id]
	changed := false
	for p := range m.assigned {
		if !desired[p] {
			delete(m.assigned, p)
			m.revoking[p] = true
			changed = true
		}
	}
	for p := range m.revoking {
		if desired[p] { // given back before it was released
			delete(m.revoking, p)
			m.assigned[p] = true
			changed = true
		}
	}
	if len(m.revoking) > 0 {
		if m.revokeBy.IsZero() {
			m.revokeBy = now.Add(m.rebalanceTimeout)
		}
		return changed
	}
	m.revokeBy = time.Time{}
	if m.epoch != g.assignmentEpoch {
		if m.epoch != epochJoin {
			m.previousEpoch = m.epoch
		}
		m.epoch = g.assignmentEpoch
	}
	for p := range desired {
		if !m.assigned[p] && g.holder[p] == "" {
			m.assigned[p] = true
			g.holder[p] = m.id
			changed = true
		}
	}
	return changed
}

// removeMember drops a member (left, expired or fenced); the others
// rebalance, or the group goes when it was the last.
func (co *coordinator) removeMember(g *cgroup, m *cmember) {
	g.releaseAll(m.assigned)
	g.releaseAll(m.revoking)
	delete(g.members, m.id)
	delete(g.target, m.id)
	if m.instanceID != "" && g.static[m.instanceID] == m.id {
		delete(g.static, m.instanceID)
	}
	if len(g.members) == 0 {
		delete(co.consumers, g.name)
		return
	}
	g.newEpoch()
}

// consumerLeave serves MemberEpoch -1 (leave) and -2 (a static member
// leaving for a while: it keeps its partitions until its session times
// out, so a restart does not move them).
func (co *coordinator) consumerLeave(g *cgroup, req *kmsg.ConsumerGroupHeartbeatRequest, now time.Time) *kmsg.ConsumerGroupHeartbeatResponse {
	if g == nil {
		return heartbeatError(req, kerr.UnknownMemberID.Code, "")
	}
	id := req.MemberID
	if req.InstanceID != nil {
		cur := g.static[*req.InstanceID]
		switch {
		case cur == "":
			return heartbeatError(req, kerr.UnknownMemberID.Code, "")
		case cur != id:
			return heartbeatError(req, kerr.FencedInstanceID.Code, "")
		}
	}
	m := g.members[id]
	if m == nil {
		return heartbeatError(req, kerr.UnknownMemberID.Code, "")
	}
	// kgo sends -2 without the instance id: the member's own decides.
	if req.MemberEpoch == epochStaticLeave && m.instanceID != "" {
		g.releaseAll(m.revoking)
		m.revoking, m.revokeBy = map[tp]bool{}, time.Time{}
		m.epoch, m.lastSeen = epochStaticLeave, now
	} else {
		co.removeMember(g, m)
	}
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.MemberID, resp.MemberEpoch = kmsg.StringPtr(id), req.MemberEpoch
	return resp
}

// expireConsumers removes members not heard from within the session
// timeout, and members that did not release revoked partitions within
// their rebalance timeout (KIP-848 fences them).
func (co *coordinator) expireConsumers(now time.Time) {
	for _, g := range co.consumers {
		if g.endHold(now) {
			g.newEpoch()
		}
		for _, id := range slices.Sorted(maps.Keys(g.members)) {
			m := g.members[id]
			if m == nil {
				continue
			}
			if now.Sub(m.lastSeen) > cmp.Or(g.sessionTimeout, co.consumerCfg.SessionTimeout) || (!m.revokeBy.IsZero() && now.After(m.revokeBy)) {
				co.removeMember(g, m)
				if co.consumers[g.name] != g {
					break
				}
			}
		}
	}
}

// byTopic lists a partition set per topic, topics by name and partitions
// in order; a topic no longer known here shows without a name.
func (g *cgroup) byTopic(set map[tp]bool) []kmsg.AssignmentTopicPartition {
	names := map[[16]byte]string{}
	for n, t := range g.topics {
		names[t.id] = n
	}
	per := map[[16]byte][]int32{}
	for p := range set {
		per[p.topic] = append(per[p.topic], p.partition)
	}
	out := make([]kmsg.AssignmentTopicPartition, 0, len(per))
	for id, ps := range per {
		slices.Sort(ps)
		a := kmsg.NewAssignmentTopicPartition()
		a.TopicID, a.Topic, a.Partitions = id, names[id], ps
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b kmsg.AssignmentTopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), slices.Compare(a.TopicID[:], b.TopicID[:]))
	})
	return out
}

// state names the group's state, as Kafka's consumer groups do.
func (g *cgroup) state() string {
	if len(g.members) == 0 {
		return cstateEmpty
	}
	if !g.holdUntil.IsZero() {
		return cstateAssigning
	}
	for _, m := range g.members {
		if m.epoch != g.assignmentEpoch || len(m.revoking) > 0 || len(m.assigned) != len(g.target[m.id]) {
			return cstateReconciling
		}
	}
	return cstateStable
}

// assign computes every member's target assignment with the group's
// assignor.
func (g *cgroup) assign() map[string]map[tp]bool {
	ids := slices.Sorted(maps.Keys(g.members))
	out := make(map[string]map[tp]bool, len(ids))
	for _, id := range ids {
		out[id] = map[tp]bool{}
	}
	subscribers := map[string][]string{} // topic → member ids, sorted
	for _, id := range ids {
		for _, n := range g.members[id].subscribed {
			if _, ok := g.topics[n]; ok {
				subscribers[n] = append(subscribers[n], id)
			}
		}
	}
	topics := slices.Sorted(maps.Keys(subscribers))
	if g.assignor == assignorRange {
		// Each topic on its own: its partitions split in contiguous
		// ranges over its subscribers in member id order, the first
		// ones taking one more when they do not divide evenly.
		for _, n := range topics {
			t, subs := g.topics[n], subscribers[n]
			per, extra := t.partitions/int32(len(subs)), t.partitions%int32(len(subs))
			next := int32(0)
			for i, id := range subs {
				count := per
				if int32(i) < extra {
					count++
				}
				for p := next; p < next+count; p++ {
					out[id][tp{t.id, p}] = true
				}
				next += count
			}
		}
		return out
	}
	return g.assignUniform(ids, topics, subscribers, out)
}

// assignUniform spreads partitions evenly over the members that may take
// them, keeping each partition with its previous target owner where that
// keeps the balance (sticky, like Kafka's uniform assignor): fewer
// partitions move. Members are handled by index and loads by count, so a
// group at its size limit is assigned in milliseconds under the lock.
func (g *cgroup) assignUniform(ids, topics []string, subscribers map[string][]string, out map[string]map[tp]bool) map[string]map[tp]bool {
	index := make(map[string]int, len(ids))
	for i, id := range ids {
		index[id] = i
	}
	total := 0
	eligible := make([][]int, len(topics)) // per topic: member indexes
	for ti, n := range topics {
		for _, id := range subscribers[n] {
			eligible[ti] = append(eligible[ti], index[id])
		}
		total += int(g.topics[n].partitions)
	}
	// No member keeps more than an even share: the rest is dealt again.
	quota := (total + len(ids) - 1) / len(ids)
	count := make([]int, len(ids))
	owned := make([][]int, len(ids)) // per member: indexes into parts
	type part struct {
		k     tp
		topic int
	}
	var parts []part
	var free []int
	previous := map[tp]string{} // the previous target's owner of each partition
	for id, set := range g.target {
		for k := range set {
			previous[k] = id
		}
	}
	for ti, n := range topics {
		t := g.topics[n]
		for p := range t.partitions {
			k := tp{t.id, p}
			parts = append(parts, part{k, ti})
			pi := len(parts) - 1
			if mi, ok := index[previous[k]]; ok && count[mi] < quota {
				if _, subscribed := slices.BinarySearch(g.members[ids[mi]].subscribed, n); subscribed {
					owned[mi] = append(owned[mi], pi)
					count[mi]++
					continue
				}
			}
			free = append(free, pi)
		}
	}
	least := func(cands []int) int {
		best := cands[0]
		for _, mi := range cands[1:] {
			if count[mi] < count[best] {
				best = mi
			}
		}
		return best
	}
	for _, pi := range free {
		mi := least(eligible[parts[pi].topic])
		owned[mi] = append(owned[mi], pi)
		count[mi]++
	}
	// Even out: move a partition from a member holding at least two more
	// than another member that may take it, most loaded first. Every move
	// lowers the sum of squared counts, so this ends; the bound is a
	// safeguard against scanning for long in odd subscription patterns.
	order := make([]int, len(ids))
	for moves := 0; moves < 2*total; moves++ {
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(count[b], count[a]) })
		moved := false
		for _, from := range order {
			for j := len(owned[from]) - 1; j >= 0; j-- {
				pi := owned[from][j]
				to := least(eligible[parts[pi].topic])
				if count[from] > count[to]+1 {
					owned[from] = slices.Delete(owned[from], j, j+1)
					owned[to] = append(owned[to], pi)
					count[from]--
					count[to]++
					moved = true
					break
				}
			}
			if moved || count[from] <= count[order[len(order)-1]]+1 {
				break // nothing can be more unbalanced further down
			}
		}
		if !moved {
			break
		}
	}
	for mi, ps := range owned {
		for _, pi := range ps {
			out[ids[mi]][parts[pi].k] = true
		}
	}
	return out
}

// consumerGroupView is a snapshot of a consumer group for
// ConsumerGroupDescribe, DescribeGroups and ListGroups.
type consumerGroupView struct {
	name, state, assignor  string
	epoch, assignmentEpoch int32
	members                []consumerMemberView
}

type consumerMemberView struct {
	id, instanceID, rackID, clientID, clientHost string
	epoch                                        int32
	names                                        []string // subscribed by name
	regex                                        string   // subscribed pattern ("": none)
	subscribed                                   []string // names and what regex matched
	assigned, target                             []kmsg.AssignmentTopicPartition
}

// view snapshots g; the caller holds co.mu.
func (g *cgroup) view(withMembers bool) consumerGroupView {
	v := consumerGroupView{name: g.name, state: g.state(), assignor: g.assignor, epoch: g.epoch, assignmentEpoch: g.assignmentEpoch}
	if !withMembers {
		return v
	}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		v.members = append(v.members, consumerMemberView{
			id: m.id, instanceID: m.instanceID, rackID: m.rackID, clientID: m.clientID, clientHost: m.clientHost,
			epoch: m.epoch, names: slices.Clone(m.names), regex: m.regex, subscribed: slices.Clone(m.subscribed),
			assigned: g.byTopic(m.assigned), target: g.byTopic(g.target[id]),
		})
	}
	return v
}

// describeConsumer snapshots one consumer group; false when there is none.
func (co *coordinator) describeConsumer(name string) (consumerGroupView, bool) {
	co.mu.Lock()
	defer co.mu.Unlock()
	g := co.consumers[name]
	if g == nil {
		return consumerGroupView{}, false
	}
	return g.view(true), true
}

// checkConsumerCommit validates an offset commit from a KIP-848 member:
// its epoch stands for the generation (OffsetCommit v9+). The caller holds
// co.mu; ok is false when the group is not a consumer group.
func (co *coordinator) checkConsumerCommit(group, memberID string, epoch int32, version int16) (code int16, ok bool) {
	g := co.consumers[group]
	if g == nil {
		return 0, false
	}
	if epoch < 0 && memberID == "" {
		return kerr.UnknownMemberID.Code, true // an admin commit needs an empty group
	}
	m := g.members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code, true
	case version < 9:
		// Kafka: members of consumer groups commit with v9 or later.
		return kerr.UnsupportedVersion.Code, true
	case epoch > m.epoch:
		return kerr.FencedMemberEpoch.Code, true
	case epoch < m.epoch:
		return kerr.StaleMemberEpoch.Code, true
	}
	return 0, true
}

// ListGroups v5 group types.
const (
	groupTypeClassic  = "classic"
	groupTypeConsumer = "consumer"
)

// classicView shows a consumer group the way DescribeGroups and ListGroups
// show groups: protocol type "consumer", the assignor as the protocol, and
// each member's subscription and assignment in the classic consumer
// encodings, so tools written for classic groups can read them. The caller
// holds co.mu.
func (g *cgroup) classicView(withMembers bool) groupView {
	v := groupView{name: g.name, state: g.state(), protocolType: "consumer", protocol: g.assignor, groupType: groupTypeConsumer, generation: g.epoch}
	if !withMembers {
		return v
	}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Version, meta.Topics = 0, slices.Clone(m.subscribed)
		assignment := kmsg.NewConsumerMemberAssignment()
		assignment.Version = 0
		for _, t := range g.byTopic(m.assigned) {
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic, at.Partitions = t.Topic, t.Partitions
			assignment.Topics = append(assignment.Topics, at)
		}
		v.members = append(v.members, memberView{
			id: m.id, instanceID: m.instanceID, clientID: m.clientID, clientHost: m.clientHost,
			metadata: meta.AppendTo(nil), assignment: assignment.AppendTo(nil),
		})
	}
	return v
}
