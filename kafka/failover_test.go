package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// newLeaderCoordinator is a test coordinator that just took the lead in
// term 2, with a 1 s heartbeat interval and a 4 s grace.
func newLeaderCoordinator() (*coordinator, *fakeClock) {
	co, clk := newTestCoordinator()
	co.consumerCfg = ConsumerGroupConfig{SessionTimeout: 45 * time.Second, HeartbeatInterval: time.Second, FailoverGrace: 4 * time.Second}
	co.lead(2)
	return co, clk
}

func TestFailoverGraceDefault(t *testing.T) {
	for _, c := range []struct {
		cfg  ConsumerGroupConfig
		want time.Duration
	}{
		{DefaultConsumerGroupConfig(), 20 * time.Second},
		{ConsumerGroupConfig{SessionTimeout: 20 * time.Second, HeartbeatInterval: 250 * time.Millisecond}, 15250 * time.Millisecond},
		{ConsumerGroupConfig{SessionTimeout: 3 * time.Second, HeartbeatInterval: time.Second}, 3 * time.Second}, // at most the session
		{ConsumerGroupConfig{SessionTimeout: 3 * time.Second, HeartbeatInterval: time.Second, FailoverGrace: 20 * time.Second}, 20 * time.Second},
	} {
		if got := c.cfg.failoverGrace(); got != c.want {
			t.Errorf("%+v: grace %v, want %v", c.cfg, got, c.want)
		}
	}
}

// A KIP-848 group re-formed within the grace after a leader change assigns
// nothing: its members join, are told to come back when the grace ends,
// and only then get partitions, split as usual.
func TestConsumerGroupReformedInGraceAssignsNothingUntilItEnds(t *testing.T) {
	co, clk := newLeaderCoordinator()
	clk.add(500 * time.Millisecond)
	a, b := newClient(t, co, "g", "a", "a"), newClient(t, co, "g", "b", "a")
	resp := a.beat()
	if len(a.owned) != 0 || resp.Assignment == nil {
		t.Fatalf("a joined in the grace owning %v (assignment %v), want an empty assignment", a.owned, resp.Assignment)
	}
	// Told to come back when the grace ends (3.5 s left), not later.
	if got := resp.HeartbeatIntervalMillis; got != 1000 {
		t.Fatalf("heartbeat interval %d ms, want the configured 1000 (sooner than the grace's end)", got)
	}
	if v, _ := co.describeConsumer("g"); v.state != cstateAssigning {
		t.Fatalf("held group described as %s, want %s", v.state, cstateAssigning)
	}
	clk.add(2 * time.Second) // 1.5 s left
	b.beat()
	a.beat()
	if len(a.owned)+len(b.owned) != 0 {
		t.Fatalf("in the grace a owns %v, b %v", a.owned, b.owned)
	}
	clk.add(time.Second) // 0.5 s left
	resp = a.beat()
	if got := resp.HeartbeatIntervalMillis; got < 500 || got > 502 {
		t.Fatalf("heartbeat interval %d ms with 500 ms of grace left, want about 500", got)
	}
	if len(a.owned) != 0 {
		t.Fatalf("a owns %v before the grace ended", a.owned)
	}
	clk.add(time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond)
	a.beat()
	b.beat()
	if len(a.owned) != 3 || len(b.owned) != 3 {
		t.Fatalf("after the grace: a owns %d, b %d, want 3 each", len(a.owned), len(b.owned))
	}
	requireDisjoint(t, a, b)
	resp = a.beat()
	if got := resp.HeartbeatIntervalMillis; got != 1000 {
		t.Fatalf("after the grace: heartbeat interval %d ms, want 1000", got)
	}
	if v, _ := co.describeConsumer("g"); v.state != cstateStable {
		t.Fatalf("after the grace the group is %s", v.state)
	}
}

// The periodic expiry ends the hold too, so the target is computed (and
// described) without waiting for a heartbeat.
func TestConsumerGroupHoldEndsOnTheTimer(t *testing.T) {
	co, clk := newLeaderCoordinator()
	a := newClient(t, co, "g", "a", "a")
	a.beat()
	clk.add(4 * time.Second)
	co.mu.Lock()
	co.expireConsumers(co.now())
	co.mu.Unlock()
	v, _ := co.describeConsumer("g")
	if v.state != cstateReconciling || len(v.members) != 1 || len(v.members[0].target) != 1 || len(v.members[0].target[0].Partitions) != 6 {
		t.Fatalf("after the grace: %+v", v)
	}
	a.beat()
	if len(a.owned) != 6 {
		t.Fatalf("a owns %d after the grace, want 6", len(a.owned))
	}
}

