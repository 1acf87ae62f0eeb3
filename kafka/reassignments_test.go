package kafka

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
)

// fakeView is a data group as the reassignment APIs read it.
type fakeView struct {
	recorded []string
	leader   broker.GroupLeader
}

func (v *fakeView) Replicas() []string         { return v.recorded }
func (v *fakeView) Leader() broker.GroupLeader { return v.leader }

// reassignCluster is a listener of node 1 in a 5-node cluster with two
// data groups of 3 replicas: group 1 on nodes 1, 2, 3 and group 2 on 3, 4,
// 5, neither moving. Topics a and b (2 partitions each) live in group 1,
// topic c (1 partition) in group 2.
type reassignCluster struct {
	s     *Server
	meta  *fakeBroker // group 0
	views []*fakeView // by group; nil at 0
	a, b  string      // topics of group 1
	c     string      // topic of group 2
}

func newReassignCluster(t *testing.T, cfg Config) *reassignCluster {
	t.Helper()
	meta := newFakeBroker()
	meta.topics = map[string]broker.TopicInfo{}
	meta.members = nil
	for id := 1; id <= 5; id++ {
		meta.members = append(meta.members, broker.Member{NodeAddrs: broker.NodeAddrs{ID: fmt.Sprint(id), KafkaAddr: fmt.Sprintf("10.0.0.%d:9092", id)}, Voter: true})
	}
	data := []*fakeBroker{newFakeBroker(), newFakeBroker()}
	for _, d := range data {
		d.topics = map[string]broker.TopicInfo{}
	}
	cfg.Groups = []Broker{meta, data[0], data[1]}
	cfg.Forwarding = cfg.Groups
	cfg.Directory = make([]*broker.RemoteGroup, 3)
	s := newTestServer(t, meta, cfg)
	rc := &reassignCluster{s: s, meta: meta, views: []*fakeView{nil,
		{recorded: []string{"1", "2", "3"}, leader: broker.GroupLeader{ID: "1", Members: []string{"1", "2", "3"}}},
		{recorded: []string{"3", "4", "5"}, leader: broker.GroupLeader{ID: "3", Members: []string{"3", "4", "5"}}},
	}}
	s.views = []replicaView{nil, rc.views[1], rc.views[2]}
	var names []string
	for i := 0; len(names) < 3; i++ {
		name := fmt.Sprintf("t%d", i)
		if g := s.placedIn(name); g == 1 && len(names) < 2 || g == 2 && len(names) == 2 {
			names = append(names, name)
		}
	}
	rc.a, rc.b, rc.c = names[0], names[1], names[2]
	for i, name := range names {
		partitions := int32(2)
		if name == rc.c {
			partitions = 1
		}
		data[s.placedIn(name)-1].topics[name] = broker.TopicInfo{ID: uint64(10 + i), Name: name, Partitions: partitions}
	}
	return rc
}

// alterRequest asks, per "topic/partition", for replicas (nil: a cancel).
func alterRequest(version int16, asks map[string][]int32) *kmsg.AlterPartitionAssignmentsRequest {
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.Version = version
	at := map[string]int{}
	for _, key := range slices.Sorted(maps.Keys(asks)) {
		topic, partition, _ := strings.Cut(key, "/")
		i, ok := at[topic]
		if !ok {
			i = len(req.Topics)
			at[topic] = i
			rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			rt.Topic = topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		fmt.Sscan(partition, &rp.Partition)
		rp.Replicas = asks[key]
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req
}

// codes are the answer's error codes by "topic/partition".
func codes(resp *kmsg.AlterPartitionAssignmentsResponse) map[string]int16 {
	out := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out[fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)] = rp.ErrorCode
		}
	}
	return out
}

// messageOf is the answer's error message for "topic/partition".
func messageOf(resp *kmsg.AlterPartitionAssignmentsResponse, key string) string {
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if fmt.Sprintf("%s/%d", rt.Topic, rp.Partition) == key && rp.ErrorMessage != nil {
				return *rp.ErrorMessage
			}
		}
	}
	return ""
}

func requireCodes(t *testing.T, resp *kmsg.AlterPartitionAssignmentsResponse, want map[string]int16) {
	t.Helper()
	got := codes(resp)
	for key, code := range want {
		if got[key] != code {
			t.Errorf("%s: %s, want %s", key, codeName(got[key]), codeName(code))
		}
	}
	if len(got) != len(want) {
		t.Errorf("answered %v, want %v", got, want)
	}
}

