package kafka

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeClock drives the consumer groups' clock by hand.
type fakeClock struct{ t time.Time }

func (f *fakeClock) now() time.Time      { return f.t }
func (f *fakeClock) add(d time.Duration) { f.t = f.t.Add(d) }
func newTestCoordinator() (*coordinator, *fakeClock) {
	co := newCoordinator()
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	co.now = clk.now
	return co, clk
}

var (
	topicA = topicMeta{id: [16]byte{1}, partitions: 6}
	topicB = topicMeta{id: [16]byte{2}, partitions: 2}
)

// client is a simulated KIP-848 member: it owns what the last answer
// assigned it and reports that in full on every heartbeat.
type client struct {
	t        *testing.T
	co       *coordinator
	group    string
	id       string
	instance *string
	epoch    int32
	subs     []string
	regex    string // subscribes with this pattern instead of subs
	assignor string
	owned    map[tp]bool
	joined   bool
}

func newClient(t *testing.T, co *coordinator, group, id string, subs ...string) *client {
	return &client{t: t, co: co, group: group, id: id, subs: subs, owned: map[tp]bool{}}
}

// topics is what the test cluster holds.
var testTopics = map[string]*topicMeta{"a": &topicA, "b": &topicB}

func (c *client) request() *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = c.group, c.id, c.epoch, c.instance
	req.RebalanceTimeoutMillis = 10_000
	req.SubscribedTopicNames = slices.Clone(c.subs)
	if req.SubscribedTopicNames == nil {
		req.SubscribedTopicNames = []string{}
	}
	if c.regex != "" {
		req.SubscribedTopicNames, req.SubscribedTopicRegex = nil, kmsg.StringPtr(c.regex)
	}
	if c.assignor != "" {
		req.ServerAssignor = kmsg.StringPtr(c.assignor)
	}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if c.epoch != 0 {
		req.Topics = ownedTopics(c.owned)
	}
	return req
}

func ownedTopics(owned map[tp]bool) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	per := map[[16]byte][]int32{}
	for p := range owned {
		per[p.topic] = append(per[p.topic], p.partition)
	}
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for id, ps := range per {
		t := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		t.TopicID, t.Partitions = id, ps
		out = append(out, t)
	}
	return out
}

// send sends req with the test topics looked up, and its pattern
// resolved, as the handler would.
func (c *client) send(req *kmsg.ConsumerGroupHeartbeatRequest, topics map[string]*topicMeta) *kmsg.ConsumerGroupHeartbeatResponse {
	var sub *regexMatch
	pattern := c.co.memberRegex(req.Group, req.MemberID)
	if req.SubscribedTopicRegex != nil {
		pattern = *req.SubscribedTopicRegex
	}
	extra := req.SubscribedTopicNames
	if pattern != "" && req.MemberEpoch >= 0 {
		var r regexResolver
		if matched, _, err := r.resolve(pattern, slices.Sorted(maps.Keys(topics))); err == nil {
			sub = &regexMatch{pattern: pattern, topics: matched}
			extra = append(slices.Clone(extra), matched...)
		}
	}
	fetched := map[string]*topicMeta{}
	for _, n := range c.co.consumerTopicNames(req.Group, extra) {
		fetched[n] = topics[n]
	}
	return c.co.consumerHeartbeat(req, "client-"+c.id, "host", heartbeatLookups{fetched: fetched, regex: sub})
}

// beat heartbeats and applies the answer; it fails the test on an error.
func (c *client) beat() *kmsg.ConsumerGroupHeartbeatResponse {
	c.t.Helper()
	return c.beatWith(testTopics)
}

func (c *client) beatWith(topics map[string]*topicMeta) *kmsg.ConsumerGroupHeartbeatResponse {
	c.t.Helper()
	resp := c.send(c.request(), topics)
	if resp.ErrorCode != 0 {
		c.t.Fatalf("member %s epoch %d: %v", c.id, c.epoch, kerr.ErrorForCode(resp.ErrorCode))
	}
	c.apply(resp)
	return resp
}

