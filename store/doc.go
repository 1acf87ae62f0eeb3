// Package store owns waggle's badger database: its options, the key layout
// (keys.go), the value formats (records.go), reads, writes, and the
// snapshot stream.
//
// It knows nothing of raft, HTTP or the Kafka protocol. The one wire format
// it reads is Kafka's record batch (package recordbatch), where compaction
// keeps a key's newest record and transactional markers decide what stays.
// The state machine writes through a Tx that it commits once per batch of
// raft entries; readers use View. Queue records are also kept decoded in
// memory as of the last commit (catalog.go), so reading a queue's metadata
// costs no decode. Nothing here reads the clock: times are passed in.
package store
