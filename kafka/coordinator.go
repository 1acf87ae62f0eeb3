package kafka

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/broker"
)

// The classic consumer-group coordinator. With one raft group the raft
// leader coordinates every group. Membership lives in the leader's memory:
// after a leader change members get UNKNOWN_MEMBER_ID (or NOT_COORDINATOR)
// and rejoin, as Kafka clients do after a coordinator move. Committed
// offsets do not live here: they are replicated (see broker.CommitOffsets).

// Group states, as DescribeGroups and ListGroups name them.
const (
	stateEmpty      = "Empty"
	statePreparing  = "PreparingRebalance"
	stateCompleting = "CompletingRebalance"
	stateStable     = "Stable"
	stateDead       = "Dead"
)

// Timing. initialRebalanceDelay plays Kafka's
// group.initial.rebalance.delay.ms (3 s there): a group formed from empty
// waits this long for more members before its first generation.
const (
	initialRebalanceDelay = 300 * time.Millisecond
	minSessionTimeout     = 1 * time.Second
	maxSessionTimeout     = 30 * time.Minute
	reapEvery             = 250 * time.Millisecond
)

type member struct {
	id, instanceID       string
	clientID, clientHost string
	protocols            []kmsg.JoinGroupRequestProtocol
	sessionTimeout       time.Duration
	rebalanceTimeout     time.Duration
	assignment           []byte
	lastSeen             time.Time
	rejoined             bool // joined in the rebalance under way
	joinWaiter           chan *kmsg.JoinGroupResponse
	syncWaiter           chan syncAnswer
}

type syncAnswer struct {
	code       int16
	assignment []byte
}

type group struct {
	name         string
	state        string
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*member
	order        []string          // member ids in join order: leader choice is deterministic
	pending      map[string]bool   // ids handed out with MEMBER_ID_REQUIRED (KIP-394)
	static       map[string]string // group.instance.id → the id of its current incarnation (KIP-345)
	timer        *time.Timer       // ends the join phase, or a stalled sync phase
	graceHold    bool              // the join phase waits out the failover grace (failover.go)
	joinVersions map[string]int16  // JoinGroup version each waiter asked with
	// Recording (classic_record.go): the generation last recorded (0:
	// none), whether the current one's record is being written, and
	// when recording a stable generation was last tried.
	recorded      int32
	saving        bool
	lastRecordTry time.Time
}

// coordinator holds every group this node coordinates: classic groups in
// groups, KIP-848 consumer groups in consumers (consumer_groups.go).
type coordinator struct {
	mu          sync.Mutex
	groups      map[string]*group
	consumers   map[string]*cgroup
	shares      map[string]*sgroup // share groups (share_groups.go)
	consumerCfg ConsumerGroupConfig
	now         func() time.Time // the consumer groups' and the failover grace's clock; tests replace it

	// term is the raft term this node coordinates in (0: not leading);
	// graceUntil ends the failover grace that began when it took the lead
	// (failover.go).
	term       uint64
	graceUntil time.Time
	ledAt      time.Time // when it took the lead in term
	// hasOffsets reports whether a group has committed offsets, the
	// replicated trace of members before this leader; nil counts every
	// group as having some.
	hasOffsets func(group string) bool
	// records answers where classic groups' generations are kept
	// (classic_record.go), looked up per use since the group's replicas
	// may move; nil: membership is not recorded. loaded holds the groups
	// whose record was read in this term.
	records func() classicRecords
	loaded  map[string]bool
}

func newCoordinator() *coordinator {
	return &coordinator{groups: map[string]*group{}, consumers: map[string]*cgroup{}, shares: map[string]*sgroup{}, loaded: map[string]bool{},
		consumerCfg: DefaultConsumerGroupConfig(), now: time.Now}
}

// run expires members whose session timed out, until stop closes.
func (co *coordinator) run(stop <-chan struct{}) {
	t := time.NewTicker(reapEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			co.mu.Lock()
			for _, g := range co.groups {
				for _, id := range append([]string(nil), g.order...) {
					// A member parked in JoinGroup or SyncGroup is not
					// expired by its session: the rebalance timeout bounds
					// those phases (completeJoin drops who did not rejoin),
					// as Kafka keeps such members alive.
					if m := g.members[id]; !m.parked() && now.Sub(m.lastSeen) > m.sessionTimeout {
						g.remove(id)
						g.membershipChanged(co)
					}
				}
			}
			co.expireConsumers(co.now())
			co.expireShares(co.now())
			co.mu.Unlock()
		}
	}
}

