package store

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// Deleting something large happens in two steps, so that no single write
// transaction grows with the data. The delete itself writes a tombstone and
// makes the thing unreachable at once (a queue loses its name and id
// lookups; a group's records are superseded, see consumergroups.go). Clean-up
// entries then each remove a bounded number of keys, oldest tombstone
// first, recording in the tombstone where to resume.

// A tombstone's clean-up runs in phases, in order; the phase reached is
// stored in the tombstone as its index in the kind's list (queuePhases,
// groupPhases), so phases are only ever appended to a list.
//
// A queue's: its partitions one at a time (messages, dedup records with
// their expiry keys, then the partition's own keys), then the records keyed
// by something other than the queue: groups' cursors and subscriptions of
// it (with their leases), its dead letters, and Kafka producer state of
// partitions that no longer exist, and last its message data (segment
// records, stream head, files). A group's: its superseded cursors (with
// leases) and subscriptions, then its group record.

// Budget bounds the work of one clean-up call: keys deleted or written,
// and keys looked at.
type Budget struct {
	MaxWrites, MaxScanned int
	writes, scanned       int
	full                  bool // the next step needs more than is left
}

func (b *Budget) spent() bool {
	return b.full || b.writes >= b.MaxWrites || b.scanned >= b.MaxScanned
}

// CleanupResult says what one clean-up call did.
type CleanupResult struct {
	Deleted  int  // keys deleted
	Finished int  // tombstones completed
	More     bool // tombstones remain
}

// DeleteQueue removes a queue's name and id lookups at once, so the queue
// is gone for every reader and its name is free, and files a tombstone
// (sequence seq, a fresh id) for clean-up entries to remove the rest.
func (t *Tx) DeleteQueue(q Queue, seq uint64) error {
	if err := t.del(queueKey(q.Name)); err != nil {
		return err
	}
	if err := t.del(queueByIDKey(q.ID)); err != nil {
		return err
	}
	t.noteQueue(q.Name, nil)
	return t.putTombstone(Tombstone{Seq: seq, Kind: TombstoneQueue, QueueID: q.ID, Queue: q.Name})
}

func (t *Tx) putTombstone(ts Tombstone) error {
	return t.set(tombstoneKey(ts.Seq), encodeJSONRecord(ts))
}

// Tombstones lists up to limit pending tombstones, oldest first.
func (t *Tx) Tombstones(limit int) ([]Tombstone, error) {
	var out []Tombstone
	err := t.scan([]byte{familyTombstone}, nil, func(k, v []byte) (bool, error) {
		ts, err := decodeTombstone(k, v)
		out = append(out, ts)
		return err == nil && len(out) < limit, err
	})
	return out, err
}

func decodeTombstone(k, v []byte) (Tombstone, error) {
	if len(k) != 9 {
		return Tombstone{}, errBadKey
	}
	ts, err := decodeJSONRecord[Tombstone](v)
	ts.Seq = binary.BigEndian.Uint64(k[1:])
	return ts, err
}

// ErrPendingWrites is returned by CleanUp on a transaction that already
// holds writes.
var ErrPendingWrites = errors.New("store: cleanup needs a write transaction without pending writes")

// CleanUp works off tombstones, oldest first, within the budget. It must
// run on a write transaction with nothing written yet (the state machine
// commits before a cleanup entry): it reads through a read transaction
// over the same state, since an iterator on a write transaction sorts all
// of its pending writes each time it is made. Everything it deletes lies
// before the resume keys it records, so not seeing its own deletes changes
// nothing. Each tombstone costs a write of its own (its progress, or its
// removal) and a look.
func (t *Tx) CleanUp(b *Budget) (CleanupResult, error) {
	if t.pendingWrites > 0 || t.db == nil {
		return CleanupResult{}, ErrPendingWrites
	}
	rtxn := t.db.NewTransaction(false)
	defer rtxn.Discard()
	c := &cleaner{w: t, r: &Tx{txn: rtxn}, b: b}
	var res CleanupResult
	err := c.r.scan([]byte{familyTombstone}, nil, func(k, v []byte) (bool, error) {
		if b.spent() {
			res.More = true
			return false, nil
		}
		ts, err := decodeTombstone(k, v)
		if err != nil {
			return false, err
		}
		b.writes++
		b.scanned++
		before := b.writes
		done, err := c.step(&ts)
		res.Deleted += b.writes - before
		switch {
		case err != nil:
			return false, err
		case !done:
			res.More = true
			return false, t.putTombstone(ts)
		}
		res.Finished++
		return true, t.del(tombstoneKey(ts.Seq))
	})
	return res, err
}

// cleaner works off tombstones: it reads through r (a read transaction)
// and deletes through w.
type cleaner struct {
	w, r *Tx
	b    *Budget
}

// phase is one phase of a tombstone's clean-up: it works within the
// budget and reports whether it is done.
type phase func(c *cleaner, ts *Tombstone) (bool, error)