func (c *client) apply(resp *kmsg.ConsumerGroupHeartbeatResponse) {
	c.epoch, c.joined = resp.MemberEpoch, true
	if resp.MemberID != nil {
		c.id = *resp.MemberID
	}
	if resp.Assignment != nil {
		c.owned = map[tp]bool{}
		for _, t := range resp.Assignment.Topics {
			for _, p := range t.Partitions {
				c.owned[tp{t.TopicID, p}] = true
			}
		}
	}
}

func (c *client) leave() *kmsg.ConsumerGroupHeartbeatResponse {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = c.group, c.id, epochLeave
	if c.instance != nil {
		req.MemberEpoch = epochStaticLeave
	}
	c.owned, c.joined, c.epoch = map[tp]bool{}, false, 0
	return c.send(req, testTopics)
}

func partitionsOf(owned map[tp]bool, id [16]byte) []int32 {
	var out []int32
	for p := range owned {
		if p.topic == id {
			out = append(out, p.partition)
		}
	}
	slices.Sort(out)
	return out
}

// requireDisjoint fails when two clients own one partition.
func requireDisjoint(t *testing.T, clients ...*client) {
	t.Helper()
	owner := map[tp]string{}
	for _, c := range clients {
		for p := range c.owned {
			if o, dup := owner[p]; dup {
				t.Fatalf("partition %v owned by %s and %s", p, o, c.id)
			}
			owner[p] = c.id
		}
	}
}

// A second member gets partitions only after the first stopped reporting
// them, and the first one's epoch moves on only once it released them.
func TestConsumerGroupRevokesBeforeReassigning(t *testing.T) {
	co, _ := newTestCoordinator()
	a, b := newClient(t, co, "g", "a", "a"), newClient(t, co, "g", "b", "a")
	a.beat()
	if len(a.owned) != 6 || a.epoch != 1 {
		t.Fatalf("alone: a owns %d partitions at epoch %d, want 6 at 1", len(a.owned), a.epoch)
	}
	b.beat() // joins: group epoch 2, but a still holds everything
	if len(b.owned) != 0 || b.epoch != 2 {
		t.Fatalf("b joined owning %v at epoch %d, want nothing at 2", b.owned, b.epoch)
	}
	// a is told to give up three partitions; its epoch stays until it has.
	resp := a.send(a.request(), testTopics)
	if resp.ErrorCode != 0 || resp.MemberEpoch != 1 || resp.Assignment == nil {
		t.Fatalf("revocation answer: %+v", resp)
	}
	if got := len(resp.Assignment.Topics[0].Partitions); got != 3 {
		t.Fatalf("a keeps %d partitions, want 3", got)
	}
	// b heartbeats before a acknowledged: still nothing for it.
	b.beat()
	if len(b.owned) != 0 {
		t.Fatalf("b got %v before a released them", b.owned)
	}
	a.apply(resp) // a now reports only its three
	a.beat()
	if a.epoch != 2 || len(a.owned) != 3 {
		t.Fatalf("a after releasing: %d partitions at epoch %d", len(a.owned), a.epoch)
	}
	b.beat()
	if len(b.owned) != 3 {
		t.Fatalf("b owns %d partitions after a released, want 3", len(b.owned))
	}
	requireDisjoint(t, a, b)
	v, _ := co.describeConsumer("g")
	if v.state != cstateStable || v.epoch != 2 || v.assignmentEpoch != 2 || v.assignor != assignorUniform {
		t.Fatalf("describe: %+v", v)
	}
	// b leaves: a takes everything back.
	if r := b.leave(); r.ErrorCode != 0 || r.MemberEpoch != epochLeave {
		t.Fatalf("leave: %+v", r)
	}
	a.beat()
	if len(a.owned) != 6 || a.epoch != 3 {
		t.Fatalf("after b left a owns %d at epoch %d", len(a.owned), a.epoch)
	}
	a.leave()
	if _, ok := co.describeConsumer("g"); ok {
		t.Fatal("the group outlived its last member")
	}
}