// reset forgets every group (this node stopped leading), telling waiting
// members to find the new coordinator.
func (co *coordinator) reset() {
	co.mu.Lock()
	defer co.mu.Unlock()
	co.forgetAll()
	co.term, co.graceUntil, co.ledAt = 0, time.Time{}, time.Time{}
}

// forgetAll drops every group; the caller holds co.mu.
func (co *coordinator) forgetAll() {
	for _, g := range co.groups {
		g.stopTimer()
		for _, m := range g.members {
			m.answerJoin(&kmsg.JoinGroupResponse{ErrorCode: kerr.NotCoordinator.Code})
			m.answerSync(syncAnswer{code: kerr.NotCoordinator.Code})
		}
	}
	co.groups = map[string]*group{}
	co.consumers = map[string]*cgroup{}
	co.shares = map[string]*sgroup{}
	co.loaded = map[string]bool{}
}

// parked reports whether the member waits for a JoinGroup or SyncGroup answer.
func (m *member) parked() bool { return m.joinWaiter != nil || m.syncWaiter != nil }

// unpark forgets a wait that gave up without an answer, so the member's
// session counts again.
func (co *coordinator) unpark(m *member, join chan *kmsg.JoinGroupResponse, sync chan syncAnswer) {
	co.mu.Lock()
	defer co.mu.Unlock()
	if join != nil && m.joinWaiter == join {
		m.joinWaiter = nil
	}
	if sync != nil && m.syncWaiter == sync {
		m.syncWaiter = nil
	}
}

// answerJoin answers the member's waiting JoinGroup. Its session starts
// over then, as Kafka's does when a join completes: the member was parked
// for as long as the join phase lasted (up to the rebalance timeout) and
// must not be expired before its SyncGroup can arrive.
func (m *member) answerJoin(r *kmsg.JoinGroupResponse) {
	if m.joinWaiter != nil {
		m.joinWaiter <- r
		m.joinWaiter = nil
		m.lastSeen = time.Now()
	}
}

// answerSync answers the member's waiting SyncGroup; its session starts
// over, as with answerJoin.
func (m *member) answerSync(a syncAnswer) {
	if m.syncWaiter != nil {
		m.syncWaiter <- a
		m.syncWaiter = nil
		m.lastSeen = time.Now()
	}
}

func (g *group) stopTimer() {
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
}

func (g *group) remove(id string) {
	m := g.members[id]
	if m == nil {
		return
	}
	m.answerJoin(&kmsg.JoinGroupResponse{ErrorCode: kerr.UnknownMemberID.Code})
	m.answerSync(syncAnswer{code: kerr.UnknownMemberID.Code})
	delete(g.members, id)
	if m.instanceID != "" && g.static[m.instanceID] == id {
		delete(g.static, m.instanceID)
	}
	for i, o := range g.order {
		if o == id {
			g.order = append(g.order[:i], g.order[i+1:]...)
			break
		}
	}
}

// membershipChanged starts a rebalance after a member left or expired, or
// empties the group.
func (g *group) membershipChanged(co *coordinator) {
	if len(g.members) == 0 {
		g.emptied(co)
		return
	}
	switch g.state {
	case stateStable, stateCompleting:
		g.startRebalance(co, 0)
	case statePreparing:
		g.maybeCompleteJoin(co)
	}
}

// startRebalance moves the group to PreparingRebalance: every member must
// join again within the longest rebalance timeout (or delay, for a group
// forming from empty).
func (g *group) startRebalance(co *coordinator, delay time.Duration) {
	g.state, g.graceHold, g.saving = statePreparing, false, false
	for _, m := range g.members {
		m.rejoined = false
		m.answerSync(syncAnswer{code: kerr.RebalanceInProgress.Code})
	}
	timeout := delay
	if timeout == 0 {
		for _, m := range g.members {
			timeout = max(timeout, m.rebalanceTimeout)
		}
	}
	g.stopTimer()
	g.timer = time.AfterFunc(timeout, func() {
		co.mu.Lock()
		defer co.mu.Unlock()
		if co.groups[g.name] == g && g.state == statePreparing {
			g.timer = nil
			g.completeJoin(co)
		}
	})
}

// maybeCompleteJoin ends the join phase early once every member rejoined
// (unless the initial delay is still gathering members).
func (g *group) maybeCompleteJoin(co *coordinator) {
	if g.timer != nil && (g.generation == 0 || g.graceHold) {
		return // a new group waits out its initial delay, a re-formed one the failover grace
	}
	for _, m := range g.members {
		if !m.rejoined {
			return
		}
	}
	g.stopTimer()
	g.completeJoin(co)
}

