package kafka

import (
	"fmt"
	"sync"
	"testing"

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
				co.heartbeat(group, id, 0)
				co.leave(group, []string{id})
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
	co.leave("g", []string{resp.(*kmsg.JoinGroupResponse).MemberID})
	if existed, ok := co.forget("g"); !existed || !ok {
		t.Fatalf("emptied group: existed %v, ok %v", existed, ok)
	}
	if _, known := co.describe("g"); known {
		t.Fatal("forgotten group still described")
	}
}