func TestConsumerGroupFencing(t *testing.T) {
	co, _ := newTestCoordinator()
	a := newClient(t, co, "g", "a", "a")
	a.beat()
	code := func(mut func(*kmsg.ConsumerGroupHeartbeatRequest)) int16 {
		req := a.request()
		mut(req)
		return a.send(req, testTopics).ErrorCode
	}
	if c := code(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch++ }); c != kerr.FencedMemberEpoch.Code {
		t.Fatalf("epoch ahead: %v", kerr.ErrorForCode(c))
	}
	if c := code(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "nobody" }); c != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %v", kerr.ErrorForCode(c))
	}
	if c := code(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "other" }); c != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown group: %v", kerr.ErrorForCode(c))
	}
	// Epoch 1 → 2 when b joins and a has nothing to give up yet... it
	// does: a must revoke. After that a may still use epoch 2's
	// predecessor while it owns no more than it is assigned.
	b := newClient(t, co, "g", "b", "a")
	b.beat()
	a.beat() // revocation
	a.beat() // released: epoch 2
	if a.epoch != 2 {
		t.Fatalf("a at epoch %d, want 2", a.epoch)
	}
	if c := code(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = 1 }); c != 0 {
		t.Fatalf("previous epoch with a subset: %v", kerr.ErrorForCode(c))
	}
	if c := code(func(r *kmsg.ConsumerGroupHeartbeatRequest) {
		r.MemberEpoch = 1
		r.Topics = ownedTopics(map[tp]bool{{topicA.id, 0}: true, {topicA.id, 1}: true, {topicA.id, 2}: true, {topicA.id, 3}: true})
	}); c != kerr.FencedMemberEpoch.Code {
		t.Fatalf("previous epoch owning more than assigned: %v", kerr.ErrorForCode(c))
	}
	if c := code(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = 1; r.Topics = nil }); c != kerr.FencedMemberEpoch.Code {
		t.Fatalf("previous epoch without owned partitions: %v", kerr.ErrorForCode(c))
	}
	// A fenced member joins again with its id and epoch 0 and is sent
	// its assignment again (kgo's recovery).
	owned := a.owned
	a.epoch, a.owned = 0, map[tp]bool{}
	a.beat()
	if !maps.Equal(a.owned, owned) || a.epoch != 2 {
		t.Fatalf("rejoined a owns %v at %d, want %v at 2", a.owned, a.epoch, owned)
	}
}