func (rc *reassignCluster) alter(t *testing.T, c *conn, version int16, asks map[string][]int32) *kmsg.AlterPartitionAssignmentsResponse {
	t.Helper()
	return roundTrip(t, c, alterRequest(version, asks)).(*kmsg.AlterPartitionAssignmentsResponse)
}

func (rc *reassignCluster) requireRecorded(t *testing.T, want ...replicasCall) {
	t.Helper()
	if len(rc.meta.setReplicas) != len(want) {
		t.Fatalf("recorded %v, want %v", rc.meta.setReplicas, want)
	}
	for i, call := range rc.meta.setReplicas {
		if call.group != want[i].group || !slices.Equal(call.nodes, want[i].nodes) {
			t.Fatalf("recorded %v, want %v", rc.meta.setReplicas, want)
		}
	}
	rc.meta.setReplicas = nil
}

// Every partition of a raft group shares the group's replicas: the
// partitions a request names in one group move the group once, and only
// when they all ask for the same replicas.
func TestAlterPartitionAssignmentsMovesWholeGroups(t *testing.T) {
	rc := newReassignCluster(t, DefaultConfig())
	c := newTestConn(t, rc.s, nil)
	for _, version := range []int16{0, 1} {
		resp := rc.alter(t, c, version, map[string][]int32{
			rc.a + "/0": {4, 2, 3}, rc.a + "/1": {4, 2, 3}, rc.b + "/1": {4, 2, 3}, rc.c + "/0": {1, 4, 5},
		})
		requireCodes(t, resp, map[string]int16{rc.a + "/0": 0, rc.a + "/1": 0, rc.b + "/1": 0, rc.c + "/0": 0})
		if resp.ErrorCode != 0 {
			t.Fatalf("top-level %s", codeName(resp.ErrorCode))
		}
		rc.requireRecorded(t, replicasCall{1, []string{"4", "2", "3"}}, replicasCall{2, []string{"1", "4", "5"}})
	}

	// Different lists (or a list and a cancel) for one group: none of
	// its partitions moves; the other group does.
	for _, other := range [][]int32{{2, 4, 3}, {4, 2, 5}, nil} {
		resp := rc.alter(t, c, 1, map[string][]int32{rc.a + "/0": {4, 2, 3}, rc.b + "/0": other, rc.c + "/0": {1, 4, 5}})
		requireCodes(t, resp, map[string]int16{rc.a + "/0": kerr.InvalidReplicaAssignment.Code, rc.b + "/0": kerr.InvalidReplicaAssignment.Code, rc.c + "/0": 0})
		if msg := messageOf(resp, rc.b+"/0"); !strings.Contains(msg, "raft group 1") || !strings.Contains(msg, rc.a+", "+rc.b) {
			t.Fatalf("conflict message %q", msg)
		}
		rc.requireRecorded(t, replicasCall{2, []string{"1", "4", "5"}})
	}
}

