// Package broker is the one service both frontends (HTTP and Kafka) call.
// It validates requests, stamps on the leader everything that must be the
// same on every replica (time, message ids), encodes one raft command,
// applies it, and returns the state machine's answer. Reads come from the
// local store.
//
// It speaks neither HTTP nor the Kafka protocol (Kafka record batches reach
// it parsed, package recordbatch), knows no badger layout, and builds the
// log's entries from package command. A node with several raft groups runs
// one Service per group; a Service sends a write of another node's group
// to that group's leader (Forwarding).
package broker