func TestConsumerGroupBadRequests(t *testing.T) {
	co, _ := newTestCoordinator()
	c := newClient(t, co, "g", "a", "a")
	for name, tc := range map[string]struct {
		mut  func(*kmsg.ConsumerGroupHeartbeatRequest)
		want int16
	}{
		"unknown assignor": {func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = kmsg.StringPtr("sticky") }, kerr.UnsupportedAssignor.Code},
		"bad regex":        {func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicRegex = kmsg.StringPtr("a(") }, kerr.InvalidRegularExpression.Code},
		"overlong regex": {func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.SubscribedTopicRegex = kmsg.StringPtr(strings.Repeat("a", maxRegexLen+1))
		}, kerr.InvalidRegularExpression.Code},
		"join owning":                    {func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Topics = ownedTopics(map[tp]bool{{topicA.id, 0}: true}) }, kerr.InvalidRequest.Code},
		"join without subscription":      {func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }, kerr.InvalidRequest.Code},
		"join without rebalance timeout": {func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }, kerr.InvalidRequest.Code},
		"epoch below -2":                 {func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -3 }, kerr.InvalidRequest.Code},
		"no group":                       {func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "" }, kerr.InvalidRequest.Code},
		"no member id":                   {func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID, r.MemberEpoch = "", 3 }, kerr.InvalidRequest.Code},
		"leave unknown":                  {func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -1 }, kerr.UnknownMemberID.Code},
	} {
		req := c.request()
		tc.mut(req)
		if got := c.send(req, testTopics).ErrorCode; got != tc.want {
			t.Errorf("%s: %v, want %v", name, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
	}
	if len(co.consumers) != 0 {
		t.Fatalf("refused requests left groups: %v", slices.Collect(maps.Keys(co.consumers)))
	}
	// Epoch 0 without a member id: the server names the member.
	req := c.request()
	req.MemberID = ""
	resp := c.send(req, testTopics)
	if resp.ErrorCode != 0 || resp.MemberID == nil || *resp.MemberID == "" {
		t.Fatalf("join without an id: %+v", resp)
	}
}

func TestConsumerGroupSessionAndRevocationTimeouts(t *testing.T) {
	co, clk := newTestCoordinator()
	a, b := newClient(t, co, "g", "a", "a"), newClient(t, co, "g", "b", "a")
	a.beat()
	b.beat()
	clk.add(30 * time.Second)
	b.beat()
	a.beat() // told to revoke three; never reports back
	clk.add(20 * time.Second)
	co.expireConsumers(clk.now()) // a: 20 s since heard; revocation overdue (10 s)
	if _, ok := co.consumers["g"].members["a"]; ok {
		t.Fatal("a kept its place past its rebalance timeout while revoking")
	}
	b.beat()
	if len(b.owned) != 6 {
		t.Fatalf("b owns %d after a was fenced, want 6", len(b.owned))
	}
	if r := a.send(a.request(), testTopics); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("fenced a heartbeats: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	clk.add(44 * time.Second)
	co.expireConsumers(clk.now())
	if co.consumers["g"] == nil {
		t.Fatal("b expired before its session timeout")
	}
	clk.add(2 * time.Second)
	co.expireConsumers(clk.now())
	if co.consumers["g"] != nil {
		t.Fatal("b outlived its session timeout")
	}
}

// Static members (KIP-848 with group.instance.id): leaving with epoch -2
// keeps the partitions for the next incarnation; the others do not move.
func TestConsumerGroupStaticMember(t *testing.T) {
	co, _ := newTestCoordinator()
	inst := "worker-1"
	a, b := newClient(t, co, "g", "a1", "a"), newClient(t, co, "g", "b", "a")
	a.instance = &inst
	a.beat()
	b.beat()
	a.beat()
	a.beat()
	b.beat()
	owned, epoch := a.owned, co.consumers["g"].epoch
	// A second process with the same instance id while a1 is active.
	a2 := newClient(t, co, "g", "a2", "a")
	a2.instance = &inst
	if r := a2.send(a2.request(), testTopics); r.ErrorCode != kerr.UnreleasedInstanceID.Code {
		t.Fatalf("second incarnation while the first is active: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := a.leave(); r.ErrorCode != 0 || r.MemberEpoch != epochStaticLeave {
		t.Fatalf("static leave: %+v", r)
	}
	b.beat()
	if len(b.owned) != 3 {
		t.Fatalf("b took a's partitions while a was away: %d", len(b.owned))
	}
	a2.beat()
	if !maps.Equal(a2.owned, owned) || co.consumers["g"].epoch != epoch {
		t.Fatalf("new incarnation owns %v (group epoch %d), want %v (%d)", a2.owned, co.consumers["g"].epoch, owned, epoch)
	}
	// The replaced incarnation is fenced by its instance id.
	old := newClient(t, co, "g", "a1", "a")
	old.instance, old.epoch = &inst, a2.epoch
	if r := old.send(old.request(), testTopics); r.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("old incarnation: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	requireDisjoint(t, a2, b)
}

func TestConsumerGroupRangeAssignorAndNewPartitions(t *testing.T) {
	co, _ := newTestCoordinator()
	a, b := newClient(t, co, "g", "a", "a", "b"), newClient(t, co, "g", "b", "a")
	a.assignor, b.assignor = assignorRange, assignorRange
	b.beat()
	a.beat()
	for range 3 {
		b.beat()
		a.beat()
	}
	if got := partitionsOf(a.owned, topicA.id); !slices.Equal(got, []int32{0, 1, 2}) {
		t.Fatalf("range: a owns %v of topic a", got)
	}
	if got := partitionsOf(b.owned, topicA.id); !slices.Equal(got, []int32{3, 4, 5}) {
		t.Fatalf("range: b owns %v of topic a", got)
	}
	if got := partitionsOf(a.owned, topicB.id); !slices.Equal(got, []int32{0, 1}) {
		t.Fatalf("range: a owns %v of topic b (only a subscribes)", got)
	}
	if v, _ := co.describeConsumer("g"); v.assignor != assignorRange {
		t.Fatalf("assignor %q", v.assignor)
	}
	// Topic b grows to 4 partitions and a topic c appears: both are
	// assigned at the next heartbeats.
	grown := map[string]*topicMeta{"a": &topicA, "b": {id: topicB.id, partitions: 4}, "c": {id: [16]byte{3}, partitions: 1}}
	a.subs = append(a.subs, "c")
	a.beatWith(grown)
	a.beatWith(grown)
	if got := partitionsOf(a.owned, topicB.id); !slices.Equal(got, []int32{0, 1, 2, 3}) {
		t.Fatalf("after growth a owns %v of topic b", got)
	}
	if got := partitionsOf(a.owned, [16]byte{3}); !slices.Equal(got, []int32{0}) {
		t.Fatalf("a owns %v of the new topic c", got)
	}
}

func TestConsumerGroupAndClassicGroupExcludeEachOther(t *testing.T) {
	co, _ := newTestCoordinator()
	a := newClient(t, co, "g", "a", "a")
	a.beat()
	resp, _ := co.join(joinRequest("g", ""), "c", "h")()
	if code := resp.(*kmsg.JoinGroupResponse).ErrorCode; code != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("classic join of a consumer group: %v", kerr.ErrorForCode(code))
	}
	if existed, ok := co.forget("g"); !existed || ok {
		t.Fatal("a consumer group with members could be deleted")
	}
	resp, _ = co.join(joinRequest("classic", ""), "c", "h")()
	id := resp.(*kmsg.JoinGroupResponse).MemberID
	co.join(joinRequest("classic", id), "c", "h")
	c := newClient(t, co, "classic", "x", "a")
	if r := c.send(c.request(), testTopics); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("consumer heartbeat to a classic group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// Offsets: the member's epoch is its generation (OffsetCommit v9).
	for _, tc := range []struct {
		member  string
		epoch   int32
		version int16
		want    int16
	}{
		{"a", a.epoch, 9, 0},
		{"a", a.epoch + 1, 9, kerr.FencedMemberEpoch.Code},
		{"a", a.epoch - 1, 9, kerr.StaleMemberEpoch.Code},
		{"nobody", a.epoch, 9, kerr.UnknownMemberID.Code},
		{"a", a.epoch, 8, kerr.UnsupportedVersion.Code},
		{"", -1, 9, kerr.UnknownMemberID.Code},
	} {
		if got := co.checkOffsetCommit("g", tc.member, nil, tc.epoch, tc.version); got != tc.want {
			t.Errorf("commit by %q epoch %d v%d: %v, want %v", tc.member, tc.epoch, tc.version, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
	}
	var types []string
	for _, v := range co.list() {
		types = append(types, v.name+"/"+v.groupType)
	}
	if !slices.Equal(types, []string{"classic/classic", "g/consumer"}) {
		t.Fatalf("list: %v", types)
	}
}

func TestConsumerGroupMemberCap(t *testing.T) {
	co, _ := newTestCoordinator()
	for i := range maxConsumerGroupMembers {
		newClient(t, co, "g", fmt.Sprint("m", i), "a").beat()
	}
	c := newClient(t, co, "g", "one-too-many", "a")
	if r := c.send(c.request(), testTopics); r.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("member %d: %v", maxConsumerGroupMembers+1, kerr.ErrorForCode(r.ErrorCode))
	}
}

// Members join, heartbeat, leave and rejoin at random; no partition is ever
// owned by two members, and once they settle every partition is owned and
// the load is even.
func TestConsumerGroupRandomChurnNeverDoubleAssigns(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		co, _ := newTestCoordinator()
		clients := make([]*client, 4)
		for i := range clients {
			clients[i] = newClient(t, co, "g", fmt.Sprint("m", i), "a", "b")
		}
		for range 300 {
			c := clients[rng.IntN(len(clients))]
			switch {
			case c.joined && rng.IntN(10) == 0:
				c.leave()
			default:
				c.beat()
			}
			requireDisjoint(t, clients...)
		}
		for range 10 {
			for _, c := range clients {
				c.beat()
			}
		}
		requireDisjoint(t, clients...)
		total, lo, hi := 0, 100, 0
		for _, c := range clients {
			total += len(c.owned)
			lo, hi = min(lo, len(c.owned)), max(hi, len(c.owned))
		}
		if total != 8 || hi-lo > 1 {
			t.Fatalf("seed %d: settled with %d partitions owned, loads %d..%d", seed, total, lo, hi)
		}
		if v, _ := co.describeConsumer("g"); v.state != cstateStable {
			t.Fatalf("seed %d: settled group is %s", seed, v.state)
		}
	}
}

// The uniform assignor at the group size limit: even counts, and a member
// joining takes its share without any other partition moving.
func TestUniformAssignorIsEvenAndSticky(t *testing.T) {
	g := &cgroup{assignor: assignorUniform, members: map[string]*cmember{}, topics: map[string]topicMeta{},
		target: map[string]map[tp]bool{}, holder: map[tp]string{}}
	var subs []string
	for i := range 10 {
		n := fmt.Sprint("t", i)
		g.topics[n] = topicMeta{id: [16]byte{byte(i + 1)}, partitions: 1000}
		subs = append(subs, n)
	}
	for i := range maxConsumerGroupMembers - 1 {
		id := fmt.Sprintf("m%04d", i)
		g.members[id] = &cmember{id: id, subscribed: subs}
	}
	g.newEpoch()
	before := map[tp]string{}
	for id, set := range g.target {
		if n := len(set); n < 10 || n > 11 {
			t.Fatalf("%s targets %d partitions, want 10 or 11", id, n)
		}
		for k := range set {
			before[k] = id
		}
	}
	if len(before) != 10_000 {
		t.Fatalf("%d of 10000 partitions assigned", len(before))
	}
	g.members["new"] = &cmember{id: "new", subscribed: subs}
	g.newEpoch()
	moved := 0
	for id, set := range g.target {
		if len(set) != 10 {
			t.Fatalf("%s targets %d partitions after the join, want 10", id, len(set))
		}
		for k := range set {
			if before[k] != id {
				moved++
			}
		}
	}
	if moved != 10 {
		t.Fatalf("%d partitions moved for one new member, want its 10", moved)
	}
	// Keeping at most an even share can leave a newcomer short: 7
	// partitions held 4 and 3, a third member joins.
	seven := topicMeta{id: [16]byte{7}, partitions: 7}
	s := &cgroup{assignor: assignorUniform, members: map[string]*cmember{
		"a": {id: "a", subscribed: []string{"s"}}, "b": {id: "b", subscribed: []string{"s"}},
	}, topics: map[string]topicMeta{"s": seven}, target: map[string]map[tp]bool{}, holder: map[tp]string{}}
	s.newEpoch()
	s.members["c"] = &cmember{id: "c", subscribed: []string{"s"}}
	s.newEpoch()
	for id, set := range s.target {
		if len(set) < 2 || len(set) > 3 {
			t.Fatalf("7 partitions over 3 members: %s targets %d", id, len(set))
		}
	}
	// Members subscribed to different topics: each topic's partitions go
	// only to its subscribers, as evenly as that allows.
	h := &cgroup{assignor: assignorUniform, members: map[string]*cmember{
		"x": {id: "x", subscribed: []string{"a"}},
		"y": {id: "y", subscribed: []string{"a", "b"}},
		"z": {id: "z", subscribed: []string{"b"}},
	}, topics: map[string]topicMeta{"a": topicA, "b": topicB}, target: map[string]map[tp]bool{}, holder: map[tp]string{}}
	h.newEpoch()
	for id, want := range map[string]int{"x": 3, "y": 3, "z": 2} {
		if got := len(h.target[id]); got != want {
			t.Errorf("heterogeneous: %s targets %d, want %d (%v)", id, got, want, h.target)
		}
	}
	for k := range h.target["z"] {
		if k.topic != topicB.id {
			t.Fatalf("z targets %v of a topic it does not subscribe to", k)
		}
	}
}

// A member subscribed by pattern is assigned the topics it matches whole,
// follows topics as they are created and deleted, and shares them with a
// member subscribed by name; ConsumerGroupDescribe's view shows the pattern.
func TestConsumerGroupRegexSubscription(t *testing.T) {
	co, _ := newTestCoordinator()
	topicAB := topicMeta{id: [16]byte{3}, partitions: 3}
	topics := map[string]*topicMeta{"a": &topicA, "b": &topicB, "ab": &topicAB}
	byPattern := newClient(t, co, "g", "p")
	byPattern.regex = "a.?" // whole-name: a and ab, not b
	byPattern.beatWith(topics)
	byPattern.beatWith(topics)
	if got, want := len(byPattern.owned), int(topicA.partitions+topicAB.partitions); got != want {
		t.Fatalf("pattern member owns %d partitions, want %d (a and ab)", got, want)
	}
	if ps := partitionsOf(byPattern.owned, topicB.id); len(ps) != 0 {
		t.Fatalf("pattern a.? was given b's partitions %v: it must match the whole name", ps)
	}

	// A topic created later that matches reaches the member on its next
	// heartbeats, which send no subscription at all.
	topicAC := topicMeta{id: [16]byte{4}, partitions: 2}
	topics["ac"] = &topicAC
	for range 2 {
		req := byPattern.request()
		req.SubscribedTopicRegex, req.SubscribedTopicNames = nil, nil
		resp := byPattern.send(req, topics)
		if resp.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(resp.ErrorCode))
		}
		byPattern.apply(resp)
	}
	if ps := partitionsOf(byPattern.owned, topicAC.id); len(ps) != 2 {
		t.Fatalf("created topic ac: member owns %v of it, want both partitions", ps)
	}

	// A member by name shares what both subscribe to.
	byName := newClient(t, co, "g", "n", "a")
	for range 4 {
		byName.beatWith(topics)
		byPattern.beatWith(topics)
	}
	requireDisjoint(t, byPattern, byName)
	if n := len(partitionsOf(byName.owned, topicA.id)); n == 0 {
		t.Fatalf("member by name got none of a; pattern member owns %v", byPattern.owned)
	}

	// Deleting a matched topic takes it away.
	delete(topics, "ab")
	for range 3 {
		byPattern.beatWith(topics)
	}
	if ps := partitionsOf(byPattern.owned, topicAB.id); len(ps) != 0 {
		t.Fatalf("deleted topic ab still assigned: %v", ps)
	}

	v, _ := co.describeConsumer("g")
	for _, m := range v.members {
		if m.id == byPattern.id && (m.regex != "a.?" || len(m.names) != 0) {
			t.Fatalf("described pattern member: regex %q names %v", m.regex, m.names)
		}
		if m.id == byName.id && (m.regex != "" || !slices.Equal(m.names, []string{"a"})) {
			t.Fatalf("described name member: regex %q names %v", m.regex, m.names)
		}
	}
}

// The resolver matches whole names, compiles a pattern once, and answers
// a topic list it has seen from its cache.
func TestRegexResolverCachesByTopicList(t *testing.T) {
	var r regexResolver
	names := []string{"orders", "orders-eu", "payments", "x-orders"}
	got, internal, err := r.resolve("orders.*", names)
	if err != nil || internal || !slices.Equal(got, []string{"orders", "orders-eu"}) {
		t.Fatalf("resolve: %v %v %v", got, internal, err)
	}
	again, _, _ := r.resolve("orders.*", names)
	if len(again) == 0 || &again[0] != &got[0] {
		t.Fatal("same topic list: the cached answer was not reused")
	}
	more := append(slices.Clone(names), "orders-us")
	slices.Sort(more)
	if got, _, _ := r.resolve("orders.*", more); !slices.Equal(got, []string{"orders", "orders-eu", "orders-us"}) {
		t.Fatalf("new topic list: %v", got)
	}
	if _, _, err := r.resolve("(", names); err == nil {
		t.Fatal("invalid pattern accepted")
	}
	if _, internal, _ := r.resolve(".*(?:offsets).*", names); !internal {
		t.Fatal("a pattern matching __consumer_offsets: the internal topic not reported")
	}
}