func TestAlterPartitionAssignmentsRefusals(t *testing.T) {
	rc := newReassignCluster(t, DefaultConfig())
	c := newTestConn(t, rc.s, nil)
	for _, tc := range []struct {
		name     string
		replicas []int32
		want     int16
		msg      string
	}{
		{"not a broker", []int32{9, 2, 3}, kerr.InvalidReplicaAssignment.Code, "broker 9 is not a voting member"},
		{"negative", []int32{-1, 2, 3}, kerr.InvalidReplicaAssignment.Code, "broker -1"},
		{"twice", []int32{4, 4, 3}, kerr.InvalidReplicaAssignment.Code, "named twice"},
		{"empty", []int32{}, kerr.InvalidReplicaAssignment.Code, "empty replica list"},
		{"six", []int32{1, 2, 3, 4, 5, 6}, kerr.InvalidReplicaAssignment.Code, "at most 5"},
	} {
		resp := rc.alter(t, c, 1, map[string][]int32{rc.a + "/0": tc.replicas, rc.a + "/1": tc.replicas})
		requireCodes(t, resp, map[string]int16{rc.a + "/0": tc.want, rc.a + "/1": tc.want})
		if msg := messageOf(resp, rc.a+"/1"); !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: message %q, want one with %q", tc.name, msg, tc.msg)
		}
	}
	// A non-voting member of the cluster is no place for replicas.
	rc.meta.members[4].Voter = false
	requireCodes(t, rc.alter(t, c, 1, map[string][]int32{rc.c + "/0": {3, 4, 5}}), map[string]int16{rc.c + "/0": kerr.InvalidReplicaAssignment.Code})
	rc.meta.members[4].Voter = true

	// Unknown topics and partitions; the internal topic never moves.
	requireCodes(t, rc.alter(t, c, 1, map[string][]int32{"nowhere/0": {1, 2, 3}, rc.c + "/1": {1, 2, 3}, rc.c + "/-1": {1, 2, 3},
		"__consumer_offsets/0": {1, 2, 3}, "__consumer_offsets/1": {1, 2, 3}}),
		map[string]int16{"nowhere/0": kerr.UnknownTopicOrPartition.Code, rc.c + "/1": kerr.UnknownTopicOrPartition.Code, rc.c + "/-1": kerr.UnknownTopicOrPartition.Code,
			"__consumer_offsets/0": kerr.InvalidRequest.Code, "__consumer_offsets/1": kerr.UnknownTopicOrPartition.Code})

	// v1 may forbid a change of replication factor (KIP-860).
	req := alterRequest(1, map[string][]int32{rc.c + "/0": {3, 4}})
	req.AllowReplicationFactorChange = false
	resp := roundTrip(t, c, req).(*kmsg.AlterPartitionAssignmentsResponse)
	requireCodes(t, resp, map[string]int16{rc.c + "/0": kerr.InvalidReplicationFactor.Code})
	if resp.AllowReplicationFactorChange {
		t.Errorf("the answer allows a change of replication factor; the request did not")
	}
	rc.requireRecorded(t)

	// Group 0's leader lost the lead meanwhile: NOT_CONTROLLER, which
	// clients retry.
	rc.meta.setReplicasErr = fmt.Errorf("%w: no leader", broker.ErrNotLeader)
	requireCodes(t, rc.alter(t, c, 1, map[string][]int32{rc.c + "/0": {3, 4, 1}}), map[string]int16{rc.c + "/0": kerr.NotController.Code})
	rc.meta.setReplicasErr = fmt.Errorf("%w: node 4 left", broker.ErrInvalid)
	requireCodes(t, rc.alter(t, c, 1, map[string][]int32{rc.c + "/0": {3, 4, 1}}), map[string]int16{rc.c + "/0": kerr.InvalidReplicaAssignment.Code})
	rc.meta.setReplicasErr = broker.ErrUpgradeInProgress
	requireCodes(t, rc.alter(t, c, 1, map[string][]int32{rc.c + "/0": {3, 4, 1}}), map[string]int16{rc.c + "/0": kerr.InvalidRequest.Code})
}

// Any broker takes a reassignment, not only the controller (group 0's
// leader): it sends the record there (KIP-590).
func TestAlterPartitionAssignmentsOnAnyBroker(t *testing.T) {
	rc := newReassignCluster(t, DefaultConfig())
	rc.meta.leaderID = "2"
	c := newTestConn(t, rc.s, nil)
	resp := rc.alter(t, c, 1, map[string][]int32{rc.a + "/0": {4, 2, 3}})
	if resp.ErrorCode != 0 {
		t.Fatalf("top-level %s through a broker that is not the controller, want none", codeName(resp.ErrorCode))
	}
	requireCodes(t, resp, map[string]int16{rc.a + "/0": 0})
	rc.requireRecorded(t, replicasCall{1, []string{"4", "2", "3"}})
}

// A cancel stops a move where it is: the group's members become its
// replicas, its leader first. A group not moving has nothing to cancel.
func TestAlterPartitionAssignmentsCancel(t *testing.T) {
	rc := newReassignCluster(t, DefaultConfig())
	c := newTestConn(t, rc.s, nil)
	requireCodes(t, rc.alter(t, c, 1, map[string][]int32{rc.a + "/0": nil}), map[string]int16{rc.a + "/0": kerr.NoReassignmentInProgress.Code})
	rc.requireRecorded(t)

	// Group 1 moves from 1, 2, 3 to 4, 5, 3: node 4 has joined, node 1
	// (the leader) not yet left.
	rc.views[1].recorded = []string{"4", "5", "3"}
	rc.views[1].leader = broker.GroupLeader{ID: "1", Members: []string{"1", "2", "3", "4"}}
	requireCodes(t, rc.alter(t, c, 1, map[string][]int32{rc.a + "/0": nil, rc.b + "/1": nil}), map[string]int16{rc.a + "/0": 0, rc.b + "/1": 0})
	rc.requireRecorded(t, replicasCall{1, []string{"1", "4", "3", "2"}})

	// No leader reports the members in time: a retriable timeout.
	rc.views[1].leader = broker.GroupLeader{}
	req := alterRequest(1, map[string][]int32{rc.a + "/0": nil})
	req.TimeoutMillis = 300
	requireCodes(t, roundTrip(t, c, req).(*kmsg.AlterPartitionAssignmentsResponse), map[string]int16{rc.a + "/0": kerr.RequestTimedOut.Code})
	rc.requireRecorded(t)
}

