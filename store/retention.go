package store

import "errors"

// Retention drops a queue's oldest message data in whole sealed segments.
// The leader finds a point in the queue's stream before which every
// sealed segment's last append is older than the retention period
// (RetentionPoint) and proposes it; the entry files a trim tombstone
// (Retain), and clean-up entries then work it off like a delete: each
// partition's index entries before the point go, and its start offset
// moves past them in the same entry, so a reader never meets an index
// entry whose data is gone; last the sealed segments' records, and the
// files once that commit stands.
//
// Appends along a stream are in replicated-time order, so a segment's
// last append is its newest. The dedup index is not touched: a retried
// transactionId inside its window still answers duplicate with the
// original offset, even once the message itself is gone.

// TombstoneTrim marks a queue's data being dropped before a stream
// position (Tombstone.Pos).
const TombstoneTrim = "trim"

// MaxRetainSegments bounds how many sealed segments one retention step
// drops, so its last clean-up step deletes a bounded number of records.
const MaxRetainSegments = 1000

// RetentionLimit is what a queue keeps: segments whose last append is at
// or after CutoffMs; when KeepBytes is not 0, the newest segments that
// hold KeepBytes of the stream (Kafka's retention.bytes: a segment goes
// once the stream holds at least KeepBytes without it); and segments that
// end after CompletedPos (see CompletedPoint) or whose last append is at or
// after CompletedCutoffMs (an HTTP queue's completedRetentionSeconds).
type RetentionLimit struct {
	CutoffMs  int64
	KeepBytes uint64

	CompletedPos      uint64
	CompletedCutoffMs int64
}

// drops reports whether the limit drops sealed segment sr of the stream
// whose head is h.
func (l RetentionLimit) drops(sr SegmentRecord, h *streamHead) bool {
	after := h.End - sr.End + h.RefBytes - sr.RefEnd // what the stream holds after sr
	return sr.LastAppendMs < l.CutoffMs || (l.KeepBytes > 0 && after >= l.KeepBytes) ||
		(sr.End <= l.CompletedPos && sr.LastAppendMs < l.CompletedCutoffMs)
}

// CompletedPoint returns the stream position before which every consumer
// group reading the queue (of groups, those subscribed to it or holding a
// cursor in it) has finished every message: over the queue's partitions,
// the lowest position of an entry holding a message some group has not
// finished. A group without a position in a partition has finished
// nothing there. found is false when none of groups reads the queue, or
// when the answer would take more than maxLookups group positions
// (reading groups times partitions): the work is bounded. looked is how
// many it took.
func (t *Tx) CompletedPoint(queueID uint64, groups []string, maxLookups int) (pos uint64, found bool, looked int, err error) {
	var views []ConsumerGroupView
	for _, g := range groups {
		v, err := t.ConsumerGroupView(g, queueID)
		if err != nil {
			return 0, false, looked, err
		}
		if !v.Subscribed {
			has := false
			if err := t.scan(append(cursorPrefix(g), appendUint64(nil, queueID)...), nil, func(_, _ []byte) (bool, error) {
				has = true
				return false, nil
			}); err != nil {
				return 0, false, looked, err
			}
			if !has {
				continue
			}
		}
		views = append(views, v)
	}
	if len(views) == 0 {
		return 0, false, looked, nil
	}
	maxPartitions := maxLookups / len(views)
	parts, err := t.PartitionsAfter(queueID, "", maxPartitions+1)
	if err != nil || len(parts) > maxPartitions {
		return 0, false, looked, err
	}
	looked = len(views) * len(parts)
	h, err := t.head(queueID)
	if err != nil {
		return 0, false, looked, err
	}
	pos = h.End
	for _, part := range parts {
		first := part.NextOffset // the first offset some group has not finished
		for _, v := range views {
			cur, ok, err := t.Position(v, part)
			if err != nil {
				return 0, false, looked, err
			}
			off := part.StartOffset
			if ok && cur.Offset > int64(off) {
				off = uint64(cur.Offset)
			}
			first = min(first, off)
		}
		if first >= part.NextOffset {
			continue
		}
		es, err := t.entries(part.ID, first, 1, 1, false)
		if err != nil {
			return 0, false, looked, err
		}
		if len(es) == 0 || es[0].ptr == nil {
			return 0, false, looked, nil // an entry stored inline by an older binary: no segment holds it
		}
		pos = min(pos, es[0].ptr.pos)
	}
	return pos, true, looked, nil
}

