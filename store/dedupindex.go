package store

import (
	"fmt"
	"os"
	"runtime"
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

	// files keeps sealed segments' arrays on disk (dedupindexfile.go).
	files dedupIndexFiles

	// reads counts the log records lookups read, scans the segments a
	// load read (tests watch them).
	reads, scans atomic.Int64
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

	// whole says the index holds every record of the segment: it began
	// with the segment's first record (or came from its file). Only a
	// whole segment's array is written to a file, which later opens
	// trust instead of the log.
	whole bool
}

// A dedupEvent is a change to the logs that a transaction made, applied to
// the index once the transaction commits.
type dedupEvent struct {
	kind   byte
	stream uint64
	base   uint64   // dedupAdd: the active segment's base; dedupSeal: the segment's
	end    uint64   // dedupSeal: the segment's end
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

// newDedupIndex returns an empty index that keeps its files in dir ("":
// none) and reports a file it fails to write to log (nil: does not).
func newDedupIndex(dir string, log Logger) *dedupIndex {
	x := &dedupIndex{files: dedupIndexFiles{dir: dir, log: log}}
	x.reset()
	return x
}

// reset empties the index (the logs are about to be replaced or rebuilt).
func (x *dedupIndex) reset() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.clear()
}

// clear empties the index (x.mu held).
func (x *dedupIndex) clear() {
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

// fingerprintProbe is the filter word and bits of a fingerprint. The word
// comes from the fingerprint's own high bits (it is a hash already), so
// the fingerprints of a sealed segment, sorted, fill the filter in one
// sweep of memory rather than a cache miss each (a store holding 20 M ids
// opened in 0.92 s with a miss each, in 0.37-0.54 s so); the bits come
// from a hash of it.
func (f *dedupFilter) fingerprintProbe(fp uint32) (word uint64, mask uint64) {
	h := uint64(fp) * 0x9e3779b97f4a7c15
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 29
	return uint64(fp) * uint64(len(f.words)) >> 32, 1<<(h&63) | 1<<(h>>6&63) | 1<<(h>>12&63) | 1<<(h>>18&63)
}

func (f *dedupFilter) addFingerprint(fp uint32) { f.set(f.fingerprintProbe(fp)) }

func (f *dedupFilter) mayHoldFingerprint(fp uint32) bool { return f.has(f.fingerprintProbe(fp)) }

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
				if seg.whole {
					x.files.write(ev.stream, ev.base, ev.end, seg.sealed)
				}
			}
		case dedupDrop:
			x.dropBefore(ev.stream, ev.pos)
		}
	}
	x.maybeRebuildFilter()
}

// add files a record's fingerprints under its segment (x.mu held).
func (x *dedupIndex) add(stream, base, pos uint64, fps []uint32) {
	st := x.stream(stream)
	var seg *dedupSegIndex
	if n := len(st.segs); n > 0 && st.segs[n-1].base == base {
		seg = st.segs[n-1]
	} else {
		hint := int64(0) // the last segment's ids: the map need not grow
		if n > 0 {
			hint = st.segs[n-1].n
			st.segs[n-1].seal()
		}
		seg = &dedupSegIndex{base: base, active: make(map[uint32]uint32, hint), whole: pos == base}
		st.segs = append(st.segs, seg)
	}
	rel := uint32(pos - base)
	for _, fp := range fps {
		if old, ok := seg.active[fp]; ok {
			seg.more = append(seg.more, uint64(fp)<<32|uint64(old))
		}
		seg.active[fp] = rel
		x.filter.addFingerprint(fp)
		if x.next != nil {
			x.next.addFingerprint(fp)
		}
	}
	n := int64(len(fps))
	seg.n += n
	x.live += n
	x.keys += n
	x.nextKeys += n
}

