package router

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
