package broker

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// Kafka ACL bindings live in group 0 with the users (store/acls.go); every
// node's authorizer reads them from its replica of group 0.

// aclCache is the ACL set as of a generation of the registry's store:
// every authorization reads it, without a lock; a reload takes one.
type aclCache struct {
	mu      sync.Mutex
	current atomic.Pointer[aclsAt]
}

type aclsAt struct {
	gen uint64
	set *auth.ACLSet
}

// ACLSet is the bindings in force on this node, for the authorizer
// (auth.ACLSet.Allows); nil when there are none, auth.Unreadable when they
// could not be read. It is loaded again only after a commit changed them.
func (s *Service) ACLSet() *auth.ACLSet {
	gen := s.registry().ACLGeneration()
	if c := s.acls.current.Load(); c != nil && c.gen == gen {
		return c.set
	}
	s.acls.mu.Lock()
	defer s.acls.mu.Unlock()
	if c := s.acls.current.Load(); c != nil && c.gen == gen {
		return c.set
	}
	acls, err := s.ACLs()
	if err != nil {
		if c := s.acls.current.Load(); c != nil {
			return c.set // keep the last set; the next call reads again
		}
		return auth.Unreadable // fail closed: a DENY is never skipped
	}
	set := auth.NewACLSet(acls)
	s.acls.current.Store(&aclsAt{gen: gen, set: set})
	return set
}

// ACLs lists every binding from this node's replica of group 0.
func (s *Service) ACLs() ([]auth.ACL, error) {
	var acls []auth.ACL
	err := s.registry().View(func(tx *store.Tx) (err error) { acls, err = tx.ACLs(); return err })
	return acls, err
}

// AlterACLs deletes and creates bindings in one group 0 entry (log format
// 10, ErrUpgradeInProgress before), sent to group 0's leader from a data
// group's service; the caller checked them. At most
// command.MaxACLsPerEntry of each.
func (s *Service) AlterACLs(create, del []auth.ACL) (command.AlterACLsResult, error) {
	if len(create) > command.MaxACLsPerEntry || len(del) > command.MaxACLsPerEntry {
		return command.AlterACLsResult{}, fmt.Errorf("%w: at most %d bindings created and %d deleted at once", ErrInvalid, command.MaxACLsPerEntry, command.MaxACLsPerEntry)
	}
	target := s
	if s.group != 0 {
		target = s.meta.Forwarding()
	}
	return apply(target, &command.AlterACLsCommand{Create: create, Delete: del})
}
