// Package clock gives a node of a cluster the time the leader stamps on
// raft entries: the lower median of the voters' wall clocks, as this node
// estimates them, so one voter whose clock runs minutes ahead or behind
// does not move the replicated clock when it leads. The state machine's
// clock never moves backwards, so a single stamp minutes ahead would make
// every lease, timer, key lifetime and dedup window of the cluster end
// early for good; with a majority of voters' clocks right, the median is
// right.
//
// Peers' clocks are estimated the way NTP does it, from one question and
// its answer: the peer read its clock about halfway through the round
// trip. An estimate moves on with this node's monotonic clock, which a
// step of the wall clock does not touch, and is used for MaxAge.
package clock

import (
	"slices"
	"sync"
	"time"
)

// MaxAge is how long an answer from a peer is used; the node asks each
// peer about every second, so a peer that stops answering falls out of
// the median within this.
const MaxAge = 10 * time.Second

// Cluster estimates the voters' time. The zero value is not usable; call
// New.
type Cluster struct {
	wall func() time.Time // this node's wall clock

	mu    sync.Mutex
	peers map[string]sample
}

// sample is what one answer from a peer said: its clock read peerWall at
// this node's local instant at (a reading with a monotonic part).
type sample struct {
	peerWall time.Time
	at       time.Time
}

// New returns a Cluster over this node's wall clock (time.Now when nil).
func New(wall func() time.Time) *Cluster {
	if wall == nil {
		wall = time.Now
	}
	return &Cluster{wall: wall, peers: map[string]sample{}}
}

// Wall is this node's own wall clock, as peers are told it.
func (c *Cluster) Wall() time.Time { return c.wall() }

// Observe records an answer from peer: its clock read peerWall while a
// question this node sent at sent (time.Now, with its monotonic reading)
// was answered at received.
func (c *Cluster) Observe(peer string, sent, received, peerWall time.Time) {
	if received.Before(sent) {
		return
	}
	at := sent.Add(received.Sub(sent) / 2)
	c.mu.Lock()
	c.peers[peer] = sample{peerWall: peerWall, at: at}
	c.mu.Unlock()
}

// Forget drops peer's estimate (the peer left the voters).
func (c *Cluster) Forget(peer string) {
	c.mu.Lock()
	delete(c.peers, peer)
	c.mu.Unlock()
}

// Now is the lower median of this node's wall clock and the fresh
// estimates of its peers' clocks: with an even count the earlier of the
// middle two, since a clock read late makes things end late, never early.
func (c *Cluster) Now() time.Time {
	_, median, _ := c.estimate()
	return median
}

// Offset is how far this node's wall clock is from Now (positive: ahead),
// and how many peers' estimates Now used.
func (c *Cluster) Offset() (offset time.Duration, peers int) {
	own, median, peers := c.estimate()
	return own.Sub(median), peers
}

// estimate reads this node's wall clock once and returns it, the lower
// median Now answers, and how many fresh peer estimates went into it.
func (c *Cluster) estimate() (own, median time.Time, peers int) {
	now := time.Now()       // the monotonic reading estimates move on by
	own = c.wall().Round(0) // compared by wall reading, like the estimates
	c.mu.Lock()
	clocks := make([]time.Time, 0, len(c.peers)+1)
	clocks = append(clocks, own)
	for _, s := range c.peers {
		if age := now.Sub(s.at); age <= MaxAge {
			clocks = append(clocks, s.peerWall.Add(age))
		}
	}
	c.mu.Unlock()
	slices.SortFunc(clocks, func(a, b time.Time) int { return a.Compare(b) })
	return own, clocks[(len(clocks)-1)/2], len(clocks) - 1
}
