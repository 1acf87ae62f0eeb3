package store

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/waggle-mq/waggle/dedup"
	"github.com/waggle-mq/waggle/segment"
)

// The dedup index finds a transactionId's record in the dedup logs
// (dedupstream.go). It is derived from the logs and node-local: built when
// the store opens or is restored, kept up to date by each commit, never
// replicated. It changes no answer, only where a lookup reads: every
// candidate it names is read from the log and checked, so a fingerprint
// collision costs a read, never a wrong answer.
//
// Per segment it holds each id's 32-bit fingerprint and its record's
// position in the segment: a map while the segment is active, a sorted
// array of fingerprint<<32|position (8 bytes an id) once it is sealed. In
// front of them all is one Bloom filter over every fingerprint, so a new
// id (nearly every push) costs one probe. The filter is sized at twice the
// ids held and rebuilt in the background from the index once it has taken
// in as many keys as it was sized for: pruned ids stay in it until then.
type dedupIndex struct {
	mu      sync.RWMutex
	streams map[uint64]*dedupStreamIndex
	order   []uint64 // stream ids, ascending
	live    int64    // ids held

	filter   *dedupFilter // over every id held (and some pruned ones)
	keys     int64        // keys filter holds
	next     *dedupFilter // being built, nil when none is
	nextKeys int64
	building sync.WaitGroup

	// reads counts the log records lookups read (tests watch it).
	reads atomic.Int64
}

// dedupStreamIndex is one dedup log's segments, oldest first.
type dedupStreamIndex struct {
	segs []*dedupSegIndex
}

// dedupSegIndex is one segment's ids.
type dedupSegIndex struct {
	base   uint64
	sealed []uint64 // fingerprint<<32 | position-base, sorted; nil while active

	active map[uint32]uint32 // fingerprint -> position-base of its newest record
	more   []uint64          // older fingerprint<<32|position-base pairs of a fingerprint in active
	n      int64
}

// A dedupEvent is a change to the logs that a transaction made, applied to
// the index once the transaction commits.
type dedupEvent struct {
	kind   byte
	stream uint64
	base   uint64   // dedupAdd: the active segment's base; dedupSeal: the segment's
	pos    uint64   // dedupAdd: the record's position; dedupDrop: drop what lies before
	fps    []uint32 // dedupAdd: the record's fingerprints
}

const (
	dedupAdd byte = iota + 1
	dedupSeal
	dedupDrop
)

// minDedupFilterKeys is the smallest filter's capacity (1 MiB).
const minDedupFilterKeys = 1 << 20

// maxDedupFilterWords bounds the filter at 64 MiB: past that many ids its
// false positives grow, and lookups read more records.
const maxDedupFilterWords = 1 << 23

func newDedupIndex() *dedupIndex {
	x := &dedupIndex{}
	x.reset()
	return x
}

// reset empties the index (the logs are about to be replaced or rebuilt).
func (x *dedupIndex) reset() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.streams = map[uint64]*dedupStreamIndex{}
	x.order = nil
	x.live = 0
	x.filter, x.keys = newDedupFilter(dedupFilterWordsFor(0)), 0
	x.next, x.nextKeys = nil, 0
}

// dedupFilterWordsFor sizes a filter for live ids: twice as many keys, at
// eight bits a key.
func dedupFilterWordsFor(live int64) int {
	return int(min(max(2*live, minDedupFilterKeys)/8, maxDedupFilterWords))
}

// filterHash spreads a fingerprint over the filter's 64 bits.
func filterHash(fp uint32) uint64 {
	h := uint64(fp) * 0x9e3779b97f4a7c15
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	return h ^ h>>29
}

// apply brings a transaction's changes to the logs into the index.
func (x *dedupIndex) apply(events []dedupEvent) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, ev := range events {
		switch ev.kind {
		case dedupAdd:
			x.add(ev.stream, ev.base, ev.pos, ev.fps)
		case dedupSeal:
			if seg := x.segment(ev.stream, ev.base); seg != nil {
				seg.seal()
			}
		case dedupDrop:
			x.dropBefore(ev.stream, ev.pos)
		}
	}
	x.maybeRebuildFilter()
}

