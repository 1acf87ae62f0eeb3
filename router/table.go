package router

import (
	"strconv"
	"strings"
)

// Table is a node's services (a frontend's view of broker.Service) by raft
// group id. With one raft group every lookup is that group's.
type Table[B any] struct {
	local, forwarding []B
	remote            []bool // by group: another node replicates it, this one does not
	dataOnly          bool   // group 0 holds no queue or topic (DataGroupsOnly)
}

// NewTable makes the table of one node: local[g] runs group g on this
// node, forwarding[g] is the same group's service that forwards writes to
// its leader. Both list every group, or the node runs one group and
// single is it. A mismatch is a programming error and panics.
func NewTable[B any](single B, local, forwarding []B) Table[B] {
	if len(local) != len(forwarding) {
		panic("router: the local and forwarding services list different raft groups")
	}
	if len(local) == 0 {
		return Table[B]{local: []B{single}, forwarding: []B{single}}
	}
	return Table[B]{local: local, forwarding: forwarding}
}

// Groups is how many raft groups the cluster runs.
func (t Table[B]) Groups() int { return len(t.local) }

// DataGroupsOnly returns t with group 0 left out of placement, as in a
// cluster with a replication factor (group 0, on every node, keeps
// the metadata only); remote lists the groups this node does not
// replicate, whose services reach a node that does.
func (t Table[B]) DataGroupsOnly(remote []bool) Table[B] {
	if len(remote) != len(t.local) {
		panic("router: the remote groups list other raft groups than the services")
	}
	t.dataOnly, t.remote = true, remote
	return t
}

// Replicated reports whether this node runs a member of group g.
func (t Table[B]) Replicated(g uint32) bool { return t.remote == nil || !t.remote[g] }

// GroupOf is the raft group that owns name.
func (t Table[B]) GroupOf(name string) uint32 {
	if t.dataOnly && len(t.local) > 1 {
		return 1 + Group(name, len(t.local)-1)
	}
	return Group(name, len(t.local))
}

// For is the local service of the group that owns name.
func (t Table[B]) For(name string) B { return t.local[t.GroupOf(name)] }

// Local is group g's local service; g must be below Groups.
func (t Table[B]) Local(g uint32) B { return t.local[g] }

// Forwarding is group g's forwarding service; g must be below Groups.
func (t Table[B]) Forwarding(g uint32) B { return t.forwarding[g] }

// All lists the local services in group order.
func (t Table[B]) All() []B { return t.local }

// AllForwarding lists the forwarding services in group order.
func (t Table[B]) AllForwarding() []B { return t.forwarding }

// GroupOfIDString is the group that minted an id as a client sends it: a
// number (GroupOfID) or a lease id ending "@g". An id that names no group
// of the table is group 0's, which judges it.
func (t Table[B]) GroupOfIDString(id string) uint32 {
	if i := strings.LastIndexByte(id, '@'); i >= 0 {
		if g, err := strconv.ParseUint(id[i+1:], 10, 32); err == nil && g < uint64(len(t.local)) {
			return uint32(g)
		}
		return 0
	}
	n, err := strconv.ParseUint(id, 10, 64)
	if g := GroupOfID(n); err == nil && g < uint32(len(t.local)) {
		return g
	}
	return 0
}
