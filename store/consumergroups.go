package store

import (
	"encoding/binary"
	"errors"
	"slices"

	"github.com/dgraph-io/badger/v4"
)

// Generations. A seek, a group's first pop from new and a group delete
// each move every position of a group at once. Writing one cursor per
// partition would make the work of one raft entry grow with the queue, so
// each writes one record stamped with a generation instead: a fresh number
// from the state machine's id counter, so a later stamp is always larger.
// Every cursor and subscription carries the generation it was written
// with; one stamped at or below a later reset or delete is superseded.
// Readers treat it as absent, and the reset says where the group stands.

// NoPosition is the offset of a cursor that records "no position here":
// a Kafka offset delete in a queue whose positions a reset would otherwise
// give.
const NoPosition = -1

// ConsumerGroupView is what a group's positions in one queue are read through: its
// subscription and the generation at or below which its records are
// superseded.
type ConsumerGroupView struct {
	Group      string
	QueueID    uint64
	Sub        Subscription
	Subscribed bool
	cutoff     uint64
}

// superseded reports whether a record stamped gen no longer counts.
func (v ConsumerGroupView) superseded(gen uint64) bool { return v.cutoff > 0 && gen <= v.cutoff }

// groupDeletedGen is the generation at or below which a deleted group's
// records are gone (0: the group was not deleted, or its clean-up ended).
func (t *Tx) groupDeletedGen(group string) (uint64, error) {
	b, err := t.get(groupKey(group))
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	g, err := decodeJSONRecord[groupRecord](b)
	return g.DeletedGen, err
}

// ConsumerGroupView reads a group's subscription to a queue with the cut-offs that
// apply to its cursors there.
func (t *Tx) ConsumerGroupView(group string, queueID uint64) (ConsumerGroupView, error) {
	v := ConsumerGroupView{Group: group, QueueID: queueID}
	deleted, err := t.groupDeletedGen(group)
	if err != nil {
		return v, err
	}
	v.cutoff = deleted
	b, err := t.get(subscriptionKey(group, queueID))
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return v, err
	default:
		sub, err := decodeJSONRecord[Subscription](b)
		if err != nil {
			return v, err
		}
		if !v.superseded(sub.Gen) {
			v.Sub, v.Subscribed = sub, true
			if sub.Reset != nil {
				v.cutoff = max(v.cutoff, sub.Reset.Gen)
			}
		}
	}
	return v, nil
}

// Position returns the group's cursor in a partition as it stands. A
// cursor superseded by a reset or a delete counts as absent; without a
// current cursor, a reset of the queue decides the offset (found is then
// true). found is false when the group has no position there.
func (t *Tx) Position(v ConsumerGroupView, part Partition) (c Cursor, found bool, err error) {
	b, err := t.get(cursorKey(v.Group, v.QueueID, part.Name))
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return c, false, err
	default:
		if c, err = decodeCursor(b); err != nil {
			return Cursor{}, false, err
		}
		found = true
	}
	if found && c.Offset == NoPosition && !v.superseded(c.Gen) {
		return Cursor{QueueID: v.QueueID, Partition: part.Name}, false, nil
	}
	var superseded []string
	if found && v.superseded(c.Gen) {
		for _, l := range c.Leases {
			if IndexedLease(l.ID) {
				superseded = append(superseded, l.ID)
			}
		}
		c, found = Cursor{}, false
	}
	if !found && v.Subscribed && v.Sub.Reset != nil {
		if c.Offset, err = t.resetPosition(*v.Sub.Reset, part); err != nil {
			return Cursor{}, false, err
		}
		found, c.resolved = true, true
	}
	c.QueueID, c.Partition, c.superseded = v.QueueID, part.Name, superseded
	return c, found, nil
}

// Resolved reports whether the position was worked out from a reset rather
// than read from a cursor of its own; storing it saves working it out again.
func (c Cursor) Resolved() bool { return c.resolved }

// PutCursor stores a group's cursor stamped with generation gen (the state
// machine's current id counter). A cursor that replaces a superseded one
// also drops that one's leases from the index.
func (t *Tx) PutCursor(group string, c Cursor, gen uint64) error {
	for _, id := range c.superseded {
		if err := t.del(leaseKey(id)); err != nil {
			return err
		}
	}
	c.Gen = gen
	return t.set(cursorKey(group, c.QueueID, c.Partition), encodeCursor(c))
}

