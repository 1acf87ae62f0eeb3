package store

import "errors"

// Classic Kafka consumer groups' membership, kept so that a new leader
// coordinates a group where the old one left it (Kafka keeps the same in
// __consumer_offsets): members go on heartbeating with their ids and
// generation instead of rejoining after every leader change.
//
//	familyClassicGroup [0x34] name -> classic group record (JSON, versioned)
//
// A record holds the newest generation whose assignment members were
// given; a group's committed offsets live with its cursors.
const familyClassicGroup byte = 0x34

func classicGroupKey(name string) []byte { return append([]byte{familyClassicGroup}, name...) }

// ClassicGroup is a classic consumer group's generation as its
// coordinator completed it.
type ClassicGroup struct {
	Name         string          `json:"name"`
	ProtocolType string          `json:"protocolType"`
	Protocol     string          `json:"protocol"`
	Generation   int32           `json:"generation"`
	Leader       string          `json:"leader"`
	Members      []ClassicMember `json:"members"` // in join order
}

// ClassicMember is one member of a recorded generation.
type ClassicMember struct {
	ID                 string            `json:"id"`
	InstanceID         string            `json:"instanceId,omitempty"` // KIP-345
	ClientID           string            `json:"clientId"`
	ClientHost         string            `json:"clientHost"`
	SessionTimeoutMs   int32             `json:"sessionTimeoutMs"`
	RebalanceTimeoutMs int32             `json:"rebalanceTimeoutMs"`
	Protocols          []ClassicProtocol `json:"protocols"`
	Assignment         []byte            `json:"assignment"`
}

// ClassicProtocol is an assignment protocol a member supports, with its
// metadata (its subscription).
type ClassicProtocol struct {
	Name     string `json:"name"`
	Metadata []byte `json:"metadata"`
}

// SaveClassicGroup keeps g unless a newer generation is kept already (the
// coordinator saves in the background, so saves may land out of order). A
// group without members removes the record of its generation or an older
// one: an emptied group is rebuilt from nothing.
func (t *Tx) SaveClassicGroup(g ClassicGroup) error {
	old, found, err := t.ClassicGroup(g.Name)
	switch {
	case err != nil:
		return err
	case found && old.Generation > g.Generation:
		return nil
	case len(g.Members) == 0:
		if !found {
			return nil
		}
		return t.del(classicGroupKey(g.Name))
	}
	return t.set(classicGroupKey(g.Name), encodeJSONRecord(g))
}

// DeleteClassicGroup forgets a group's membership (the group was deleted).
func (t *Tx) DeleteClassicGroup(name string) error { return t.del(classicGroupKey(name)) }

// ClassicGroup answers a group's recorded generation, if any.
func (t *Tx) ClassicGroup(name string) (ClassicGroup, bool, error) {
	b, err := t.get(classicGroupKey(name))
	if errors.Is(err, ErrNotFound) {
		return ClassicGroup{}, false, nil
	}
	if err != nil {
		return ClassicGroup{}, false, err
	}
	g, err := decodeJSONRecord[ClassicGroup](b)
	return g, err == nil, err
}
