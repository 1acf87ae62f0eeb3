package store

import (
	"encoding/binary"
	"errors"
	"strings"
)

// Leadership preferences of raft groups, kept in group 0's store.
//
//	familyLeaderPref [0x33] group(4) -> node id
//
// A raft group with a preference is handed to that node whenever it can
// lead (raftgroups); without one, to the voter its id picks.
const familyLeaderPref byte = 0x33

func leaderPrefKey(group uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{familyLeaderPref}, group)
}

// PutLeaderPreference records the node raft group group should be led by.
func (t *Tx) PutLeaderPreference(group uint32, node string) error {
	return t.set(leaderPrefKey(group), []byte(node))
}

// DeleteLeaderPreference forgets group's preference.
func (t *Tx) DeleteLeaderPreference(group uint32) error { return t.del(leaderPrefKey(group)) }

// LeaderPreference answers the node group should be led by, if one was set.
func (t *Tx) LeaderPreference(group uint32) (string, bool, error) {
	b, err := t.get(leaderPrefKey(group))
	if errors.Is(err, ErrNotFound) {
		return "", false, nil
	}
	return string(b), err == nil, err
}

// The replica directory of data groups, kept in group 0's store.
//
//	familyReplicas [0x37] group(4) -> node ids, comma-separated, the preferred leader first
//
// A data group without a record is replicated where the static placement
// puts it (raftgroups.Placement).
const familyReplicas byte = 0x37

func replicasKey(group uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{familyReplicas}, group)
}

// PutReplicas records the nodes that should replicate group.
func (t *Tx) PutReplicas(group uint32, nodes []string) error {
	return t.set(replicasKey(group), []byte(strings.Join(nodes, ",")))
}

// DeleteReplicas forgets group's record: the static placement applies.
func (t *Tx) DeleteReplicas(group uint32) error { return t.del(replicasKey(group)) }

// Replicas answers the nodes recorded to replicate group, nil when none
// are.
func (t *Tx) Replicas(group uint32) ([]string, error) {
	b, err := t.get(replicasKey(group))
	if errors.Is(err, ErrNotFound) || len(b) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return strings.Split(string(b), ","), nil
}
