package raftfsm

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
// The node also takes a snapshot of its own soon after restoring one: a
// snapshot an older binary received whole (the data inside state.bin, a
// second copy of the segment files) is removed once one of the node's own
// stands beside it (linkingSink.Close).
const logBytesPerSnapshot = 256 << 20

// watchLogBytes runs until stop closes, checking each second.
func (n *Node) watchLogBytes(base raft.Config, stop <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	trailing := base.TrailingLogs
	var lastBytes, lastRestores uint64
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		bytes, entries := n.FSM.appliedSize()
		if entries > 0 {
			avg := max(bytes/entries, 1)
			want := min(max(logBytesPerSnapshot/avg, 256), base.TrailingLogs)
			if want < trailing/2 || want > trailing*2 {
				trailing = want
				n.Raft.ReloadConfig(raft.ReloadableConfig{TrailingLogs: trailing, SnapshotInterval: base.SnapshotInterval,
					SnapshotThreshold: base.SnapshotThreshold, HeartbeatTimeout: base.HeartbeatTimeout, ElectionTimeout: base.ElectionTimeout})
			}
		}
		restores := n.FSM.restores.Load()
		if bytes-lastBytes >= logBytesPerSnapshot || restores != lastRestores {
			// Right after a restore there is nothing new to snapshot: the
			// next tick tries again, until an entry has been applied.
			if err := n.Raft.Snapshot().Error(); err == nil {
				lastBytes, lastRestores = bytes, restores
			}
		}
	}
}
