package store

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
)

// A dedup filter lets a push skip the LSM read for a transactionId the
// store has never recorded, which is nearly every push: a lookup that
// misses walks badger's memtables and a table per level.
//
// It is a Bloom filter over the keys of the dedup records (families 0x06
// and 0x08), blocked so that one key's bits share one 64-bit word (one
// cache miss a probe). It is a cache, not state: it changes no answer,
// only whether a lookup reads badger, so nothing about it is replicated
// and every replica keeps its own. It only ever answers "absent" for a
// key no write transaction has set since the filter began to be built
// and that was not in the store when the build read it: bits are never
// cleared, so a pruned record only costs a read that finds nothing, until
// the next build.
//
// Builds run in the background: when the store opens, after a restore or
// reset, and once the keys added since the last build outnumber what that
// build found (or half the filter's capacity, whichever is more), so
// pruned records do not fill it. A filter is consulted only once its build
// is done, and not while what it holds is past its capacity (its false
// positives would make it cost more than it saves).
//
// Memory: dedupFilterWords x 8 bytes, fixed.

// dedupFilterWords is the filter's size in 64-bit words: 8 MiB, which
// holds about 8 million keys at 8 bits a key (a false positive rate of
// about 3 %, so 97 % of new ids skip the read).
const dedupFilterWords = 1 << 20

// dedupFilterCapacity is how many keys the filter holds before it stops
// being consulted.
const dedupFilterCapacity = dedupFilterWords * 64 / 8

// dedupFilter is one filter and its build's progress.
type dedupFilter struct {
	words []atomic.Uint64
	added atomic.Int64 // keys committed since the build began
	found int64        // keys the build read (set before it is put in use)
}

// newDedupFilter returns an empty filter of the given size in 64-bit
// words (at most 1<<32).
func newDedupFilter(words int) *dedupFilter {
	return &dedupFilter{words: make([]atomic.Uint64, words)}
}

// probe is the word and bit mask of a key's hash: the high 32 bits pick
// the word, four 6-bit fields of the low ones the bits.
func (f *dedupFilter) probe(h uint64) (word uint64, mask uint64) {
	word = (h >> 32) * uint64(len(f.words)) >> 32
	mask = 1<<(h&63) | 1<<(h>>6&63) | 1<<(h>>12&63) | 1<<(h>>18&63)
	return word, mask
}

func (f *dedupFilter) add(h uint64) { f.set(f.probe(h)) }

func (f *dedupFilter) mayContain(h uint64) bool { return f.has(f.probe(h)) }

// set sets the bits mask of word w.
func (f *dedupFilter) set(w, mask uint64) {
	if f.words[w].Load()&mask != mask {
		f.words[w].Or(mask)
	}
}

// has reports whether the bits mask of word w are set.
func (f *dedupFilter) has(w, mask uint64) bool { return f.words[w].Load()&mask == mask }

// useful reports whether the filter, built, may be consulted.
func (f *dedupFilter) useful() bool {
	return f.found+f.added.Load() <= dedupFilterCapacity
}

// dedupFilters is a store's filter in use and the one being built.
type dedupFilters struct {
	seed    maphash.Seed
	current atomic.Pointer[dedupFilter] // built, consulted; nil when none is
	next    atomic.Pointer[dedupFilter] // being built; nil when none is

	// reads counts the dedup lookups that read badger (tests watch it).
	reads atomic.Int64

	mu      sync.Mutex // serialises starting and finishing builds
	db      *badger.DB
	stop    chan struct{}
	running sync.WaitGroup
}

func newDedupFilters(db *badger.DB) *dedupFilters {
	return &dedupFilters{seed: maphash.MakeSeed(), db: db, stop: make(chan struct{})}
}

func (fs *dedupFilters) hash(key []byte) uint64 { return maphash.Bytes(fs.seed, key) }

// mayContain reports whether a dedup record key may be in the store: false
// only when a finished filter is sure it is not.
func (fs *dedupFilters) mayContain(h uint64) bool {
	f := fs.current.Load()
	return f == nil || !f.useful() || f.mayContain(h)
}