// completeJoin drops members that did not rejoin, picks the protocol and
// leader, starts a new generation and answers every waiting JoinGroup.
func (g *group) completeJoin(co *coordinator) {
	for _, id := range append([]string(nil), g.order...) {
		if !g.members[id].rejoined {
			g.remove(id)
		}
	}
	if len(g.members) == 0 {
		g.emptied(co)
		return
	}
	if g.members[g.leader] == nil {
		g.leader = g.order[0]
	}
	g.protocol = g.chooseProtocol()
	g.generation++
	g.state = stateCompleting
	g.awaitAssignment(co)
	for _, id := range g.order {
		g.members[id].answerJoin(g.joinAnswer(id))
	}
}

// joinAnswer is the JoinGroup answer of the current generation for member
// id; the leader's lists every member with its metadata.
func (g *group) joinAnswer(id string) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Generation, resp.Protocol, resp.ProtocolType = g.generation, kmsg.StringPtr(g.protocol), kmsg.StringPtr(g.protocolType)
	resp.LeaderID, resp.MemberID = g.leader, id
	if id == g.leader {
		for _, oid := range g.order {
			om := g.members[oid]
			jm := kmsg.NewJoinGroupResponseMember()
			jm.MemberID, jm.ProtocolMetadata = oid, om.metadataFor(g.protocol)
			if om.instanceID != "" {
				jm.InstanceID = kmsg.StringPtr(om.instanceID)
			}
			resp.Members = append(resp.Members, jm)
		}
	}
	return resp
}

// renameStatic makes id the current incarnation of static member instance
// (KIP-345). A previous incarnation's member moves to id with its place,
// leadership and assignment; its waiting requests and any later ones under
// the old id are answered FENCED_INSTANCE_ID. It returns whether one was
// replaced, and its metadata for the group's protocol.
func (g *group) renameStatic(instance, id string) (replaced bool, metadata []byte) {
	old := g.static[instance]
	g.static[instance] = id
	m := g.members[old]
	if m == nil {
		return false, nil
	}
	m.answerJoin(&kmsg.JoinGroupResponse{ErrorCode: kerr.FencedInstanceID.Code})
	m.answerSync(syncAnswer{code: kerr.FencedInstanceID.Code})
	delete(g.members, old)
	m.id, g.members[id] = id, m
	g.order[slices.Index(g.order, old)] = id
	if g.leader == old {
		g.leader = id
	}
	return true, m.metadataFor(g.protocol)
}

// fenced reports whether a request naming a group.instance.id comes from
// an incarnation that a newer one replaced (KIP-345).
func (g *group) fenced(memberID string, instanceID *string) bool {
	return instanceID != nil && *instanceID != "" && g.static[*instanceID] != "" && g.static[*instanceID] != memberID
}

// awaitAssignment bounds the sync phase: a leader that does not send its
// assignment within the longest rebalance timeout starts a new rebalance,
// as Kafka's coordinator does.
func (g *group) awaitAssignment(co *coordinator) {
	var timeout time.Duration
	for _, m := range g.members {
		timeout = max(timeout, m.rebalanceTimeout)
	}
	generation := g.generation
	g.stopTimer()
	g.timer = time.AfterFunc(timeout, func() {
		co.mu.Lock()
		defer co.mu.Unlock()
		if co.groups[g.name] == g && g.state == stateCompleting && g.generation == generation {
			g.timer = nil
			g.startRebalance(co, 0)
		}
	})
}

// chooseProtocol picks the leader's most preferred protocol that every
// member supports.
func (g *group) chooseProtocol() string {
	for _, p := range g.members[g.leader].protocols {
		if g.allSupport(p.Name) {
			return p.Name
		}
	}
	return g.members[g.leader].protocols[0].Name
}

// allSupport reports whether every member offered the protocol.
func (g *group) allSupport(protocol string) bool {
	for _, m := range g.members {
		if m.metadataFor(protocol) == nil {
			return false
		}
	}
	return true
}

func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			if p.Metadata == nil {
				return []byte{}
			}
			return p.Metadata
		}
	}
	return nil
}

// sharesProtocol reports whether a joining member could agree with the
// group's members on a protocol.
func (g *group) sharesProtocol(protocols []kmsg.JoinGroupRequestProtocol) bool {
	for _, p := range protocols {
		if g.allSupport(p.Name) {
			return true
		}
	}
	return len(g.members) == 0
}