// Without a replication factor every broker replicates every partition:
// nothing can move and nothing is moving.
func TestReassignmentsWithoutAReplicationFactor(t *testing.T) {
	fb := newFakeBroker()
	c := newTestConn(t, newTestServer(t, fb, DefaultConfig()), nil)
	resp := roundTrip(t, c, alterRequest(1, map[string][]int32{"orders/0": {1, 2}, "orders/1": nil, "nowhere/0": {1}})).(*kmsg.AlterPartitionAssignmentsResponse)
	requireCodes(t, resp, map[string]int16{"orders/0": kerr.InvalidRequest.Code, "orders/1": kerr.NoReassignmentInProgress.Code, "nowhere/0": kerr.UnknownTopicOrPartition.Code})
	if msg := messageOf(resp, "orders/0"); !strings.Contains(msg, "--replication-factor") {
		t.Fatalf("message %q", msg)
	}
	list := roundTrip(t, c, kmsg.NewPtrListPartitionReassignmentsRequest()).(*kmsg.ListPartitionReassignmentsResponse)
	if list.ErrorCode != 0 || len(list.Topics) != 0 {
		t.Fatalf("listing: %s, %d topics", codeName(list.ErrorCode), len(list.Topics))
	}
}

func TestListPartitionReassignments(t *testing.T) {
	rc := newReassignCluster(t, DefaultConfig())
	c := newTestConn(t, rc.s, nil)
	list := func(topics map[string][]int32) *kmsg.ListPartitionReassignmentsResponse {
		req := kmsg.NewPtrListPartitionReassignmentsRequest()
		req.TimeoutMillis = 300
		for _, name := range slices.Sorted(maps.Keys(topics)) {
			rt := kmsg.NewListPartitionReassignmentsRequestTopic()
			rt.Topic, rt.Partitions = name, topics[name]
			req.Topics = append(req.Topics, rt)
		}
		return roundTrip(t, c, req).(*kmsg.ListPartitionReassignmentsResponse)
	}
	if resp := list(nil); resp.ErrorCode != 0 || len(resp.Topics) != 0 {
		t.Fatalf("nothing moving: %s, %+v", codeName(resp.ErrorCode), resp.Topics)
	}

	// Group 1 moves from 1, 2, 3 to 4, 5, 3; node 4 has joined.
	rc.views[1].recorded = []string{"4", "5", "3"}
	rc.views[1].leader = broker.GroupLeader{ID: "1", Members: []string{"1", "2", "3", "4"}}
	resp := list(nil)
	if resp.ErrorCode != 0 || len(resp.Topics) != 2 || resp.Topics[0].Topic != min(rc.a, rc.b) || resp.Topics[1].Topic != max(rc.a, rc.b) {
		t.Fatalf("every topic: %s, %+v, want %s and %s", codeName(resp.ErrorCode), resp.Topics, rc.a, rc.b)
	}
	for _, rt := range resp.Topics {
		if len(rt.Partitions) != 2 {
			t.Fatalf("%s: %d partitions listed, want 2", rt.Topic, len(rt.Partitions))
		}
		for _, p := range rt.Partitions {
			if !slices.Equal(p.Replicas, []int32{4, 5, 3, 1, 2}) || !slices.Equal(p.AddingReplicas, []int32{5}) || !slices.Equal(p.RemovingReplicas, []int32{1, 2}) {
				t.Fatalf("%s[%d]: replicas %v, adding %v, removing %v", rt.Topic, p.Partition, p.Replicas, p.AddingReplicas, p.RemovingReplicas)
			}
		}
	}

	// Named: the partitions asked for that exist, each once; unknown
	// topics and topics not moving are left out.
	resp = list(map[string][]int32{rc.a: {1, 1, 7}, rc.b: {}, rc.c: {0}, "nowhere": {0}})
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Topic != rc.a || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].Partition != 1 {
		t.Fatalf("named: %s, %+v", codeName(resp.ErrorCode), resp.Topics)
	}

	// A group whose leader does not report its members: a retriable
	// timeout rather than a listing that would say it is not moving.
	rc.views[1].leader = broker.GroupLeader{}
	if resp := list(map[string][]int32{rc.a: {0}}); resp.ErrorCode != kerr.RequestTimedOut.Code || len(resp.Topics) != 0 {
		t.Fatalf("no leader: %s, %+v", codeName(resp.ErrorCode), resp.Topics)
	}
}