// RetentionPoint returns the stream position before which the queue's
// sealed segments, oldest first, are all past the limit, taking at most
// MaxRetainSegments of them; found is false when the oldest is not.
func (t *Tx) RetentionPoint(queueID uint64, lim RetentionLimit) (pos uint64, found bool, err error) {
	err = t.expiredSegments(queueID, lim, func(sr SegmentRecord) bool {
		pos, found = sr.End, true
		return true
	})
	return pos, found, err
}

// Retain files a trim of the queue's data before pos (tombstone sequence
// seq) if pos is still a point RetentionPoint could answer for lim; it
// reports whether it did. A stale proposal (the segments are gone
// already, or are not past the limit) changes nothing.
func (t *Tx) Retain(queueID, pos uint64, lim RetentionLimit, seq uint64) (bool, error) {
	ok := false
	err := t.expiredSegments(queueID, lim, func(sr SegmentRecord) bool {
		ok = sr.End == pos
		return !ok
	})
	if err != nil || !ok {
		return false, err
	}
	q, err := t.QueueByID(queueID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return false, err
	}
	return true, t.putTombstone(Tombstone{Seq: seq, Kind: TombstoneTrim, QueueID: queueID, Pos: pos, Scan: q.CompactedLayout})
}

// expiredSegments calls fn with the queue's sealed segments, oldest first,
// while the limit drops them, for at most MaxRetainSegments of them or
// until fn returns false.
func (t *Tx) expiredSegments(queueID uint64, lim RetentionLimit, fn func(SegmentRecord) bool) error {
	h, err := t.head(queueID)
	if err != nil {
		return err
	}
	n := 0
	return t.scan(segmentPrefix(queueID), nil, func(k, v []byte) (bool, error) {
		sr, err := decodeSegmentRecord(k, v)
		if err != nil || !lim.drops(sr, h) {
			return false, err
		}
		n++
		return fn(sr) && n < MaxRetainSegments, nil
	})
}

// trimPhases: never reorder, only append (the index is stored).
var trimPhases = []phase{
	func(c *cleaner, ts *Tombstone) (bool, error) {
		return c.eachPartition(ts, (*cleaner).trimPartition)
	},
	func(c *cleaner, ts *Tombstone) (bool, error) {
		done, err := c.sweep(segmentPrefix(ts.QueueID), &ts.Next, func(k, v []byte) ([][]byte, error) {
			sr, err := decodeSegmentRecord(k, v)
			if err != nil || sr.End > ts.Pos {
				return nil, err
			}
			return [][]byte{k}, nil
		})
		if err != nil || !done {
			return false, err
		}
		id, pos := ts.QueueID, ts.Pos
		c.w.afterCommit = append(c.w.afterCommit, func() error { return c.w.segs.Stream(id).DropBefore(pos) })
		return true, nil
	},
}

// trimPartition deletes a partition's index entries whose data lies before
// ts.Pos, oldest first, and moves the partition's start offset past them
// in the same step. It stops at the first entry at or after the point (or
// one stored inline by an older binary, which no segment holds).
func (c *cleaner) trimPartition(ts *Tombstone) (bool, error) {
	pid := ts.Partition
	var doomed [][]byte
	var start uint64
	done := true
	err := c.r.scan(messageKey(pid, 0)[:9], ts.Next, func(k, v []byte) (bool, error) {
		c.b.scanned++
		_, off, err := parseMessageKey(k)
		if err != nil {
			return false, err
		}
		if len(v) == 0 || v[0] != kindPointer {
			return false, nil
		}
		p, err := decodePointer(v)
		if err != nil || (p.pos >= ts.Pos && !ts.Scan) {
			return false, err
		}
		if c.b.writes+len(doomed)+2 > c.b.MaxWrites || c.b.scanned >= c.b.MaxScanned {
			done, c.b.full = false, true
			return false, nil
		}
		ts.Next = append(append([]byte(nil), k...), 0)
		if p.pos >= ts.Pos { // a compacted queue: entries lie out of offset order
			ts.Kept = true
			return true, nil
		}
		doomed = append(doomed, append([]byte(nil), k...))
		if !ts.Kept {
			start = off + uint64(p.count)
		}
		return true, nil
	})
	if err != nil || len(doomed) == 0 {
		return done && err == nil, err
	}
	for _, k := range doomed {
		if err := c.w.del(k); err != nil {
			return false, err
		}
	}
	c.b.writes += len(doomed)
	part, err := c.w.partitionByID(pid)
	if errors.Is(err, ErrNotFound) {
		return done, nil
	}
	if err != nil {
		return false, err
	}
	if start > part.StartOffset {
		part.StartOffset = min(start, part.NextOffset)
		c.b.writes++
		if err := c.w.PutPartition(part); err != nil {
			return false, err
		}
	}
	return done, nil
}