// stream is a log's segments, made empty when the index has none (x.mu
// held).
func (x *dedupIndex) stream(id uint64) *dedupStreamIndex {
	st := x.streams[id]
	if st == nil {
		st = &dedupStreamIndex{}
		x.streams[id] = st
		i, _ := slices.BinarySearch(x.order, id)
		x.order = slices.Insert(x.order, i, id)
	}
	return st
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
	var dropped []uint64
	for len(st.segs) > 0 && st.segs[0].base < pos {
		x.live -= st.segs[0].n
		dropped = append(dropped, st.segs[0].base)
		st.segs = st.segs[1:]
	}
	if len(dropped) > 0 {
		x.files.remove(stream, dropped)
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
	if !x.filter.mayHoldFingerprint(fp) {
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
	sealed, active := x.fingerprints()
	x.building.Add(1)
	go func() {
		defer x.building.Done()
		n := fillFilter(f, sealed, active, 1) // beside the apply loop: one core
		x.mu.Lock()
		defer x.mu.Unlock()
		if x.next == f {
			x.filter, x.keys = f, n+x.nextKeys
			x.next = nil
		}
	}()
}

// wait waits for a filter build and the file writes to finish.
func (x *dedupIndex) wait() {
	x.building.Wait()
	x.files.wait()
}

// DedupIndexStats reports how many transactionIds the dedup logs hold
// (log format 4) and the size in bytes of the index's Bloom filter.
func (s *Store) DedupIndexStats() (ids int64, filterBytes int) {
	x := s.dedup
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.live, len(x.filter.words) * 8
}

// loadDedupIndex builds the index from the dedup logs as committed: a
// sealed segment's array is read from its index file, every other
// segment's records are read and their ids hashed (and a sealed segment
// read so gets its file). It runs when the store opens and after a restore
// or reset, before the store serves.
func (s *Store) loadDedupIndex() error {
	s.dedup.wait()
	s.dedup.reset()
	var manifest []SnapshotSegment
	active := map[uint64]uint64{} // stream -> its active segment's base
	err := s.View(func(tx *Tx) (err error) {
		if manifest, err = tx.dataManifest(); err != nil {
			return err
		}
		return tx.eachStreamHead(func(id uint64, h streamHead) error {
			active[id] = h.ActiveBase
			return nil
		})
	})
	if err != nil {
		return err
	}
	x := s.dedup
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := s.loadDedupSegments(x, manifest, active); err != nil {
		x.clear() // a part of the logs is no index: nothing is written from it
		return err
	}
	// The filter is sized for what was found.
	x.filter = newDedupFilter(dedupFilterWordsFor(x.live))
	sealedKeys, activeFPs := x.fingerprints()
	x.keys = fillFilter(x.filter, sealedKeys, activeFPs, runtime.GOMAXPROCS(0)) // the store does not serve yet
	return nil
}

// fingerprints lists what the index holds for a filter to be filled
// from: the sealed segments' arrays, which never change, and a copy of the
// active segments' fingerprints (x.mu held).
func (x *dedupIndex) fingerprints() (sealed [][]uint64, active []uint32) {
	for _, st := range x.streams {
		for _, seg := range st.segs {
			if seg.sealed != nil {
				sealed = append(sealed, seg.sealed)
			} else {
				seg.each(func(fp uint32) { active = append(active, fp) })
			}
		}
	}
	return sealed, active
}

// loadDedupSegments files every dedup segment of the manifest in x
// (x.mu held), from its index file or by reading its records.
func (s *Store) loadDedupSegments(x *dedupIndex, manifest []SnapshotSegment, active map[uint64]uint64) error {
	files := listDedupIndexFiles(x.files.dir)
	var fps []uint32
	for _, sg := range manifest {
		if !isDedupStream(sg.Stream) {
			continue
		}
		end := sg.Base + sg.Size
		sealed := sg.Base != active[sg.Stream]
		name := [2]uint64{sg.Stream, sg.Base}
		if sealed {
			keys, ok := readDedupIndexFile(files[name], sg.Stream, sg.Base, end)
			if ok {
				delete(files, name)
				x.addSealed(sg.Stream, sg.Base, keys)
				continue
			}
		}
		x.scans.Add(1)
		err := s.segs.Stream(sg.Stream).Scan(sg.Base, end, func(pos uint64, body []byte) error {
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
		if seg := x.segment(sg.Stream, sg.Base); sealed && seg != nil && seg.whole {
			seg.seal()
			delete(files, name)
			x.files.write(sg.Stream, sg.Base, end, seg.sealed)
		}
	}
	for _, path := range files { // files of no sealed segment
		os.Remove(path)
	}
	return nil
}

// fillFilter adds fingerprints to f, the sealed segments' from that many
// goroutines (the filter's words are atomic), and returns how many it
// added.
func fillFilter(f *dedupFilter, sealed [][]uint64, active []uint32, workers int) int64 {
	for _, fp := range active {
		f.addFingerprint(fp)
	}
	const chunk = 1 << 18
	work := make(chan []uint64)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for keys := range work {
				for _, k := range keys {
					f.addFingerprint(uint32(k >> 32))
				}
			}
		})
	}
	n := int64(len(active))
	for _, keys := range sealed {
		n += int64(len(keys))
		for len(keys) > 0 {
			c := min(len(keys), chunk)
			work <- keys[:c]
			keys = keys[c:]
		}
	}
	close(work)
	wg.Wait()
	return n
}

// addSealed files a sealed segment's array, read from its index file,
// after the stream's other segments (x.mu held).
func (x *dedupIndex) addSealed(stream, base uint64, keys []uint64) {
	st := x.stream(stream)
	if n := len(st.segs); n > 0 {
		st.segs[n-1].seal()
	}
	n := int64(len(keys))
	st.segs = append(st.segs, &dedupSegIndex{base: base, sealed: keys, n: n, whole: true})
	x.live += n
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
