// Package auth is who may do what: principals (SASL users, HTTP tokens),
// their roles and name patterns, and the credentials stored for them.
//
// A principal holds one role and, optionally, patterns limiting the queues
// (Kafka topics are queues) and consumer groups the role applies to. The
// check is one function, Allows, used by both listeners.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
)

// Role is what a principal may do.
type Role string

// The roles. Admin may do everything, including managing queues, topics,
// users, tokens and the cluster.
const (
	Admin     Role = "admin"
	ReadWrite Role = "read-write"
	ReadOnly  Role = "read-only"
	WriteOnly Role = "write-only"
)

// ParseRole checks a role name.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case Admin, ReadWrite, ReadOnly, WriteOnly:
		return r, nil
	}
	return "", fmt.Errorf("role %q is not admin, read-write, read-only or write-only", s)
}

// Action is what a request does to a resource.
type Action int

// The actions. Consuming (fetch, pop, ack, committing offsets) is Read;
// producing and pushing is Write; creating, configuring and deleting is
// Manage.
const (
	Read Action = iota
	Write
	Manage
)

// Kind is the kind of resource an action is on.
type Kind int

// The resource kinds. Cluster covers everything without a name of its own:
// listings, the KV store and timers (read and write), membership, users
// and tokens (manage: admins only).
const (
	Queue Kind = iota
	Group
	Cluster
)

// Principal is an authenticated caller.
type Principal struct {
	Name string `json:"name"`
	Role Role   `json:"role"`
	// Queues and Groups are path.Match patterns the role applies to;
	// empty means every name.
	Queues []string `json:"queues,omitempty"`
	Groups []string `json:"groups,omitempty"`
}

// Allows reports whether p may do action on the resource of kind named
// name (ignored for Cluster).
func (p Principal) Allows(action Action, kind Kind, name string) bool {
	if p.Role == Admin {
		return true
	}
	switch {
	case action == Manage:
		return false
	case action == Read && p.Role == WriteOnly, action == Write && p.Role == ReadOnly:
		return false
	}
	switch kind {
	case Queue:
		return matchesAny(p.Queues, name)
	case Group:
		return matchesAny(p.Groups, name)
	default:
		return true
	}
}

// AllowsAnyWrite reports whether p may write to some queue (Kafka's
// InitProducerId asks this of an idempotent producer).
func (p Principal) AllowsAnyWrite() bool {
	return p.Role == Admin || p.Role == ReadWrite || p.Role == WriteOnly
}

func matchesAny(patterns []string, name string) bool {
	if len(patterns) == 0 {
		return true
	}
	return slices.ContainsFunc(patterns, func(p string) bool {
		ok, _ := path.Match(p, name)
		return ok
	})
}

// ValidatePatterns checks name patterns before they are stored.
func ValidatePatterns(patterns []string) error {
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			return fmt.Errorf("bad name pattern %q", p)
		}
	}
	return nil
}

// NewToken returns a fresh random bearer token.
func NewToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("auth: no randomness: %v", err))
	}
	return "wgl_" + hex.EncodeToString(b)
}

// HashToken is what is stored of a token: its SHA-256. Tokens are random
// and long, so a plain hash is enough to make a leaked store useless for
// logging in.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// SameHash compares two token hashes in constant time.
func SameHash(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// ErrUnauthenticated is a missing, unknown or wrong credential.
var ErrUnauthenticated = errors.New("not authenticated")
