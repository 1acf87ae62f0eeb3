// Package router is the one place that answers "which raft group, and
// which of this node's services runs it" for HTTP, Kafka and the broker.
//
// Placement (placement.go) decides which raft group owns a queue, a topic,
// a KV namespace, a consumer group or a transactional id, and which group
// minted an id. A name's placement key is the name up to its first '.'
// (the whole name when it has none), and the key's hash picks the group.
// Everything with the same key lives in one group, so "billing.invoices",
// "billing.payments" and the KV namespace "billing" can share one
// transaction. The hash depends only on the key and the cluster's group
// count, which is fixed when the cluster is created: every node places
// every name alike without asking anyone.
//
// A Table (table.go) holds a node's services by raft group, twice: the
// local ones, which read this node's store and answer writes only while
// they lead, and the forwarding ones, which send a write to the group's
// leader wherever it is. Each service knows its own group's leader.
//
// It does no I/O and decides nothing else.
package router