// DeleteCursor forgets a group's cursor in a partition.
func (t *Tx) DeleteCursor(group string, queueID uint64, partition string) error {
	return t.del(cursorKey(group, queueID, partition))
}

// PutSubscription stores a group's subscription to a queue stamped with
// generation gen.
func (t *Tx) PutSubscription(group string, queueID uint64, s Subscription, gen uint64) error {
	s.Gen = gen
	return t.set(subscriptionKey(group, queueID), encodeJSONRecord(s))
}

// LeaseCursor finds the current cursor that holds (or held) a lease, or
// ErrNotFound.
func (t *Tx) LeaseCursor(id string) (group string, c Cursor, err error) {
	k, err := t.get(leaseKey(id))
	if err != nil {
		return "", Cursor{}, err
	}
	group, qid, part, err := parseCursorKey(k)
	if err != nil {
		return "", Cursor{}, err
	}
	v, err := t.ConsumerGroupView(group, qid)
	if err != nil {
		return "", Cursor{}, err
	}
	b, err := t.get(k)
	if err != nil {
		return "", Cursor{}, err
	}
	if c, err = decodeCursor(b); err != nil {
		return "", Cursor{}, err
	}
	if v.superseded(c.Gen) {
		return "", Cursor{}, ErrNotFound
	}
	c.QueueID, c.Partition = qid, part
	return group, c, nil
}

// DeleteGroup forgets a group at once and leaves its records to clean-up
// entries: a group record supersedes every cursor and subscription stamped
// at or below gen, and a tombstone (sequence gen) lists the group for
// clean-up. existed reports whether the group had any current position.
// The name can be used again at once: new records carry later stamps.
func (t *Tx) DeleteGroup(group string, gen uint64) (existed bool, err error) {
	v := ConsumerGroupView{Group: group}
	if v.cutoff, err = t.groupDeletedGen(group); err != nil {
		return false, err
	}
	for _, prefix := range [][]byte{cursorPrefix(group), subscriptionPrefix(group)} {
		err := t.scan(prefix, nil, func(k, b []byte) (bool, error) {
			g, err := recordGen(k[0], b)
			existed = existed || !v.superseded(g)
			return !existed, err
		})
		if err != nil || existed {
			break
		}
	}
	if err != nil || !existed {
		return existed, err
	}
	if err := t.set(groupKey(group), encodeJSONRecord(groupRecord{DeletedGen: gen})); err != nil {
		return true, err
	}
	return true, t.putTombstone(Tombstone{Seq: gen, Kind: TombstoneGroup, Group: group, Gen: gen})
}

// recordGen is the generation stamp of a cursor or subscription value.
func recordGen(family byte, b []byte) (uint64, error) {
	if family == familyCursor {
		c, err := decodeCursor(b)
		return c.Gen, err
	}
	s, err := decodeJSONRecord[Subscription](b)
	return s.Gen, err
}