// step advances one tombstone through its kind's phases within the budget
// and reports whether nothing of it is left.
func (c *cleaner) step(ts *Tombstone) (bool, error) {
	var phases []phase
	switch ts.Kind {
	case TombstoneQueue:
		phases = queuePhases
	case TombstoneGroup:
		phases = groupPhases
	case TombstoneTrim:
		phases = trimPhases
	default:
		return false, errBadRecord
	}
	for !c.b.spent() {
		if ts.Phase >= len(phases) {
			return true, nil
		}
		done, err := phases[ts.Phase](c, ts)
		if err != nil || !done {
			return false, err
		}
		ts.Phase++
		ts.Next = nil
	}
	return ts.Phase >= len(phases), nil
}

// queuePhases: never reorder, only append (the index is stored).
var queuePhases = []phase{
	func(c *cleaner, ts *Tombstone) (bool, error) {
		return c.eachPartition(ts, (*cleaner).dropPartition)
	},
	func(c *cleaner, ts *Tombstone) (bool, error) {
		return c.sweep([]byte{familyCursor}, &ts.Next, func(k, v []byte) ([][]byte, error) {
			_, qid, _, err := parseCursorKey(k)
			if err != nil || qid != ts.QueueID {
				return nil, err
			}
			return cursorAndLeases(k, v)
		})
	},
	func(c *cleaner, ts *Tombstone) (bool, error) {
		return c.sweep([]byte{familySubscr}, &ts.Next, func(k, _ []byte) ([][]byte, error) {
			_, qid, err := parseSubscriptionKey(k)
			if err != nil || qid != ts.QueueID {
				return nil, err
			}
			return [][]byte{k}, nil
		})
	},
	func(c *cleaner, ts *Tombstone) (bool, error) {
		return c.sweep([]byte{familyDeadLetter}, &ts.Next, func(k, v []byte) ([][]byte, error) {
			d, err := decodeJSONRecord[DeadLetter](v)
			if err != nil || d.QueueID != ts.QueueID {
				return nil, err
			}
			return [][]byte{k}, nil
		})
	},
	// Producer state is keyed by producer first; state of a partition that
	// no longer exists is what is left of a deleted queue.
	func(c *cleaner, ts *Tombstone) (bool, error) {
		return c.sweep([]byte{familyProducer}, &ts.Next, func(k, _ []byte) ([][]byte, error) {
			if len(k) != 17 {
				return nil, errBadKey
			}
			_, err := c.w.get(partMetaKey(binary.BigEndian.Uint64(k[9:])))
			if errors.Is(err, ErrNotFound) {
				return [][]byte{k}, nil
			}
			return nil, err
		})
	},
	// The message data: the sealed segments' records, then the stream's
	// head, and its files once that commit stands (a crash before they go
	// leaves a stream no head names, which opening the store removes).
	func(c *cleaner, ts *Tombstone) (bool, error) {
		done, err := c.sweep(segmentPrefix(ts.QueueID), &ts.Next, func(k, _ []byte) ([][]byte, error) {
			return [][]byte{k}, nil
		})
		if err != nil || !done || c.b.spent() {
			return false, err
		}
		c.b.writes++
		id := ts.QueueID
		c.w.afterCommit = append(c.w.afterCommit, func() error { return c.w.segs.Remove(id) })
		return true, c.w.del(streamKey(id))
	},
	// Compaction's state and key index (compact.go).
	func(c *cleaner, ts *Tombstone) (bool, error) { return c.sweepAll(compactionSweep(ts.QueueID)[0], ts) },
	func(c *cleaner, ts *Tombstone) (bool, error) { return c.sweepAll(compactionSweep(ts.QueueID)[1], ts) },
	func(c *cleaner, ts *Tombstone) (bool, error) { return c.sweepAll(compactionSweep(ts.QueueID)[2], ts) },
}

// sweepAll deletes every key with the prefix.
func (c *cleaner) sweepAll(prefix []byte, ts *Tombstone) (bool, error) {
	return c.sweep(prefix, &ts.Next, func(k, _ []byte) ([][]byte, error) { return [][]byte{k}, nil })
}

// groupPhases: never reorder, only append (the index is stored).
var groupPhases = []phase{
	func(c *cleaner, ts *Tombstone) (bool, error) {
		return c.sweep(cursorPrefix(ts.Group), &ts.Next, func(k, v []byte) ([][]byte, error) {
			cur, err := decodeCursor(v)
			if err != nil || cur.Gen > ts.Gen {
				return nil, err
			}
			return cursorAndLeases(k, v)
		})
	},
	func(c *cleaner, ts *Tombstone) (bool, error) {
		return c.sweep(subscriptionPrefix(ts.Group), &ts.Next, func(k, v []byte) ([][]byte, error) {
			s, err := decodeJSONRecord[Subscription](v)
			if err != nil || s.Gen > ts.Gen {
				return nil, err
			}
			return [][]byte{k}, nil
		})
	},
	// A later delete of the same group has its own tombstone and keeps the
	// group record until it is done.
	func(c *cleaner, ts *Tombstone) (bool, error) {
		if deleted, err := c.w.groupDeletedGen(ts.Group); err != nil || deleted != ts.Gen {
			return err == nil, err
		}
		c.b.writes++
		return true, c.w.del(groupKey(ts.Group))
	},
}

