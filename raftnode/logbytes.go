package raftnode

import (
	"time"

	"github.com/hashicorp/raft"
)

// Raft sizes its log in entries: a snapshot every SnapshotThreshold
// entries, TrailingLogs kept behind it. An entry can be a megabyte of
// produced records, so counted in entries the log grew without bound: at
// 800 KB an entry, 16,384 entries before the first snapshot are 13 GB
// (measured: 3.8 GB of log after 200 s of produce while retention kept the
// data itself at 600 MB). The node also takes a snapshot once
// logBytesPerSnapshot were applied since the last one, and keeps about
// that many bytes of log behind a snapshot, however large its entries.
//
// A snapshot writes every key of the state (message pointers, dedup
// records, cursors: it grows with the messages held), so it is spaced out
// in proportion once the state outgrows logBytesPerSnapshot: the next one
// comes after as many bytes of log as the last one wrote, and raft's own
// entry-count trigger is stretched by the same factor. Writing snapshots
// thus never costs more than writing the log, however large the state:
// at a fixed spacing the work of all snapshots grows with the square of
// the messages held (a profile under HTTP push with 3 million messages
// held found a tenth of the CPU in snapshots).
// A restart does not replay the log up to the snapshot (the store is on
// disk with its applied index), so the spacing costs only log disk space.
//
// The node also takes a snapshot of its own soon after restoring one: a
// snapshot an older binary received whole (the data inside state.bin, a
// second copy of the segment files) is removed once one of the node's own
// stands beside it (linkingSink.Close).
const logBytesPerSnapshot = 256 << 20

// watchLogBytes runs until stop closes, checking each second.
func (n *Node) watchLogBytes(base raft.Config, stop <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	current := snapshotSpacing{trailing: base.TrailingLogs, threshold: base.SnapshotThreshold}
	var lastBytes, lastRestores uint64
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		bytes, entries := n.FSM.AppliedSize()
		every := max(uint64(logBytesPerSnapshot), n.FSM.StateBytes())
		if want := spacing(base, bytes, entries, every); current.differs(want) {
			current = want
			n.Raft.ReloadConfig(raft.ReloadableConfig{TrailingLogs: want.trailing, SnapshotInterval: base.SnapshotInterval,
				SnapshotThreshold: want.threshold, HeartbeatTimeout: base.HeartbeatTimeout, ElectionTimeout: base.ElectionTimeout})
		}
		restores := n.FSM.Restores()
		if bytes-lastBytes >= every || restores != lastRestores {
			// Right after a restore there is nothing new to snapshot: the
			// next tick tries again, until an entry has been applied.
			if err := n.Raft.Snapshot().Error(); err == nil {
				lastBytes, lastRestores = bytes, restores
			}
		}
	}
}

// snapshotSpacing is the part of raft's configuration sized from the
// applied bytes: entries kept behind a snapshot, and entries between
// snapshots.
type snapshotSpacing struct{ trailing, threshold uint64 }

// spacing works out the spacing for entries of the average size seen so
// far and a snapshot every `every` bytes of log.
func spacing(base raft.Config, bytes, entries, every uint64) snapshotSpacing {
	s := snapshotSpacing{trailing: base.TrailingLogs, threshold: base.SnapshotThreshold}
	if entries > 0 {
		avg := max(bytes/entries, 1)
		s.trailing = min(max(logBytesPerSnapshot/avg, 256), base.TrailingLogs)
	}
	// Stretch raft's entry-count trigger as the state outgrows the base.
	s.threshold = base.SnapshotThreshold * (every / logBytesPerSnapshot)
	return s
}

// differs reports whether want is worth a configuration reload: a factor
// of two either way for the trailing entries, any change of threshold.
func (s snapshotSpacing) differs(want snapshotSpacing) bool {
	return want.trailing < s.trailing/2 || want.trailing > s.trailing*2 || want.threshold != s.threshold
}
