package kafka

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// joinRequest is a JoinGroup v5 for group with one "range" protocol.
func joinRequest(group, memberID string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.ProtocolType = group, memberID, "consumer"
	req.SessionTimeoutMillis = 10_000
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte(memberID)
	req.Protocols = []kmsg.JoinGroupRequestProtocol{p}
	return req
}

// Regression test for a data race: describe returned the coordinator's own
// *member values, and DescribeGroups read them after the lock was released
// while JoinGroup, SyncGroup, Heartbeat and LeaveGroup wrote them under it.
// Fails under -race on that code; passes once describe hands out copies.
func TestDescribeWhileMembersJoinAndLeave(t *testing.T) {
	co := newCoordinator()
	const group, joiners, rounds = "g", 4, 200
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for j := range joiners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := fmt.Sprintf("client-%d", j)
			for r := range rounds {
				resp, _ := co.join(joinRequest(group, ""), client, "host")() // MEMBER_ID_REQUIRED, answered at once
				id := resp.(*kmsg.JoinGroupResponse).MemberID
				co.join(joinRequest(group, id), client, "host")                                // adds the member; its answer is not awaited
				co.join(joinRequest(group, id), fmt.Sprintf("%s-%d", client, r), "host-again") // rewrites it
				co.heartbeat(group, id, nil, 0)
				co.leave(group, []leaver{{memberID: id}})
			}
		}()
	}
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, v := range append(co.list(), func() groupView { v, _ := co.describe(group); return v }()) {
					for _, m := range v.members {
						_ = len(m.id) + len(m.clientID) + len(m.clientHost) + len(m.instanceID) + len(m.assignment)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
}

// forget answers "known here" and "empty" from one critical section
// (DeleteGroups used to ask describe first, then forget).
func TestForgetReportsKnownAndEmpty(t *testing.T) {
	co := newCoordinator()
	if existed, ok := co.forget("nobody"); existed || !ok {
		t.Fatalf("unknown group: existed %v, ok %v", existed, ok)
	}
	resp, _ := co.join(joinRequest("g", ""), "c", "h")()
	co.join(joinRequest("g", resp.(*kmsg.JoinGroupResponse).MemberID), "c", "h")
	if existed, ok := co.forget("g"); !existed || ok {
		t.Fatalf("group with a member: existed %v, ok %v", existed, ok)
	}
	if v := co.list(); len(v) != 1 || v[0].name != "g" || v[0].state != statePreparing {
		t.Fatalf("list: %+v", v)
	}
	co.leave("g", []leaver{{memberID: resp.(*kmsg.JoinGroupResponse).MemberID}})
	if existed, ok := co.forget("g"); !existed || !ok {
		t.Fatalf("emptied group: existed %v, ok %v", existed, ok)
	}
	if _, known := co.describe("g"); known {
		t.Fatal("forgotten group still described")
	}
}

// staticJoin is joinRequest for a static member (KIP-345), at version v.
func staticJoin(group, memberID, instance string, v int16) *kmsg.JoinGroupRequest {
	req := joinRequest(group, memberID)
	req.Version, req.InstanceID = v, kmsg.StringPtr(instance)
	req.Protocols[0].Metadata = []byte(instance)
	return req
}

func joined(t *testing.T, r reply) *kmsg.JoinGroupResponse {
	t.Helper()
	resp, err := r()
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.JoinGroupResponse)
}

func synced(t *testing.T, co *coordinator, group, id string, instance *string, gen int32, assign map[string]string) *kmsg.SyncGroupResponse {
	t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version, req.Group, req.MemberID, req.Generation, req.InstanceID = 5, group, id, gen, instance
	for mid, a := range assign {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = mid, []byte(a)
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	resp, err := co.syncGroup(req)()
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.SyncGroupResponse)
}