// join handles JoinGroup; the reply waits for the join phase to end.
func (co *coordinator) join(req *kmsg.JoinGroupRequest, clientID, clientHost string) reply {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	fail := func(code int16) reply {
		resp.ErrorCode, resp.MemberID = code, req.MemberID
		return func() (kmsg.Response, error) { return resp, nil }
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	rebalance := session
	if req.Version >= 1 && req.RebalanceTimeoutMillis > 0 {
		rebalance = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	switch {
	case req.Group == "" || !broker.ValidGroupName(req.Group):
		return fail(kerr.InvalidGroupID.Code)
	case session < minSessionTimeout || session > maxSessionTimeout:
		return fail(kerr.InvalidSessionTimeout.Code)
	case len(req.Protocols) == 0 || req.ProtocolType == "":
		return fail(kerr.InconsistentGroupProtocol.Code)
	}

	hold := co.holdFor(req.Group, session)
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.consumers[req.Group] != nil || co.shares[req.Group] != nil {
		// KIP-848, KIP-932: the id belongs to a consumer-protocol or share group.
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	g := co.groups[req.Group]
	if g == nil {
		g = &group{name: req.Group, state: stateEmpty, members: map[string]*member{}, pending: map[string]bool{}, static: map[string]string{}}
		co.groups[req.Group] = g
	}
	if len(g.members) > 0 && (g.protocolType != req.ProtocolType || !g.sharesProtocol(req.Protocols)) {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	instance, replaced, oldMetadata := "", false, []byte(nil)
	if req.InstanceID != nil {
		instance = *req.InstanceID
	}
	id := req.MemberID
	switch {
	case instance != "" && id == "":
		// KIP-345: a static member joins without MEMBER_ID_REQUIRED; a
		// new incarnation replaces the previous one at once.
		id = fmt.Sprintf("%s-%s", instance, uuid.NewString())
		replaced, oldMetadata = g.renameStatic(instance, id)
	case instance != "" && g.static[instance] != id:
		if g.static[instance] != "" {
			return fail(kerr.FencedInstanceID.Code)
		}
		return fail(kerr.UnknownMemberID.Code)
	case id == "":
		id = fmt.Sprintf("%s-%s", clientID, uuid.NewString())
		if req.Version >= 4 { // KIP-394: hand out the id, the client joins again with it
			g.pending[id] = true
			resp.ErrorCode, resp.MemberID = kerr.MemberIDRequired.Code, id
			return func() (kmsg.Response, error) { return resp, nil }
		}
	case g.members[id] == nil && !g.pending[id]:
		return fail(kerr.UnknownMemberID.Code)
	}
	delete(g.pending, id)

	m := g.members[id]
	if m == nil {
		m = &member{id: id}
		g.members[id] = m
		g.order = append(g.order, id)
	}
	m.clientID, m.clientHost = clientID, clientHost
	if instance != "" { // a static member stays one (its entry in static must go with it)
		m.instanceID = instance
	}
	m.protocols, m.sessionTimeout, m.rebalanceTimeout = req.Protocols, session, rebalance
	m.lastSeen = time.Now()
	if replaced && g.state == stateStable && bytes.Equal(oldMetadata, m.metadataFor(g.protocol)) && (id != g.leader || req.Version >= 9) {
		// KIP-345: the restarted static member keeps its assignment and
		// the group its generation; nobody rebalances. A leader learns
		// the members but is told to skip the assignment (KIP-814, v9).
		r := g.joinAnswer(id)
		r.SkipAssignment = id == g.leader
		return func() (kmsg.Response, error) { r.Version = req.Version; return r, nil }
	}
	m.answerJoin(&kmsg.JoinGroupResponse{ErrorCode: kerr.UnknownMemberID.Code}) // a superseded join
	wait := make(chan *kmsg.JoinGroupResponse, 1)
	m.joinWaiter = wait
	g.protocolType = req.ProtocolType

	var grace time.Duration // what is left of the failover grace
	switch g.state {
	case stateEmpty:
		// A group formed in the failover grace waits it out (at most
		// the rebalance timeout): members of the previous leader's
		// generation may still consume until they heartbeat here.
		grace = min(hold.Sub(co.now()), rebalance)
		if grace > initialRebalanceDelay {
			g.startRebalance(co, grace)
			g.graceHold = true
		} else {
			g.startRebalance(co, initialRebalanceDelay)
		}
	case stateStable, stateCompleting:
		g.startRebalance(co, 0)
	case statePreparing:
		if g.graceHold { // a later member waits as long as the first
			grace = co.graceUntil.Sub(co.now())
		}
	}
	m.rejoined = true
	g.maybeCompleteJoin(co)
	deadline := rebalance + initialRebalanceDelay + max(grace, 0) + 5*time.Second
	return func() (kmsg.Response, error) {
		select {
		case r := <-wait:
			r.Version = req.Version
			return r, nil
		case <-time.After(deadline):
			co.unpark(m, wait, nil)
			resp.ErrorCode = kerr.RebalanceInProgress.Code
			return resp, nil
		}
	}
}

// syncGroup handles SyncGroup; a follower's reply waits for the leader's
// assignment.
func (co *coordinator) syncGroup(req *kmsg.SyncGroupRequest) reply {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	answer := func(a syncAnswer) (kmsg.Response, error) {
		resp.ErrorCode, resp.MemberAssignment = a.code, a.assignment
		return resp, nil
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	g := co.groups[req.Group]
	var m *member
	if g != nil {
		m = g.members[req.MemberID]
	}
	switch {
	case g != nil && g.fenced(req.MemberID, req.InstanceID):
		return func() (kmsg.Response, error) { return answer(syncAnswer{code: kerr.FencedInstanceID.Code}) }
	case m == nil:
		return func() (kmsg.Response, error) { return answer(syncAnswer{code: kerr.UnknownMemberID.Code}) }
	case req.Generation != g.generation:
		return func() (kmsg.Response, error) { return answer(syncAnswer{code: kerr.IllegalGeneration.Code}) }
	case g.state == statePreparing:
		return func() (kmsg.Response, error) { return answer(syncAnswer{code: kerr.RebalanceInProgress.Code}) }
	}
	m.lastSeen = time.Now()
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr(g.protocolType), kmsg.StringPtr(g.protocol)
	if g.state == stateCompleting && req.MemberID == g.leader && !g.saving {
		for _, a := range req.GroupAssignment {
			if am := g.members[a.MemberID]; am != nil {
				am.assignment = a.MemberAssignment
			}
		}
		g.stopTimer()
		g.assigned(co) // stable now, or once the generation is recorded
	}
	if g.state == stateStable {
		a := syncAnswer{assignment: m.assignment}
		return func() (kmsg.Response, error) { return answer(a) }
	}
	wait := make(chan syncAnswer, 1)
	m.answerSync(syncAnswer{code: kerr.RebalanceInProgress.Code})
	m.syncWaiter = wait
	deadline := m.rebalanceTimeout + 5*time.Second
	return func() (kmsg.Response, error) {
		select {
		case a := <-wait:
			return answer(a)
		case <-time.After(deadline):
			co.unpark(m, nil, wait)
			return answer(syncAnswer{code: kerr.RebalanceInProgress.Code})
		}
	}
}

// heartbeat checks a member's generation and keeps its session alive.
func (co *coordinator) heartbeat(group, memberID string, instanceID *string, generation int32) int16 {
	co.mu.Lock()
	defer co.mu.Unlock()
	g := co.groups[group]
	if g != nil && g.fenced(memberID, instanceID) {
		return kerr.FencedInstanceID.Code
	}
	if g == nil || g.members[memberID] == nil {
		return kerr.UnknownMemberID.Code
	}
	now := time.Now()
	g.members[memberID].lastSeen = now
	switch {
	case g.state == statePreparing:
		return kerr.RebalanceInProgress.Code
	case generation != g.generation:
		return kerr.IllegalGeneration.Code
	}
	g.recordIfMissing(co, now)
	return 0
}

// leaver names a member leaving: by member id, or (LeaveGroup v3+, KIP-345)
// by group.instance.id with or without the member id.
type leaver struct {
	memberID   string
	instanceID *string
}

// leave removes members; the rest rebalance.
func (co *coordinator) leave(group string, leavers []leaver) []int16 {
	co.mu.Lock()
	defer co.mu.Unlock()
	codes := make([]int16, len(leavers))
	g := co.groups[group]
	removed := false
	for i, l := range leavers {
		id := l.memberID
		if g != nil && l.instanceID != nil && *l.instanceID != "" {
			if g.fenced(id, l.instanceID) && id != "" {
				codes[i] = kerr.FencedInstanceID.Code
				continue
			}
			id = g.static[*l.instanceID]
		}
		if g == nil || g.members[id] == nil {
			codes[i] = kerr.UnknownMemberID.Code
			continue
		}
		g.remove(id)
		removed = true
	}
	// A refused leave (a fenced static incarnation, say) changes nothing.
	if removed {
		g.membershipChanged(co)
	}
	return codes
}

// checkCommit validates a group-managed offset commit (generation >= 0 or a
// member id); a simple commit (generation -1, no member) needs a group
// without members. A consumer group's member commits with its member epoch
// as the generation (KIP-848).
func (co *coordinator) checkCommit(group, memberID string, instanceID *string, generation int32) int16 {
	return co.checkOffsetCommit(group, memberID, instanceID, generation, math.MaxInt16)
}

// checkOffsetCommit is checkCommit for an OffsetCommit of the given
// version: below v9 a consumer group's member is refused, as Kafka does.
func (co *coordinator) checkOffsetCommit(group, memberID string, instanceID *string, generation int32, version int16) int16 {
	co.mu.Lock()
	defer co.mu.Unlock()
	if code, ok := co.checkConsumerCommit(group, memberID, generation, version); ok {
		return code
	}
	g := co.groups[group]
	if g != nil && g.fenced(memberID, instanceID) {
		return kerr.FencedInstanceID.Code
	}
	if generation < 0 && memberID == "" {
		if g != nil && len(g.members) > 0 {
			return kerr.UnknownMemberID.Code
		}
		return 0
	}
	if g == nil || g.members[memberID] == nil {
		return kerr.UnknownMemberID.Code
	}
	g.members[memberID].lastSeen = time.Now()
	if generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	return 0
}

// groupView is a snapshot of a group, as DescribeGroups and ListGroups show
// it. It is built under the coordinator's lock and shares nothing mutable
// with the group, so it may be read after the lock is released.
type groupView struct {
	name, state, protocolType, protocol string
	groupType                           string // "classic", or "consumer" for a KIP-848 group (ListGroups v5)
	generation                          int32  // a consumer group's epoch
	members                             []memberView
}

// memberView is a snapshot of one member; metadata is its metadata for the
// group's chosen protocol.
type memberView struct {
	id, instanceID, clientID, clientHost string
	metadata, assignment                 []byte
}

// view snapshots g; the caller holds co.mu. Members are left out unless
// withMembers. The byte slices are shared, not copied: the coordinator only
// ever replaces them, never writes into them.
func (g *group) view(withMembers bool) groupView {
	v := groupView{name: g.name, state: g.state, protocolType: g.protocolType, protocol: g.protocol, groupType: groupTypeClassic, generation: g.generation}
	if !withMembers {
		return v
	}
	for _, id := range g.order {
		m := g.members[id]
		v.members = append(v.members, memberView{
			id: m.id, instanceID: m.instanceID, clientID: m.clientID, clientHost: m.clientHost,
			metadata: m.metadataFor(g.protocol), assignment: m.assignment,
		})
	}
	return v
}

// describe snapshots one group with its members; false (and state Dead)
// when this node holds no such group.
func (co *coordinator) describe(name string) (groupView, bool) {
	co.mu.Lock()
	defer co.mu.Unlock()
	if cg := co.consumers[name]; cg != nil {
		return cg.classicView(true), true
	}
	g := co.groups[name]
	if g == nil {
		return groupView{name: name, state: stateDead}, false
	}
	return g.view(true), true
}

// list snapshots every group, without members, sorted by name, in one
// critical section.
func (co *coordinator) list() []groupView {
	co.mu.Lock()
	out := make([]groupView, 0, len(co.groups))
	for _, g := range co.groups {
		out = append(out, g.view(false))
	}
	for _, g := range co.consumers {
		out = append(out, g.classicView(false))
	}
	for _, g := range co.shares {
		state := cstateStable
		if len(g.members) == 0 {
			state = cstateEmpty
		}
		out = append(out, groupView{name: g.name, state: state, protocolType: groupTypeShare, groupType: groupTypeShare, generation: g.epoch})
	}
	co.mu.Unlock()
	slices.SortFunc(out, func(a, b groupView) int { return cmp.Compare(a.name, b.name) })
	return out
}

// forget drops an empty group. existed reports whether this node held the
// group; ok is false (and nothing changes) when the group has members.
func (co *coordinator) forget(name string) (existed, ok bool) {
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.consumers[name] != nil || co.shares[name] != nil {
		return true, false // consumer and share groups are dropped with their last member
	}
	g := co.groups[name]
	if g == nil {
		return false, true
	}
	if len(g.members) > 0 {
		return true, false
	}
	g.stopTimer()
	delete(co.groups, name)
	return true, true
}