// add files a record's fingerprints under its segment (x.mu held).
func (x *dedupIndex) add(stream, base, pos uint64, fps []uint32) {
	st := x.streams[stream]
	if st == nil {
		st = &dedupStreamIndex{}
		x.streams[stream] = st
		i, _ := slices.BinarySearch(x.order, stream)
		x.order = slices.Insert(x.order, i, stream)
	}
	var seg *dedupSegIndex
	if n := len(st.segs); n > 0 && st.segs[n-1].base == base {
		seg = st.segs[n-1]
	} else {
		hint := int64(0) // the last segment's ids: the map need not grow
		if n > 0 {
			hint = st.segs[n-1].n
			st.segs[n-1].seal()
		}
		seg = &dedupSegIndex{base: base, active: make(map[uint32]uint32, hint)}
		st.segs = append(st.segs, seg)
	}
	rel := uint32(pos - base)
	for _, fp := range fps {
		if old, ok := seg.active[fp]; ok {
			seg.more = append(seg.more, uint64(fp)<<32|uint64(old))
		}
		seg.active[fp] = rel
		h := filterHash(fp)
		x.filter.add(h)
		if x.next != nil {
			x.next.add(h)
		}
	}
	n := int64(len(fps))
	seg.n += n
	x.live += n
	x.keys += n
	x.nextKeys += n
}

func (x *dedupIndex) segment(stream, base uint64) *dedupSegIndex {
	if st := x.streams[stream]; st != nil {
		for _, seg := range st.segs {
			if seg.base == base {
				return seg
			}
		}
	}
	return nil
}

// dropBefore forgets a stream's segments that begin before pos (x.mu held).
func (x *dedupIndex) dropBefore(stream, pos uint64) {
	st := x.streams[stream]
	if st == nil {
		return
	}
	for len(st.segs) > 0 && st.segs[0].base < pos {
		x.live -= st.segs[0].n
		st.segs = st.segs[1:]
	}
}

// seal turns an active segment's map into its sorted array.
func (s *dedupSegIndex) seal() {
	if s.sealed != nil || s.active == nil {
		return
	}
	keys := make([]uint64, 0, len(s.active)+len(s.more))
	for fp, rel := range s.active {
		keys = append(keys, uint64(fp)<<32|uint64(rel))
	}
	keys = append(keys, s.more...)
	slices.Sort(keys)
	s.sealed, s.active, s.more = keys, nil, nil
}

// candidates calls fn with the positions of the records that may hold fp,
// newest first, until fn returns false.
func (s *dedupSegIndex) candidates(fp uint32, fn func(pos uint64) (bool, error)) (bool, error) {
	if s.sealed == nil {
		rel, ok := s.active[fp]
		if !ok {
			return true, nil
		}
		if more, err := fn(s.base + uint64(rel)); !more || err != nil {
			return more, err
		}
		for i := len(s.more) - 1; i >= 0; i-- {
			if uint32(s.more[i]>>32) == fp {
				if more, err := fn(s.base + uint64(uint32(s.more[i]))); !more || err != nil {
					return more, err
				}
			}
		}
		return true, nil
	}
	key := uint64(fp) << 32
	lo, _ := slices.BinarySearch(s.sealed, key)
	hi := lo
	for hi < len(s.sealed) && uint32(s.sealed[hi]>>32) == fp {
		hi++
	}
	for i := hi - 1; i >= lo; i-- {
		if more, err := fn(s.base + uint64(uint32(s.sealed[i]))); !more || err != nil {
			return more, err
		}
	}
	return true, nil
}

// lookup finds txID's newest record in the logs: the one stored last,
// across logs of different windows (a queue whose window changed).
func (x *dedupIndex) lookup(segs *segment.Dir, partitionID uint64, txID string) (best dedup.Entry, found bool, err error) {
	fp := dedupFingerprint(partitionID, []byte(txID))
	x.mu.RLock()
	defer x.mu.RUnlock()
	if !x.filter.mayContain(filterHash(fp)) {
		return dedup.Entry{}, false, nil
	}
	for _, id := range x.order {
		st := x.streams[id]
		stream := segs.Stream(id)
		windowMs := dedupStreamWindow(id)
		for i := len(st.segs) - 1; i >= 0; i-- {
			more, err := st.segs[i].candidates(fp, func(pos uint64) (bool, error) {
				x.reads.Add(1)
				body, err := stream.ReadRecord(pos)
				if err != nil {
					return false, fmt.Errorf("dedup log %d at %d: %w", id, pos, err)
				}
				r, err := decodeDedupLog(body)
				if err != nil {
					return false, err
				}
				e, ok, err := r.find(partitionID, txID, windowMs)
				if ok && (!found || e.StoredAtMs > best.StoredAtMs) {
					best, found = e, true
				}
				return !ok, err
			})
			if err != nil {
				return dedup.Entry{}, false, err
			}
			if !more {
				break // this log's newest record of the id
			}
		}
	}
	return best, found, nil
}

