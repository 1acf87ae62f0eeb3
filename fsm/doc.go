// Package fsm is waggle's state machine: Processor applies one decoded
// command to a store transaction, and FSM adapts it to hashicorp/raft
// (batched apply, one badger transaction per batch, snapshots as a read
// transaction, restore, backups).
//
// It is deterministic: every replica that applies the same entries holds
// the same state. Time and ids come stamped in the entries; nothing here
// reads the clock, random numbers, map order or local configuration inside
// Apply. It never speaks HTTP or Kafka and knows nothing of raft's
// network or log store (package raftnode).
//
// Every entry does bounded work: it writes at most command.MaxEntryWrites
// keys whatever the size of the state (command/bounds.go lists each
// command's bound, and TestEveryEntryWritesABoundedNumberOfKeys checks
// them on large state). Deleting or resetting something large writes a
// tombstone or a reset record, and bounded cleanup entries or later reads
// do the rest. The state machine panics only on corruption (an entry that
// does not decode, a store that fails to read or write); a client's
// request, however large or strange, is refused before it becomes an entry
// or answered with a refusal value.
package fsm