// A static member restarted with the same group.instance.id replaces its
// previous incarnation at once: no MEMBER_ID_REQUIRED, no rebalance, the
// same assignment; the old incarnation is fenced; it can leave by its
// instance id alone.
func TestStaticMemberRestartsWithoutRebalance(t *testing.T) {
	co := newCoordinator()
	ra, rb := co.join(staticJoin("g", "", "a", 5), "c", "h"), co.join(staticJoin("g", "", "b", 5), "c", "h")
	a, b := joined(t, ra), joined(t, rb)
	if a.ErrorCode != 0 || b.ErrorCode != 0 || a.Generation != 1 || b.Generation != 1 {
		t.Fatalf("first joins: a %d gen %d, b %d gen %d", a.ErrorCode, a.Generation, b.ErrorCode, b.Generation)
	}
	leader, follower := a, b
	if b.LeaderID == b.MemberID {
		leader, follower = b, a
	}
	ia, ib := kmsg.StringPtr("a"), kmsg.StringPtr("b")
	instanceOf := map[string]*string{a.MemberID: ia, b.MemberID: ib}
	synced(t, co, "g", leader.MemberID, instanceOf[leader.MemberID], 1, map[string]string{a.MemberID: "pa", b.MemberID: "pb"})
	synced(t, co, "g", follower.MemberID, instanceOf[follower.MemberID], 1, nil)

	// The follower restarts: it joins with its instance id and no member id.
	fi := instanceOf[follower.MemberID]
	again := joined(t, co.join(staticJoin("g", "", *fi, 5), "c", "h"))
	if again.ErrorCode != 0 || again.Generation != 1 || again.MemberID == follower.MemberID {
		t.Fatalf("restarted static member: code %d, generation %d, id %q (old %q)", again.ErrorCode, again.Generation, again.MemberID, follower.MemberID)
	}
	if got := synced(t, co, "g", again.MemberID, fi, 1, nil); got.ErrorCode != 0 || string(got.MemberAssignment) != "p"+*fi {
		t.Fatalf("restarted member's sync: code %d, assignment %q", got.ErrorCode, got.MemberAssignment)
	}
	if code := co.heartbeat("g", leader.MemberID, instanceOf[leader.MemberID], 1); code != 0 {
		t.Fatalf("the other member's heartbeat after the restart: %d, want 0 (no rebalance)", code)
	}
	if code := co.heartbeat("g", follower.MemberID, fi, 1); code != kerr.FencedInstanceID.Code {
		t.Fatalf("the old incarnation's heartbeat: %d, want FENCED_INSTANCE_ID", code)
	}
	// The old incarnation's LeaveGroup is refused and rebalances nobody.
	if codes := co.leave("g", []leaver{{memberID: follower.MemberID, instanceID: fi}}); codes[0] != kerr.FencedInstanceID.Code {
		t.Fatalf("the old incarnation's leave: %d, want FENCED_INSTANCE_ID", codes[0])
	}
	if code := co.heartbeat("g", leader.MemberID, instanceOf[leader.MemberID], 1); code != 0 {
		t.Fatalf("after a refused leave: %d, want 0 (no rebalance)", code)
	}

	// The leader restarts too, at v9: it is told to skip the assignment.
	li := instanceOf[leader.MemberID]
	lead := joined(t, co.join(staticJoin("g", "", *li, 9), "c", "h"))
	if lead.ErrorCode != 0 || lead.Generation != 1 || lead.LeaderID != lead.MemberID || !lead.SkipAssignment || len(lead.Members) != 2 {
		t.Fatalf("restarted static leader: %+v", lead)
	}

	// Leaving by instance id alone removes the member; the rest rebalance.
	if codes := co.leave("g", []leaver{{instanceID: fi}}); codes[0] != 0 {
		t.Fatalf("leave by instance id: %d", codes[0])
	}
	if code := co.heartbeat("g", lead.MemberID, li, 1); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("after a member left: %d, want REBALANCE_IN_PROGRESS", code)
	}
}

// A member parked in JoinGroup is not expired by its session timeout: the
// join phase is bounded by the rebalance timeout. Before, a member joining
// while another took its time to rejoin got UNKNOWN_MEMBER_ID once its own
// session timeout passed.
func TestJoinPhaseIsBoundedByTheRebalanceTimeoutNotTheSession(t *testing.T) {
	co := newCoordinator()
	stop := make(chan struct{})
	defer close(stop)
	go co.run(stop)
	join := func(id string) *kmsg.JoinGroupRequest {
		req := joinRequest("g", id)
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 1_000, 5_000
		return req
	}
	first := joined(t, co.join(join(""), "c", "h")) // MEMBER_ID_REQUIRED
	a := joined(t, co.join(join(first.MemberID), "c", "h"))
	synced(t, co, "g", a.MemberID, nil, a.Generation, map[string]string{a.MemberID: "x"})

	second := joined(t, co.join(join(""), "c", "h"))
	parked := co.join(join(second.MemberID), "c", "h") // waits: a must rejoin
	// a keeps its session alive but takes 2 s, twice b's session timeout,
	// to rejoin.
	for range 10 {
		time.Sleep(200 * time.Millisecond)
		co.heartbeat("g", a.MemberID, nil, a.Generation)
	}
	aAgain := co.join(join(a.MemberID), "c", "h")
	b := joined(t, parked)
	if b.ErrorCode != 0 || b.Generation != a.Generation+1 {
		t.Fatalf("the parked member: code %d generation %d, want 0 and %d", b.ErrorCode, b.Generation, a.Generation+1)
	}
	if r := joined(t, aAgain); r.ErrorCode != 0 || r.Generation != b.Generation {
		t.Fatalf("the rejoining member: code %d generation %d", r.ErrorCode, r.Generation)
	}
	// b's session starts over when its join is answered: parked 2 s,
	// twice its session timeout, it is not expired by the reaper before
	// its SyncGroup arrives (it was, which failed a transactional
	// pipeline's rejoin after a failover with UNKNOWN_MEMBER_ID).
	time.Sleep(500 * time.Millisecond) // two rounds of the reaper
	synced(t, co, "g", a.MemberID, nil, b.Generation, map[string]string{a.MemberID: "x", b.MemberID: "y"})
	if r := synced(t, co, "g", b.MemberID, nil, b.Generation, nil); r.ErrorCode != 0 || string(r.MemberAssignment) != "y" {
		t.Fatalf("the member parked in the join phase, syncing: code %d assignment %q", r.ErrorCode, r.MemberAssignment)
	}
}

// A leader that never sends its assignment does not hold the group in
// CompletingRebalance for ever: after the rebalance timeout it rebalances.
func TestStalledSyncPhaseRebalances(t *testing.T) {
	co := newCoordinator()
	req := func(id string) *kmsg.JoinGroupRequest {
		r := joinRequest("g", id)
		r.RebalanceTimeoutMillis = 300
		return r
	}
	first := joined(t, co.join(req(""), "c", "h"))
	a := joined(t, co.join(req(first.MemberID), "c", "h"))
	if a.ErrorCode != 0 || a.LeaderID != a.MemberID {
		t.Fatalf("join: %+v", a)
	}
	waitUntil := time.Now().Add(5 * time.Second)
	for co.heartbeat("g", a.MemberID, nil, a.Generation) != kerr.RebalanceInProgress.Code {
		if time.Now().After(waitUntil) {
			t.Fatal("the group stays in CompletingRebalance with no assignment")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
