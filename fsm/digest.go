package fsm

import (
	"slices"
	"sync"
)

// DigestEvery is how far apart in the raft log the state digests a node
// keeps lie: replicas compare them at the same indexes (see StateDigest).
const DigestEvery = 256

// DigestLogEvery is how far apart the digests the Digested hook is told
// of lie: a node's log then lets replicas be compared after the fact.
const DigestLogEvery = 64 * DigestEvery

// digestsKept is how many of those a node keeps, newest first: the last
// 8,192 entries.
const digestsKept = 32

// DigestPoint is the state digest after the entry at Index was applied.
type DigestPoint struct {
	Index, Digest uint64
}

// StateDigest is what a node tells about its state digest (see
// store.Meta.Digest): two replicas with the same Since that disagree at
// one index hold different states, a bug the next entries never undo.
type StateDigest struct {
	// Since is the index after which the digest counts writes: 0, or
	// where a store from before digests first applied an entry.
	Since uint64
	// Applied is the digest as of the applied index.
	Applied DigestPoint
	// Recent are the digests at the last indexes that are multiples of
	// DigestEvery, oldest first.
	Recent []DigestPoint
}

// digests keeps the state digests a node reports; apart from the FSM's
// lock, so health checks never wait for a batch.
type digests struct {
	mu     sync.Mutex
	since  uint64
	last   DigestPoint
	recent []DigestPoint
}

// set publishes the applied state's digest and the points passed on the
// way (indexes that are multiples of DigestEvery).
func (d *digests) set(since uint64, last DigestPoint, passed []DigestPoint) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if since != d.since {
		d.recent = d.recent[:0] // another chain: a store from before digests
	}
	d.since, d.last = since, last
	d.recent = append(d.recent, passed...)
	if n := len(d.recent) - digestsKept; n > 0 {
		d.recent = slices.Delete(d.recent, 0, n)
	}
}

// forget drops the recent points, when the state is replaced whole.
func (d *digests) forget() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.recent = d.recent[:0]
}

// StateDigest reports the node's state digest as of its applied index.
func (f *FSM) StateDigest() StateDigest {
	d := &f.digests
	d.mu.Lock()
	defer d.mu.Unlock()
	return StateDigest{Since: d.since, Applied: d.last, Recent: slices.Clone(d.recent)}
}
