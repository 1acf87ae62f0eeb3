package raftnode

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// From log format 5 the raft log is also where Kafka batches live (see
// store/refs.go): an entry a ref names stays in the log after raft's
// compaction has passed it, until no ref reads it from there. Raft only
// asks the log store for entries at or after FirstIndex and sends a
// snapshot to a follower that needs one before, so keeping more than raft
// asked for is always safe; what it must not do is delete less than a
// wipe: installing a snapshot on raft-wal (a MonotonicLogStore) removes
// the whole log, and the snapshot's sidecars then hold every batch its
// refs name.

// entryReader reads applied entries back from the raft log for the store.
type entryReader struct {
	logs   raft.LogStore // the log on disk
	recent raft.LogStore // the same through raft's cache of its newest entries
	// walDir and stateDir name where a damaged entry lies and where the
	// marker that has the next start repair the node goes (see
	// store.ReportDamage).
	walDir, stateDir string
}

// EntryData implements store.RaftLog: the entry's command, its checksum
// checked (what the state machine applied, from the same first byte). An
// entry read from disk is decoded into fresh bytes, returned as they are;
// one of the newest is shared with raft's cache, so it is copied.
func (r entryReader) EntryData(index uint64) ([]byte, error) {
	src, shared := r.logs, false
	if last, err := r.logs.LastIndex(); err == nil && index+logCacheEntries > last {
		src, shared = r.recent, true
	}
	var l raft.Log
	if err := src.GetLog(index, &l); errors.Is(err, raft.ErrLogNotFound) {
		return nil, store.ErrEntryGone
	} else if err != nil {
		return nil, err
	}
	data, err := command.Unseal(l.Data)
	if err != nil {
		// Never served: the node stops, and its next start repairs it.
		return nil, store.ReportDamage(fmt.Errorf("raft log entry %d: %w", index, err), r.walDir, r.stateDir)
	}
	if shared {
		data = bytes.Clone(data)
	}
	return data, nil
}

// logHolder decides how far the raft log may be compacted: not past the
// lowest entry the store's refs or a snapshot still read (store.LogHold,
// store.SnapshotLogFloor). When the log holds much more than the batches
// refs name (an old segment pins it while the rest is long gone), it
// copies the pinning segment's batches into its sidecar, in the
// background, one segment at a time, so the next compaction frees it.
type logHolder struct {
	store  *store.Store
	snaps  *snapshotStore
	walDir string
	logger hclog.Logger

	// slack is how many bytes the log may hold beyond twice what refs
	// name before a segment is copied out.
	slack    int64
	moving   atomic.Bool
	relocate func(store.LogHold) // nil: the store's Relocate, in the background

	// For metrics: the bytes of batches refs named at the last compaction,
	// and the bytes copied out of the log into sidecars since the start.
	live, copied atomic.Int64
}

// LogHoldStats is what the raft log holds for the store (see logHolder):
// Sealed, the bytes of its sealed files; Live, the bytes of batches refs
// named at the last compaction; Copied, the bytes of batches copied out of
// the log into sidecars since the node started.
type LogHoldStats struct {
	Sealed, Live, Copied int64
}

// LogHoldStats reports the raft log's hold (zero on a node without one).
func (n *Node) LogHoldStats() LogHoldStats {
	h := n.logs.holder
	if h == nil {
		return LogHoldStats{}
	}
	return LogHoldStats{Sealed: h.heldBytes(), Live: h.live.Load(), Copied: h.copied.Load()}
}

const defaultLogHoldSlack = 1 << 30

// floor returns the lowest index the log must keep (0: keep everything,
// when the hold cannot be computed).
func (h *logHolder) floor() uint64 {
	hold, err := h.store.LogHold()
	if err != nil {
		h.logger.Error("cannot tell which raft entries hold message data: keeping the raft log whole", "error", err)
		return 0
	}
	snaps, err := h.snaps.logFloor()
	if err != nil {
		h.logger.Error("cannot read a snapshot's list of segments: keeping the raft log whole", "error", err)
		return 0
	}
	h.live.Store(int64(hold.Live))
	if hold.Pin != nil && h.heldBytes() > 2*int64(hold.Live)+h.slack {
		h.startRelocation(hold)
	}
	return min(hold.Floor, snaps)
}

func (h *logHolder) startRelocation(hold store.LogHold) {
	if h.relocate != nil {
		h.relocate(hold)
		return
	}
	if !h.moving.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer h.moving.Store(false)
		if err := h.store.Relocate(*hold.Pin); err != nil {
			h.logger.Error("could not copy a segment's batches out of the raft log (the log keeps them)", "stream", hold.Pin.Stream, "base", hold.Pin.Base, "error", err)
			return
		}
		h.copied.Add(int64(hold.Pin.Bytes))
		h.logger.Info("copied a segment's batches out of the raft log", "stream", hold.Pin.Stream, "base", hold.Pin.Base, "refs", hold.Pin.Refs)
	}()
}

// heldBytes is the size of the raft log's sealed files: all but the
// newest, which raft-wal allocates whole when it opens it.
func (h *logHolder) heldBytes() int64 {
	ents, err := os.ReadDir(h.walDir)
	if err != nil {
		return 0
	}
	var sizes []int64
	for _, e := range ents { // in name order, which is index order
		if info, err := e.Info(); err == nil && filepath.Ext(e.Name()) == ".wal" {
			sizes = append(sizes, info.Size())
		}
	}
	var n int64
	for _, size := range sizes[:max(len(sizes)-1, 0)] {
		n += size
	}
	return n
}

// logFloor is the lowest raft index a snapshot kept here still reads from
// the log when it is sent or restored (math.MaxUint64: none).
func (s *snapshotStore) logFloor() (uint64, error) {
	metas, err := s.List()
	if err != nil {
		return 0, err
	}
	floor := uint64(math.MaxUint64)
	for _, m := range metas {
		dir := filepath.Join(s.dir, m.ID)
		segs, _, err := readSegmentList(dir)
		if err != nil {
			return 0, err
		}
		floor = min(floor, store.SnapshotLogFloor(filepath.Join(dir, segmentLinkDir), segs))
	}
	return floor, nil
}

// DeleteRange implements raft.LogStore. A range that ends before the last
// entry is raft's compaction, and stops short of the hold's floor; one that
// reaches the last entry (a conflicting tail, or the wipe before a
// snapshot is installed) is deleted as asked.
func (l *walLog) DeleteRange(min, max uint64) error {
	if l.holder != nil {
		last, err := l.LastIndex()
		if err != nil {
			return err
		}
		if max < last {
			if floor := l.holder.floor(); floor <= max {
				if floor <= min {
					return nil
				}
				max = floor - 1
			}
		}
	}
	return l.fault(l.do(func(w *wal.WAL) error { return w.DeleteRange(min, max) }), l.dir)
}
