package router

import (
	"strconv"
	"strings"
	"sync/atomic"
)

// Table is a node's services (a frontend's view of broker.Service) by raft
// group id. With one raft group every lookup is that group's. A copy of a
// Table shares its slots: Place on one is seen by all.
type Table[B any] struct {
	slots    []atomic.Pointer[slot[B]] // by group
	dataOnly bool                      // group 0 holds no queue or topic (DataGroupsOnly)
}

// slot is what a node has of one raft group: its local service and the
// same forwarding writes to the group's leader, or, when another node
// replicates the group and this one does not, what reaches that node.
type slot[B any] struct {
	local, forwarding B
	remote            bool
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
		local, forwarding = []B{single}, []B{single}
	}
	t := Table[B]{slots: make([]atomic.Pointer[slot[B]], len(local))}
	for g := range local {
		t.slots[g].Store(&slot[B]{local: local[g], forwarding: forwarding[g]})
	}
	return t
}

// Groups is how many raft groups the cluster runs.
func (t Table[B]) Groups() int { return len(t.slots) }

// DataGroupsOnly returns t with group 0 left out of placement, as in a
// cluster with a replication factor (group 0, on every node, keeps
// the metadata only); remote lists the groups this node does not
// replicate, whose services reach a node that does.
func (t Table[B]) DataGroupsOnly(remote []bool) Table[B] {
	if len(remote) != len(t.slots) {
		panic("router: the remote groups list other raft groups than the services")
	}
	for g, r := range remote {
		s := *t.slots[g].Load()
		s.remote = r
		t.slots[g].Store(&s)
	}
	t.dataOnly = true
	return t
}

// Place puts group g's services in the table, at once for every request
// that looks it up from then on: those of a member this node now runs, or
// (remote) what reaches the nodes that replicate it when this one stopped
// doing so. g must be below Groups.
func (t Table[B]) Place(g uint32, local, forwarding B, remote bool) {
	t.slots[g].Store(&slot[B]{local: local, forwarding: forwarding, remote: remote})
}

// Replicated reports whether this node runs a member of group g.
func (t Table[B]) Replicated(g uint32) bool { return !t.slots[g].Load().remote }

// GroupOf is the raft group that owns name.
func (t Table[B]) GroupOf(name string) uint32 {
	if t.dataOnly && len(t.slots) > 1 {
		return 1 + Group(name, len(t.slots)-1)
	}
	return Group(name, len(t.slots))
}

// For is the local service of the group that owns name.
func (t Table[B]) For(name string) B { return t.Local(t.GroupOf(name)) }

// Local is group g's local service; g must be below Groups.
func (t Table[B]) Local(g uint32) B { return t.slots[g].Load().local }

// Forwarding is group g's forwarding service; g must be below Groups.
func (t Table[B]) Forwarding(g uint32) B { return t.slots[g].Load().forwarding }

// All lists the local services in group order, as they are now.
func (t Table[B]) All() []B {
	out := make([]B, len(t.slots))
	for g := range t.slots {
		out[g] = t.slots[g].Load().local
	}
	return out
}

// AllForwarding lists the forwarding services in group order, as they
// are now.
func (t Table[B]) AllForwarding() []B {
	out := make([]B, len(t.slots))
	for g := range t.slots {
		out[g] = t.slots[g].Load().forwarding
	}
	return out
}

// GroupOfIDString is the group that minted an id as a client sends it: a
// number (GroupOfID) or a lease id ending "@g". An id that names no group
// of the table is group 0's, which judges it.
func (t Table[B]) GroupOfIDString(id string) uint32 {
	if i := strings.LastIndexByte(id, '@'); i >= 0 {
		if g, err := strconv.ParseUint(id[i+1:], 10, 32); err == nil && g < uint64(len(t.slots)) {
			return uint32(g)
		}
		return 0
	}
	n, err := strconv.ParseUint(id, 10, 64)
	if g := GroupOfID(n); err == nil && g < uint32(len(t.slots)) {
		return g
	}
	return 0
}
