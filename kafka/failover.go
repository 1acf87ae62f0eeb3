package kafka

import (
	"cmp"
	"time"
)

// The failover grace. Group membership lives in the leader's memory, so a
// new leader knows no members: they come back one by one, each when its
// next heartbeat (or the retry after the old leader stopped answering)
// reaches the new leader and is told UNKNOWN_MEMBER_ID. A member that has
// not come back yet still consumes the partitions the old leader gave it,
// so handing them to the first member that rejoins lets two consume them
// at once.
//
// A new leader therefore holds back the groups re-formed on it for a
// grace after it took the lead: long enough that every live member has
// heartbeated since, learned of the change and dropped its partitions
// (kgo, like the Java client, abandons its assignment on UNKNOWN_MEMBER_ID
// before it joins again, so a rejoining member owns nothing). A KIP-848
// group formed in the grace assigns no partition until the grace ends (its
// members are told to heartbeat again when it does); a classic group
// formed in it delays its first generation until then, as Kafka's
// group.initial.rebalance.delay.ms delays a new group's. Groups without
// committed offsets are not held: no member consumed for them before (or
// none committed, and a new owner starts over from the reset offset
// anyway), which spares a new cluster the wait.

// clientRetryMargin covers how long a member may take, after its heartbeat
// fell due, to reach the new leader: the election and the clients' retry
// backoff. kgo retries a failed KIP-848 heartbeat on the same coordinator
// with a doubling backoff (250 ms up to 5 s): with a 1 s election it
// reaches the new leader about 8 s after the old one died, one retry more
// (a slower election) 13 s. The Java client and librdkafka back off up to
// 1 s.
const clientRetryMargin = 15 * time.Second

// minHeldHeartbeat bounds how soon a held member is told to come back.
const minHeldHeartbeat = 100 * time.Millisecond

// failoverGrace is how long after taking the lead groups re-formed here
// are held: FailoverGrace when set, else the heartbeat interval plus
// clientRetryMargin, at most the session timeout (a member silent for
// longer counts as gone, as it would on the old leader, and as Kafka's new
// coordinator expires members that do not come back within their session).
// A classic group's members bring their own session timeout, which caps
// its hold the same way (see holdFor).
func (cfg ConsumerGroupConfig) failoverGrace() time.Duration {
	if cfg.FailoverGrace > 0 {
		return cfg.FailoverGrace
	}
	return min(cfg.HeartbeatInterval+clientRetryMargin, cfg.SessionTimeout)
}

// lead records that this node leads in term. A new term starts the
// failover grace; groups left from an earlier term (this node lost the
// lead and took it back before noticing) are forgotten first, since their
// members may have moved to another leader in between.
func (co *coordinator) lead(term uint64) {
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.term == term {
		return
	}
	if co.term != 0 {
		co.forgetAll()
	}
	co.term, co.ledAt = term, co.now()
	co.graceUntil = co.ledAt.Add(co.consumerCfg.failoverGrace())
}

// holdFor is when the failover grace ends for a group formed now, or zero
// when it would not be held: the grace is over, or the group has no
// committed offsets. session, when not zero, is the joining classic
// member's session timeout: the old leader's members, likely configured
// alike, count as gone once silent that long since this node took the
// lead, so the hold ends then if sooner (a transaction of the member
// that straddled the failover is not held past its timeout by a grace the
// member's own settings did not ask for). It is called without co.mu
// (committed offsets are read from the store).
func (co *coordinator) holdFor(group string, session time.Duration) time.Time {
	co.mu.Lock()
	until, now := co.graceUntil, co.now()
	if byMember := co.ledAt.Add(session); session > 0 && byMember.Before(until) {
		until = byMember
	}
	formed := co.consumers[group] != nil || (co.groups[group] != nil && len(co.groups[group].members) > 0)
	co.mu.Unlock()
	if formed || !now.Before(until) {
		return time.Time{}
	}
	if co.hasOffsets != nil && !co.hasOffsets(group) {
		return time.Time{}
	}
	return until
}

// endHold ends a KIP-848 group's hold once the grace is over; it reports
// whether it did (the target assignment must then be computed).
func (g *cgroup) endHold(now time.Time) bool {
	if g.holdUntil.IsZero() || now.Before(g.holdUntil) {
		return false
	}
	g.holdUntil = time.Time{}
	return true
}

// heartbeatInterval is what a member of g is told: the configured
// interval, or while g is held, sooner: when the hold ends.
func (co *coordinator) heartbeatInterval(g *cgroup, now time.Time) time.Duration {
	interval := cmp.Or(g.heartbeatInterval, co.consumerCfg.HeartbeatInterval)
	if !g.holdUntil.IsZero() {
		left := g.holdUntil.Sub(now).Round(time.Millisecond) + time.Millisecond
		interval = min(interval, max(left, minHeldHeartbeat))
	}
	return interval
}
