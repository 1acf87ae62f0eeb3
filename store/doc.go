// Package store owns waggle's badger database: its options, the key layout
// (keys.go), the value formats (records.go), reads, writes, and the
// snapshot stream.
//
// It knows nothing of raft or wire formats. The state machine writes through
// a Tx that it commits once per batch of raft entries; readers use View.
// Nothing here reads the clock: times are passed in.
package store
