// Package raftnode runs one raft group on a node: hashicorp/raft over the
// node's shared TCP listener (raftmux), the raft log in raft-wal, a
// snapshot store that links segment files instead of copying them,
// snapshots spaced by the bytes the log grew, the data directory's
// verification and repair, the vote guard of a repaired node, and
// restoring a backup.
//
// It makes no business decision: what an entry means is package fsm's,
// what goes into the log is package command's.
package raftnode