// Only groups re-formed in the grace are held: not a group formed after
// it, not one formed in it without committed offsets, and not one formed
// on a node that has not seen a leader change (the grace starts with a
// term).
func TestConsumerGroupHeldOnlyWhenReformedInGrace(t *testing.T) {
	co, clk := newLeaderCoordinator()
	co.hasOffsets = func(group string) bool { return group != "fresh" }
	fresh := newClient(t, co, "fresh", "f", "a")
	if fresh.beat(); len(fresh.owned) != 6 {
		t.Fatalf("a group without committed offsets is held: owns %v", fresh.owned)
	}
	clk.add(4 * time.Second)
	late := newClient(t, co, "late", "l", "a")
	if late.beat(); len(late.owned) != 6 {
		t.Fatalf("a group formed after the grace is held: owns %v", late.owned)
	}
	// The same term again changes nothing; a new one starts a grace.
	co.lead(2)
	again := newClient(t, co, "again", "x", "a")
	if again.beat(); len(again.owned) != 6 {
		t.Fatalf("same term: owns %v", again.owned)
	}
	co.lead(3) // lost the lead and took it back: groups are forgotten
	if _, ok := co.describeConsumer("late"); ok {
		t.Fatal("a group of the previous term survived a new term")
	}
	held := newClient(t, co, "late", "l2", "a")
	if held.beat(); len(held.owned) != 0 {
		t.Fatalf("re-formed in the new term's grace: owns %v", held.owned)
	}
	co.reset()
	if !co.graceUntil.IsZero() || co.term != 0 {
		t.Fatalf("reset kept term %d grace %v", co.term, co.graceUntil)
	}
}

// A member that joins a held group late, once the grace ended, gets its
// share at once; a member leaving in the grace leaves nothing assigned.
func TestConsumerGroupHoldSurvivesMembershipChanges(t *testing.T) {
	co, clk := newLeaderCoordinator()
	a, b, c := newClient(t, co, "g", "a", "a"), newClient(t, co, "g", "b", "a"), newClient(t, co, "g", "c", "a")
	a.beat()
	b.beat()
	b.leave()
	a.beat()
	if len(a.owned) != 0 {
		t.Fatalf("a owns %v after b left in the grace", a.owned)
	}
	clk.add(5 * time.Second)
	c.beat() // the first heartbeat after the grace computes the assignment
	a.beat()
	c.beat()
	if len(a.owned) != 3 || len(c.owned) != 3 {
		t.Fatalf("after the grace: a %d, c %d, want 3 each", len(a.owned), len(c.owned))
	}
	requireDisjoint(t, a, c)
}

// A classic group formed in the grace waits it out before its first
// generation instead of group.initial.rebalance.delay's 300 ms; one
// formed without a grace does not. The join timer runs on real time, so
// the grace left is kept short.
func TestClassicGroupReformedInGraceWaitsItOut(t *testing.T) {
	co, clk := newLeaderCoordinator()
	clk.add(4*time.Second - 1200*time.Millisecond) // 1.2 s of grace left
	first := joined(t, co.join(joinRequest("g", ""), "c", "h"))
	start := time.Now()
	a := joined(t, co.join(joinRequest("g", first.MemberID), "c", "h"))
	waited := time.Since(start)
	if a.ErrorCode != 0 || a.Generation != 1 {
		t.Fatalf("join: %+v", a)
	}
	if waited < time.Second || waited > 3*time.Second {
		t.Fatalf("the first generation came after %v, want the 1.2 s of grace left", waited)
	}

	// Another member joining while the first waits is in the same
	// generation, answered together.
	co2, clk2 := newLeaderCoordinator()
	clk2.add(4*time.Second - 800*time.Millisecond)
	ids := []string{}
	for range 2 {
		r := joined(t, co2.join(joinRequest("g", ""), "c", "h"))
		ids = append(ids, r.MemberID)
	}
	ra := co2.join(joinRequest("g", ids[0]), "c", "h")
	time.Sleep(400 * time.Millisecond) // past the usual 300 ms delay
	rb := co2.join(joinRequest("g", ids[1]), "c", "h")
	x, y := joined(t, ra), joined(t, rb)
	if x.ErrorCode != 0 || y.ErrorCode != 0 || x.Generation != 1 || y.Generation != 1 {
		t.Fatalf("members of the held group: %+v / %+v", x, y)
	}
	if n := len(x.Members) + len(y.Members); n != 2 {
		t.Fatalf("the leader's answer lists %d members, want 2", n)
	}

	// Outside a grace the usual delay applies.
	co3 := newCoordinator()
	f3 := joined(t, co3.join(joinRequest("g", ""), "c", "h"))
	start = time.Now()
	joined(t, co3.join(joinRequest("g", f3.MemberID), "c", "h"))
	if waited := time.Since(start); waited > time.Second {
		t.Fatalf("without a grace the first generation took %v", waited)
	}
}

// A classic group's hold ends by its member's session timeout when that
// comes before the grace: members of the old leader silent that long since
// this node took the lead count as gone anyway. (A 20 s grace outlasted a
// transactional pipeline's 20 s transaction, which the leader then aborted,
// fencing the producer.)
func TestClassicGroupHoldEndsByTheMembersSession(t *testing.T) {
	co, _ := newLeaderCoordinator() // a 4 s grace
	req := func(id string) *kmsg.JoinGroupRequest {
		r := joinRequest("g", id)
		r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 1500, 60_000
		return r
	}
	first := joined(t, co.join(req(""), "c", "h"))
	start := time.Now()
	a := joined(t, co.join(req(first.MemberID), "c", "h"))
	if waited := time.Since(start); a.ErrorCode != 0 || waited < time.Second || waited > 3*time.Second {
		t.Fatalf("join answered %d after %v, want 0 after about the 1.5 s session timeout", a.ErrorCode, waited)
	}
}