// Moving replicas takes ALTER on the cluster (waggle's Manage: admins, or
// an ACL); listing moves DESCRIBE on it (waggle's Read).
func TestReassignmentsAuthorization(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Auth.Enabled = true
	rc := newReassignCluster(t, cfg)
	for _, tc := range []struct {
		role        auth.Role
		alter, list bool
	}{
		{auth.Admin, true, true},
		{auth.ReadWrite, false, true},
		{auth.ReadOnly, false, true},
		{auth.WriteOnly, false, false},
	} {
		c := newTestConn(t, rc.s, &auth.Principal{Name: "p", Role: tc.role})
		resp := rc.alter(t, c, 1, map[string][]int32{rc.a + "/0": {4, 2, 3}})
		want := int16(0)
		if !tc.alter {
			want = kerr.ClusterAuthorizationFailed.Code
		}
		if resp.ErrorCode != want || codes(resp)[rc.a+"/0"] != want {
			t.Errorf("%s alters: top %s, partition %s, want %s", tc.role, codeName(resp.ErrorCode), codeName(codes(resp)[rc.a+"/0"]), codeName(want))
		}
		list := roundTrip(t, c, kmsg.NewPtrListPartitionReassignmentsRequest()).(*kmsg.ListPartitionReassignmentsResponse)
		if denied := list.ErrorCode == kerr.ClusterAuthorizationFailed.Code; denied == tc.list {
			t.Errorf("%s lists: %s", tc.role, codeName(list.ErrorCode))
		}
	}
}

func TestGroupMove(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		move                       groupMove
		moving                     bool
		replicas, adding, removing []string
		stopped                    []string
	}{
		{"settled", groupMove{"1", []string{"1", "2", "3"}, []string{"3", "1", "2"}, nil}, false, []string{"1", "2", "3"}, nil, nil, []string{"1", "2", "3"}},
		{"started", groupMove{"2", []string{"4", "2", "3"}, []string{"1", "2", "3"}, nil}, true, []string{"4", "2", "3", "1"}, []string{"4"}, []string{"1"}, []string{"2", "3", "1"}},
		{"joined", groupMove{"1", []string{"4", "2", "3"}, []string{"1", "2", "3", "4"}, nil}, true, []string{"4", "2", "3", "1"}, nil, []string{"1"}, []string{"1", "4", "2", "3"}},
		{"not voting yet", groupMove{"1", []string{"1", "2", "3", "4"}, []string{"1", "2", "3", "4"}, []string{"1", "2", "3"}}, true, []string{"1", "2", "3", "4"}, nil, nil, []string{"1", "2", "3", "4"}},
		{"grown", groupMove{"1", []string{"1", "2", "3", "4", "5"}, []string{"1", "2", "3"}, nil}, true, []string{"1", "2", "3", "4", "5"}, []string{"4", "5"}, nil, []string{"1", "2", "3"}},
		// Three replicas moving to three others, caught with all six:
		// at most five are recorded, the leader and the new ones first.
		{"six", groupMove{"1", []string{"4", "5", "6"}, []string{"1", "2", "3", "4", "5", "6"}, nil}, true, []string{"4", "5", "6", "1", "2", "3"}, nil, []string{"1", "2", "3"}, []string{"1", "4", "5", "6", "2"}},
	} {
		m := tc.move
		if m.moving() != tc.moving || !slices.Equal(m.replicas(), tc.replicas) || !slices.Equal(m.adding(), tc.adding) ||
			!slices.Equal(m.removing(), tc.removing) || !slices.Equal(m.stopped(), tc.stopped) {
			t.Errorf("%s: moving %v, replicas %v, adding %v, removing %v, stopped %v; want %v, %v, %v, %v, %v", tc.name,
				m.moving(), m.replicas(), m.adding(), m.removing(), m.stopped(), tc.moving, tc.replicas, tc.adding, tc.removing, tc.stopped)
		}
	}
}