// eachPartition runs fn on a queue's partitions one at a time, in name
// order, within the budget: ts.Partition is the one being worked on
// (ts.PartNext its name key), and fn reports when it is done with it.
func (c *cleaner) eachPartition(ts *Tombstone, fn phase) (bool, error) {
	for !c.b.spent() {
		if ts.Partition == 0 {
			prefix := partitionPrefix(ts.QueueID)
			var nameKey []byte
			err := c.r.scan(prefix, ts.PartNext, func(k, v []byte) (bool, error) {
				c.b.scanned++
				if len(v) != 8 {
					return false, errBadRecord
				}
				nameKey, ts.Partition = append([]byte(nil), k...), beUint64(v)
				return false, nil
			})
			if err != nil || nameKey == nil {
				return nameKey == nil && err == nil, err
			}
			ts.PartNext, ts.PartRange, ts.Next = nameKey, 0, nil
		}
		done, err := fn(c, ts)
		if err != nil || !done {
			return false, err
		}
		ts.PartNext = append(ts.PartNext, 0) // the next name after it
		ts.Partition, ts.Next, ts.Kept = 0, nil, false
	}
	return false, nil
}

// dropPartition removes a deleted queue's partition: the key ranges under
// its id (partitionRanges), then its own two keys. PartRange is the range
// being swept, len(ranges) once all are.
func (c *cleaner) dropPartition(ts *Tombstone) (bool, error) {
	ranges := partitionRanges(ts.Partition)
	for ; ts.PartRange < len(ranges); ts.PartRange++ {
		var group []byte // the expiry group of the record swept last
		done, err := c.sweep(ranges[ts.PartRange], &ts.Next, func(k, v []byte) ([][]byte, error) {
			if k[0] == familyMessage || k[0] == familyOpenTxn || k[0] == familyAbortedTxn {
				return [][]byte{k}, nil
			}
			e, _, g, err := decodeDedup(v)
			if err != nil {
				return nil, err
			}
			if g == nil {
				return [][]byte{k, expiryKey(e.ExpiresAtMs, k)}, nil
			}
			// A group's entry goes with its records: with each of them,
			// as the ids' order spreads them over the range, but once for
			// a run of them side by side (ids that sort together).
			gk := expiryGroupKey(e.ExpiresAtMs, beUint64(k[1:]), g.offset, g.count)
			if bytes.Equal(gk, group) {
				return [][]byte{k}, nil
			}
			group = gk
			return [][]byte{k, gk}, nil
		})
		if err != nil || !done {
			return false, err
		}
		ts.Next = nil
	}
	if c.b.MaxWrites-c.b.writes < 2 {
		c.b.full = true
		return false, nil
	}
	if err := c.w.del(ts.PartNext); err != nil {
		return false, err
	}
	if err := c.w.del(partMetaKey(ts.Partition)); err != nil {
		return false, err
	}
	c.b.writes += 2
	return true, nil
}

// partitionRanges are the key ranges under a partition's id: its messages,
// its dedup records (short and hashed ids) and its Kafka transactions.
// Never reorder, only append (the index is stored).
func partitionRanges(pid uint64) [][]byte {
	return [][]byte{messageKey(pid, 0)[:9], dedupPrefix(familyDedup, pid), dedupPrefix(familyDedupLong, pid),
		openTxnPrefix(pid), abortedTxnPrefix(pid)}
}

func dedupPrefix(family byte, partitionID uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{family}, partitionID)
}

// cursorAndLeases is a cursor's key with its indexed leases'.
func cursorAndLeases(k, v []byte) ([][]byte, error) {
	c, err := decodeCursor(v)
	if err != nil {
		return nil, err
	}
	keys := [][]byte{k}
	for _, l := range c.Leases {
		if IndexedLease(l.ID) {
			keys = append(keys, leaseKey(l.ID))
		}
	}
	return keys, nil
}

// sweep looks at the keys under prefix from *next on and deletes those fn
// names, within the budget. It leaves *next where to resume and reports
// whether the prefix is exhausted.
func (c *cleaner) sweep(prefix []byte, next *[]byte, fn func(k, v []byte) ([][]byte, error)) (bool, error) {
	b := c.b
	b.scanned++ // the seek itself, even when it finds nothing
	var doomed [][]byte
	exhausted := true
	err := c.r.scan(prefix, *next, func(k, v []byte) (bool, error) {
		keys, err := fn(k, v)
		if err != nil {
			return false, err
		}
		if b.writes+len(doomed)+len(keys) > b.MaxWrites {
			exhausted, b.full = false, true
			*next = append([]byte(nil), k...) // not done: look at it again
			return false, nil
		}
		b.scanned++
		for _, key := range keys {
			doomed = append(doomed, append([]byte(nil), key...))
		}
		*next = append(append([]byte(nil), k...), 0)
		if b.writes+len(doomed) >= b.MaxWrites || b.scanned >= b.MaxScanned {
			exhausted = false
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return false, err
	}
	for _, k := range doomed {
		if err := c.w.del(k); err != nil {
			return false, err
		}
	}
	b.writes += len(doomed)
	return exhausted, nil
}
