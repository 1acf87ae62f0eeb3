package store

import (
	"math"
	"sync"

	"slices"

	"github.com/dgraph-io/badger/v4"
)

// A catalog is every queue record, decoded, as of one commit. Reads of
// queue metadata (by name, by id, all of them in name order) are served
// from it instead of a badger read and a JSON decode each: a request that
// names one topic no longer pays for the 10,000 it does not name.
//
// It is a cache, not state. The store swaps in a new catalog when a write
// transaction that wrote queue records commits, under catalogMu, and a
// transaction takes the catalog together with its badger snapshot, so
// both show the same commit. A catalog never changes once made: a commit
// adds its changes to a small overlay (recent) and folds the overlay into
// a new base only once it grows past catalogFold, so a change costs a copy
// of the overlay, not of every queue.
type catalog struct {
	base   *catalogBase
	recent map[string]*Queue // changed since base; nil: deleted
	// The overlay's live queues by id and by topic id.
	recentByID      map[uint64]*Queue
	recentByTopicID map[[16]byte]*Queue

	sorted     sync.Once
	sortedList []string // every live name in order, made once (names)
}

type catalogBase struct {
	byName    map[string]*Queue
	byID      map[uint64]*Queue
	byTopicID map[[16]byte]*Queue
	names     []string // sorted
}

// catalogFold is how many changed queues an overlay holds before it is
// folded into a new base.
const catalogFold = 512

// newCatalog makes a catalog of queues, which it keeps (callers pass
// copies no one else holds).
func newCatalog(queues []*Queue) *catalog {
	b := &catalogBase{byName: make(map[string]*Queue, len(queues)), byID: make(map[uint64]*Queue, len(queues)),
		byTopicID: make(map[[16]byte]*Queue, len(queues))}
	for _, q := range queues {
		b.byName[q.Name], b.byID[q.ID], b.byTopicID[q.TopicID()] = q, q, q
		b.names = append(b.names, q.Name)
	}
	if !slices.IsSorted(b.names) { // a fold's are
		slices.Sort(b.names)
	}
	return &catalog{base: b}
}

// setCatalog swaps in c while no transaction opens.
func (s *Store) setCatalog(c *catalog) {
	s.catalogMu.Lock()
	s.catalog = c
	s.catalogMu.Unlock()
}

// QueueNames lists every queue's name in order, as of the last commit.
// The slice is shared and must not be changed; it is the same slice until
// a queue is created or deleted, so a caller may cache what it derives
// from it by the slice's identity.
func (s *Store) QueueNames() []string {
	s.catalogMu.RLock()
	c := s.catalog
	s.catalogMu.RUnlock()
	return c.names()
}

// loadCatalog reads every queue record from the store.
func (s *Store) loadCatalog() error {
	var qs []Queue
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		qs, err = (&Tx{txn: txn}).QueuesAfter("", math.MaxInt)
		return err
	})
	if err != nil {
		return err
	}
	own := make([]*Queue, len(qs))
	for i := range qs {
		own[i] = &qs[i]
	}
	s.setCatalog(newCatalog(own))
	return nil
}

// queue returns the named queue.
func (c *catalog) queue(name string) (Queue, bool) {
	q, changed := c.recent[name]
	if !changed {
		q = c.base.byName[name]
	}
	if q == nil {
		return Queue{}, false
	}
	return q.clone(), true
}

// queueByID returns the queue with id.
func (c *catalog) queueByID(id uint64) (Queue, bool) {
	return c.find(c.recentByID[id], c.base.byID[id])
}

// queueByTopicID returns the queue whose Kafka topic id is id.
func (c *catalog) queueByTopicID(id [16]byte) (Queue, bool) {
	return c.find(c.recentByTopicID[id], c.base.byTopicID[id])
}

// find returns the overlay's match, or else base's unless the overlay
// changed it since.
func (c *catalog) find(recent, q *Queue) (Queue, bool) {
	if recent != nil && c.recent[recent.Name] == recent {
		return recent.clone(), true
	}
	if q == nil {
		return Queue{}, false
	}
	if _, changed := c.recent[q.Name]; changed {
		return Queue{}, false // deleted, or now another queue's name
	}
	return q.clone(), true
}

// after lists up to limit queues in name order, from the one after the
// named queue ("": from the first).
func (c *catalog) after(after string, limit int) []Queue {
	names := c.names()
	i := 0
	if after != "" {
		i, _ = slices.BinarySearch(names, after)
		if i < len(names) && names[i] == after {
			i++
		}
	}
	var out []Queue
	for ; i < len(names) && len(out) < limit; i++ {
		q, _ := c.queue(names[i])
		out = append(out, q)
	}
	return out
}

// names lists the catalog's live queue names in order: base's, merged
// with the overlay's once per catalog.
func (c *catalog) names() []string {
	if len(c.recent) == 0 {
		return c.base.names
	}
	c.sorted.Do(func() {
		var added []string
		for n, q := range c.recent {
			if q != nil {
				added = append(added, n)
			}
		}
		slices.Sort(added)
		out := make([]string, 0, len(c.base.names)+len(added))
		i := 0
		for _, n := range c.base.names {
			for ; i < len(added) && added[i] < n; i++ {
				out = append(out, added[i])
			}
			if _, changed := c.recent[n]; !changed {
				out = append(out, n)
			}
		}
		c.sortedList = append(out, added[i:]...)
	})
	return c.sortedList
}

// with returns the catalog with changes applied (nil: deleted). The
// queues in changes become the catalog's.
func (c *catalog) with(changes map[string]*Queue) *catalog {
	next := &catalog{base: c.base, recent: make(map[string]*Queue, len(c.recent)+len(changes)),
		recentByID: make(map[uint64]*Queue, len(c.recentByID)+len(changes)), recentByTopicID: make(map[[16]byte]*Queue, len(c.recentByTopicID)+len(changes))}
	for n, q := range c.recent {
		next.recent[n] = q
	}
	for id, q := range c.recentByID {
		next.recentByID[id] = q
	}
	for id, q := range c.recentByTopicID {
		next.recentByTopicID[id] = q
	}
	for n, q := range changes {
		if old := next.recent[n]; old != nil { // replaced: its ids go (a name deleted and created again has a new id)
			delete(next.recentByID, old.ID)
			delete(next.recentByTopicID, old.TopicID())
		}
		next.recent[n] = q
		if q != nil {
			next.recentByID[q.ID], next.recentByTopicID[q.TopicID()] = q, q
		}
	}
	if len(next.recent) < catalogFold {
		return next
	}
	// Fold: the queues are shared, never changed, so no copy is needed.
	names := next.names()
	all := make([]*Queue, len(names))
	for i, n := range names {
		if q, changed := next.recent[n]; changed {
			all[i] = q
		} else {
			all[i] = next.base.byName[n]
		}
	}
	return newCatalog(all)
}

// clone copies q so that no caller shares its optional settings.
func (q Queue) clone() Queue {
	q.LeaseTimeSeconds = clonePtr(q.LeaseTimeSeconds)
	q.RetryLimit = clonePtr(q.RetryLimit)
	q.DeadLetterQueue = clonePtr(q.DeadLetterQueue)
	q.DelayedProcessingSeconds = clonePtr(q.DelayedProcessingSeconds)
	return q
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
