// Package dedup holds waggle's pure dedup decisions: whether a pushed
// transactionId repeats one stored earlier, inside the queue's window or
// inside the same request. It does no I/O and reads no clock; the state
// machine passes in the leader-stamped time of the entry it applies.
package dedup

// MaxIDBytes is the longest transactionId accepted.
const MaxIDBytes = 65535

// Entry is what the state machine remembers of a stored id.
type Entry struct {
	Offset     uint64
	MessageID  [16]byte
	StoredAtMs int64
	// ExpiresAtMs is StoredAtMs plus the window in force when the id was
	// stored; the record is forgotten then even if the window has grown.
	ExpiresAtMs int64
}

// Live reports whether an id stored at storedAtMs still suppresses repeats
// at nowMs under a window of windowMs. A window of zero or less turns
// the check off.
func Live(storedAtMs, windowMs, nowMs int64) bool {
	return windowMs > 0 && nowMs-storedAtMs < windowMs
}

// IsDuplicate decides a push of an id that was stored before as prev
// (found reports whether a record exists at all) when the queue's window is
// now windowMs. An id is remembered for the window in force when it was
// stored; a window shrunk (or turned off) since then takes effect at once.
func IsDuplicate(prev Entry, found bool, windowMs, nowMs int64) bool {
	return found && nowMs < prev.ExpiresAtMs && Live(prev.StoredAtMs, windowMs, nowMs)
}

type scopedID struct {
	partition uint64
	id        string
}

// Request tracks the ids stored by one request (or one transaction), so an
// id repeated for the same partition is stored once whatever the window.
// The zero value is ready to use.
type Request struct {
	seen map[scopedID]Entry
}

// Seen returns the entry stored earlier in this request for the id.
func (r *Request) Seen(partition uint64, id string) (Entry, bool) {
	e, ok := r.seen[scopedID{partition, id}]
	return e, ok
}

// Remember records that the request stored the id as e.
func (r *Request) Remember(partition uint64, id string, e Entry) {
	if r.seen == nil {
		r.seen = make(map[scopedID]Entry)
	}
	r.seen[scopedID{partition, id}] = e
}
