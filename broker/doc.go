// Package broker is the one service both frontends (HTTP and Kafka) call.
// It validates requests, stamps on the leader everything that must be the
// same on every replica (time, message ids), encodes one raft command,
// applies it, and returns the state machine's answer. Reads come from the
// local store.
//
// It knows no wire format and no badger layout.
package broker
