package store

import (
	"crypto/sha256"
	"errors"
	"sync/atomic"

	"github.com/waggle-mq/waggle/auth"
)

// Kafka ACLs (KIP-140's bindings): who is allowed or denied an operation
// on which resources, consulted beside the principals' roles by waggle's
// one authorizer (package auth). Replicated in group 0 with the users.
//
//	familyACL [0x36] SHA-256 of the binding's JSON (16 bytes) -> ACL (JSON, versioned)
const familyACL byte = 0x36

// MaxACLs bounds the bindings a cluster keeps, so the set the authorizer
// holds in memory, and a delete filter's matches, stay small.
const MaxACLs = 10_000

// ACL is one binding (auth.ACL, whose JSON is the record).
type ACL = auth.ACL

func aclKey(a ACL) []byte {
	sum := sha256.Sum256(encodeJSONRecord(a))
	return append([]byte{familyACL}, sum[:16]...)
}

// aclGeneration counts the commits that changed the ACLs or replaced the
// whole state, so a reader's cached set knows when to load again.
type aclGeneration struct{ n atomic.Uint64 }

// ACLGeneration changes whenever a committed transaction changed the
// ACLs, or a snapshot was restored.
func (s *Store) ACLGeneration() uint64 { return s.aclGen.n.Load() }

// PutACL stores a binding; it reports false when it was there already.
func (t *Tx) PutACL(a ACL) (added bool, err error) {
	k := aclKey(a)
	if _, err := t.get(k); err == nil {
		return false, nil
	} else if !errors.Is(err, ErrNotFound) {
		return false, err
	}
	t.aclsChanged()
	return true, t.set(k, encodeJSONRecord(a))
}

// DeleteACL removes a binding; it reports false when there was none.
func (t *Tx) DeleteACL(a ACL) (deleted bool, err error) {
	k := aclKey(a)
	if _, err := t.get(k); errors.Is(err, ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	t.aclsChanged()
	return true, t.del(k)
}

// ACLs lists every binding (at most MaxACLs), in key order.
func (t *Tx) ACLs() ([]ACL, error) {
	var out []ACL
	err := t.scan([]byte{familyACL}, nil, func(_, v []byte) (bool, error) {
		a, err := decodeJSONRecord[ACL](v)
		if err != nil {
			return false, err
		}
		out = append(out, a)
		return true, nil
	})
	return out, err
}

// aclsChanged makes the commit move the store's ACL generation.
func (t *Tx) aclsChanged() {
	if t.aclWrite {
		return
	}
	t.aclWrite = true
	t.afterCommit = append(t.afterCommit, func() error {
		t.store.aclGen.n.Add(1)
		return nil
	})
}
