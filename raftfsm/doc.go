// Package raftfsm owns waggle's raft: node setup (TCP transport, raft-boltdb
// log store, file snapshots), the command types written to the log, and the
// state machine that applies them to the store.
//
// The state machine is deterministic: every replica that applies the same
// entries holds the same state. Time and ids come stamped in the entries;
// nothing here reads the clock or local configuration inside Apply. It never
// speaks HTTP or Kafka.
//
// Every entry does bounded work: it writes at most MaxEntryWrites keys
// whatever the size of the state (bounds.go lists each command's bound, and
// TestEveryEntryWritesABoundedNumberOfKeys checks them on large state).
// Deleting or resetting something large writes a tombstone or a reset
// record, and bounded cleanup entries or later reads do the rest. The
// state machine panics only on corruption (an entry that does not decode,
// a store that fails to read or write); a client's request, however large
// or strange, is refused before it becomes an entry or answered with a
// refusal value.
package raftfsm
