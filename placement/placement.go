// Package placement decides which raft group owns a queue, a topic, a KV
// namespace or a consumer group, and which group minted an id.
//
// A name's placement key is the name up to its first '.' (the whole name
// when it has none), and the key's hash picks the group. Everything with
// the same key lives in one group, so "billing.invoices",
// "billing.payments" and the KV namespace "billing" can share one
// transaction. The hash depends only on the key and the cluster's group
// count, which is fixed when the cluster is created: every node places
// every name alike without asking anyone.
package placement

import (
	"hash/fnv"
	"strings"
)

// Key is the part of name that places it: up to the first '.'.
func Key(name string) string {
	if i := strings.IndexByte(name, '.'); i >= 0 {
		return name[:i]
	}
	return name
}

// Group is the raft group, of groups in the cluster (at least 1), that
// owns name.
func Group(name string, groups int) uint32 {
	if groups <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(Key(name)))
	return h.Sum32() % uint32(groups)
}

// idShift places a group's number above the ids it mints: group g's ids
// start at g<<idShift. 2^44 ids per group outlast any cluster, and with
// at most 64 groups every id stays below 2^50, inside the integers a
// JSON number carries exactly (2^53).
const idShift = 44

// IDBase is the first id group g mints: ids (dead letters, Kafka producer
// ids) are then unique across the cluster and name their group.
func IDBase(g uint32) uint64 { return uint64(g) << idShift }

// GroupOfID is the group that minted id.
func GroupOfID(id uint64) uint32 { return uint32(id >> idShift) }