// GroupPositions lists a group's current positions in every queue it has
// one in, by queue id and partition name. In a queue the group reset, every
// partition has a position.
func (t *Tx) GroupPositions(group string) ([]Cursor, error) {
	var qids []uint64
	for _, prefix := range [][]byte{cursorPrefix(group), subscriptionPrefix(group)} {
		err := t.scan(prefix, nil, func(k, _ []byte) (bool, error) {
			if len(k) < len(prefix)+8 {
				return false, errBadKey
			}
			qid := binary.BigEndian.Uint64(k[len(prefix):])
			if len(qids) == 0 || qids[len(qids)-1] != qid {
				qids = append(qids, qid)
			}
			return true, nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(qids)
	qids = slices.Compact(qids)
	var out []Cursor
	for _, qid := range qids {
		v, err := t.ConsumerGroupView(group, qid)
		if err != nil {
			return nil, err
		}
		if v.Subscribed && v.Sub.Reset != nil {
			parts, err := t.Partitions(qid)
			if err != nil {
				return nil, err
			}
			for _, p := range parts {
				c, found, err := t.Position(v, p)
				if err != nil {
					return nil, err
				}
				if found {
					out = append(out, c)
				}
			}
			continue
		}
		prefix := binary.BigEndian.AppendUint64(cursorPrefix(group), qid)
		err = t.scan(prefix, nil, func(k, b []byte) (bool, error) {
			c, err := decodeCursor(b)
			if err != nil {
				return false, err
			}
			if !v.superseded(c.Gen) && c.Offset != NoPosition {
				c.QueueID, c.Partition = qid, string(k[len(prefix):])
				out = append(out, c)
			}
			return true, nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CursorGroups lists, in order, every group with a current cursor or
// subscription.
func (t *Tx) CursorGroups() ([]string, error) {
	var out []string
	for _, family := range []byte{familyCursor, familySubscr} {
		var last string
		var cutoff uint64
		have, listed := false, false // last was seen; it is listed
		err := t.scan([]byte{family}, nil, func(k, b []byte) (bool, error) {
			_, g, err := groupPrefix(k)
			if err != nil {
				return false, err
			}
			if !have || g != last {
				if cutoff, err = t.groupDeletedGen(g); err != nil {
					return false, err
				}
				last, have, listed = g, true, false
			}
			if listed {
				return true, nil
			}
			gen, err := recordGen(family, b)
			if err != nil {
				return false, err
			}
			if cutoff == 0 || gen > cutoff {
				out, listed = append(out, g), true
			}
			return true, nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// resetPosition is where a reset puts a group in a partition: what it
// would have been at the moment of the reset, worked out from the append
// sequence of the entries (see Entry.AppendSeq).
func (t *Tx) resetPosition(r Reset, part Partition) (int64, error) {
	end, err := t.firstAppendedAfter(part, r.Gen)
	if err != nil {
		return 0, err
	}
	switch r.Mode {
	case ResetToOffset:
		return min(max(r.Offset, int64(part.StartOffset)), end), nil
	case ResetToTime:
		e, found, err := t.FirstEntryAtOrAfter(part, r.AtMs)
		if err != nil || !found || e.AppendSeq > r.Gen {
			return end, err
		}
		return max(int64(e.Offset), int64(part.StartOffset)), nil
	default: // ResetToEnd
		return end, nil
	}
}

// firstAppendedAfter finds, by binary search (append sequences never
// decrease along a partition), the first offset appended after generation
// gen, or the partition's next offset when none was.
func (t *Tx) firstAppendedAfter(part Partition, gen uint64) (int64, error) {
	lo, hi := part.StartOffset, part.NextOffset
	if hi == lo {
		return int64(hi), nil
	}
	// Most partitions got nothing since: one read of the last entry.
	if last, found, err := t.entryAt(part.ID, hi-1, false); err != nil || (found && last.AppendSeq <= gen) {
		return int64(hi), err
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		e, found, err := t.entryAt(part.ID, mid, false)
		if err != nil {
			return 0, err
		}
		if !found {
			// mid is in a gap (compaction removed what it held): the next
			// entry tells which side the answer is on. A position in the
			// gap reads from that next entry anyway.
			if e, found, err = t.entryAtOrAfter(part.ID, mid, false); err != nil {
				return 0, err
			}
		}
		switch {
		case !found: // nothing at or after mid
			hi = mid
		case e.AppendSeq > gen:
			hi = max(min(mid, e.Offset), lo) // the entry holding mid may start before lo
		default:
			lo = e.Offset + uint64(e.Count)
		}
	}
	return int64(lo), nil
}

// ConsumerGroups lists, in order, the groups with a cursor or a
// subscription when there are at most limit of them; when there are more,
// it returns none and complete is false. It visits one key per group and
// family, not every cursor (a deleted group still being cleaned up is
// listed).
func (t *Tx) ConsumerGroups(limit int) (groups []string, complete bool, err error) {
	seen := map[string]bool{}
	for _, family := range []byte{familyCursor, familySubscr} {
		it := t.txn.NewIterator(badger.IteratorOptions{Prefix: []byte{family}})
		for it.Seek([]byte{family}); it.Valid(); {
			prefix, g, err := groupPrefix(it.Item().Key())
			if err != nil {
				it.Close()
				return nil, false, err
			}
			if !seen[g] {
				if len(seen) == limit {
					it.Close()
					return nil, false, nil
				}
				seen[g] = true
			}
			next := prefixEnd(prefix)
			if next == nil {
				break
			}
			it.Seek(next)
		}
		it.Close()
	}
	for g := range seen {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	return groups, true, nil
}

// prefixEnd returns the smallest key after every key that starts with p.
func prefixEnd(p []byte) []byte {
	end := slices.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: nothing sorts after it in the family
}