// none reports whether a finished filter found no dedup record key, with
// none added since: the store has no dedup record (log format 4 writes
// none), so a lookup need not even hash its key.
func (fs *dedupFilters) none() bool {
	f := fs.current.Load()
	return f != nil && f.found == 0 && f.added.Load() == 0
}

// drained starts a build when the store may hold no dedup record any more
// (the expiry index came up empty) but the filter in use holds keys, so
// that lookups stop probing it.
func (fs *dedupFilters) drained() {
	if f := fs.current.Load(); f != nil && fs.next.Load() == nil && (f.found > 0 || f.added.Load() > 0) {
		fs.rebuild()
	}
}

// add records keys a write transaction set: in the filter in use and in the
// one being built. A transaction adds its keys when it sets them (so its
// own later lookups see them) and again once it has committed (committed
// true, which counts them), which is what makes a build race-free: a key
// committed after the build's read snapshot is added after that snapshot
// was taken, so after the filter being built was registered.
func (fs *dedupFilters) add(committed bool, hs ...uint64) {
	for _, f := range [2]*dedupFilter{fs.current.Load(), fs.next.Load()} {
		if f == nil {
			continue
		}
		for _, h := range hs {
			f.add(h)
		}
		if committed {
			f.added.Add(int64(len(hs)))
		}
	}
}

// maybeRebuild starts a build when the filter in use has taken in more
// keys than its build found (or half its capacity): by then many of its
// keys may have been pruned.
func (fs *dedupFilters) maybeRebuild() {
	f := fs.current.Load()
	if f == nil || fs.next.Load() != nil {
		return
	}
	if f.added.Load() > max(f.found, dedupFilterCapacity/2) {
		fs.rebuild()
	}
}

// forget drops every filter and waits for a build to give up, before the
// store's keys are replaced (a restore or reset): until the next build is
// done, every lookup reads badger.
func (fs *dedupFilters) forget() {
	fs.mu.Lock()
	fs.current.Store(nil)
	fs.next.Store(nil)
	fs.mu.Unlock()
	fs.running.Wait()
}

// rebuild starts building a new filter from the store's keys; the filter
// in use, if any, serves until it is done.
func (fs *dedupFilters) rebuild() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f := newDedupFilter(dedupFilterWords)
	fs.next.Store(f) // a build already running finds it replaced, and gives up
	select {
	case <-fs.stop:
		return
	default:
	}
	fs.running.Add(1)
	go func() {
		defer fs.running.Done()
		fs.build(f)
	}()
}

// build reads every dedup record key into f, then puts f in use, unless
// another build replaced it meanwhile or the store is closing.
func (fs *dedupFilters) build(f *dedupFilter) {
	// The snapshot is taken after f was registered (see add).
	txn := fs.db.NewTransaction(false)
	defer txn.Discard()
	var found int64
	for _, family := range []byte{familyDedup, familyDedupLong} {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{family}})
		for it.Rewind(); it.Valid(); it.Next() {
			f.add(fs.hash(it.Item().Key()))
			found++
			if found%4096 == 0 && fs.abandoned(f) {
				it.Close()
				return
			}
		}
		it.Close()
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.next.Load() != f {
		return
	}
	f.found = found // f.added counts what came in meanwhile too: a few twice
	fs.current.Store(f)
	fs.next.Store(nil)
}

// abandoned reports whether a build should stop: the store is closing, or
// a newer build replaced it.
func (fs *dedupFilters) abandoned(f *dedupFilter) bool {
	select {
	case <-fs.stop:
		return true
	default:
		return fs.next.Load() != f
	}
}

// close stops any build and waits for it (before badger closes).
func (fs *dedupFilters) close() {
	fs.mu.Lock()
	select {
	case <-fs.stop:
	default:
		close(fs.stop)
	}
	fs.mu.Unlock()
	fs.running.Wait()
}