// maybeRebuildFilter starts a build of a new filter, sized for the ids
// held now, once the one in use holds as many keys as it was sized for
// (x.mu held). The build reads the sealed segments' arrays, which never
// change, without the lock; the active segments' fingerprints are copied
// under it; everything added meanwhile goes to both filters.
func (x *dedupIndex) maybeRebuildFilter() {
	if x.next != nil || x.keys <= int64(len(x.filter.words))*8 {
		return
	}
	f := newDedupFilter(dedupFilterWordsFor(x.live))
	x.next, x.nextKeys = f, 0
	var sealed [][]uint64
	var active []uint32
	for _, st := range x.streams {
		for _, seg := range st.segs {
			if seg.sealed != nil {
				sealed = append(sealed, seg.sealed)
			} else {
				seg.each(func(fp uint32) { active = append(active, fp) })
			}
		}
	}
	x.building.Add(1)
	go func() {
		defer x.building.Done()
		n := int64(len(active))
		for _, fp := range active {
			f.add(filterHash(fp))
		}
		for _, keys := range sealed {
			for _, k := range keys {
				f.add(filterHash(uint32(k >> 32)))
			}
			n += int64(len(keys))
		}
		x.mu.Lock()
		defer x.mu.Unlock()
		if x.next == f {
			x.filter, x.keys = f, n+x.nextKeys
			x.next = nil
		}
	}()
}

// wait waits for a filter build to finish.
func (x *dedupIndex) wait() { x.building.Wait() }

// DedupIndexStats reports how many transactionIds the dedup logs hold
// (log format 4) and the size in bytes of the index's Bloom filter.
func (s *Store) DedupIndexStats() (ids int64, filterBytes int) {
	x := s.dedup
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.live, len(x.filter.words) * 8
}

// loadDedupIndex builds the index from the dedup logs as committed: every
// record of every segment is read once. It runs when the store opens and
// after a restore or reset, before the store serves.
func (s *Store) loadDedupIndex() error {
	s.dedup.wait()
	s.dedup.reset()
	var manifest []SnapshotSegment
	err := s.View(func(tx *Tx) (err error) {
		manifest, err = tx.dataManifest()
		return err
	})
	if err != nil {
		return err
	}
	x := s.dedup
	x.mu.Lock()
	defer x.mu.Unlock()
	var fps []uint32
	for _, sg := range manifest {
		if !isDedupStream(sg.Stream) {
			continue
		}
		err := s.segs.Stream(sg.Stream).Scan(sg.Base, sg.Base+sg.Size, func(pos uint64, body []byte) error {
			r, err := decodeDedupLog(body)
			if err == nil {
				fps = fps[:0]
				err = r.ids(func(id, _ []byte, _ uint64) bool {
					fps = append(fps, dedupFingerprint(r.partitionID, id))
					return true
				})
			}
			if err != nil {
				return fmt.Errorf("dedup log %d at %d: %w", sg.Stream, pos, err)
			}
			x.add(sg.Stream, sg.Base, pos, slices.Clone(fps))
			return nil
		})
		if err != nil {
			return err
		}
	}
	// x.add sealed each segment as the next one began, so only each log's
	// last is a map. The filter is sized for what was found.
	x.filter, x.keys = newDedupFilter(dedupFilterWordsFor(x.live)), 0
	for _, st := range x.streams {
		for _, seg := range st.segs {
			seg.each(func(fp uint32) { x.filter.add(filterHash(fp)) })
			x.keys += seg.n
		}
	}
	return nil
}

// each calls fn with every fingerprint the segment holds.
func (s *dedupSegIndex) each(fn func(fp uint32)) {
	for _, k := range s.sealed {
		fn(uint32(k >> 32))
	}
	for fp := range s.active {
		fn(fp)
	}
	for _, k := range s.more {
		fn(uint32(k >> 32))
	}
}
