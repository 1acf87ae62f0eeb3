// Package raftfsm owns waggle's raft: node setup (TCP transport, raft-boltdb
// log store, file snapshots), the command types written to the log, and the
// state machine that applies them to the store.
//
// The state machine is deterministic: every replica that applies the same
// entries holds the same state. Time and ids come stamped in the entries;
// nothing here reads the clock or local configuration inside Apply. It never
// speaks HTTP or Kafka.
package raftfsm
