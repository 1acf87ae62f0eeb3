package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
	"github.com/dgraph-io/ristretto/v2/z"

	"github.com/waggle-mq/waggle/fault"
	"github.com/waggle-mq/waggle/segment"
)

// Snapshot stream format, version 2:
//
//	"WGLSNAP" 0x02
//	repeated: uvarint(len(key)) key uvarint(len(value)) value
//	uvarint(0)                       end of the keys (keys are never empty)
//	repeated: uvarint(1) uvarint(stream) uvarint(base) uvarint(size) size bytes
//	       or uvarint(2) uvarint(stream) uvarint(base) uvarint(size) size bytes
//	uvarint(0)                       end of the segments
//
// The keys are badger's (the metadata and indexes); the segments are the
// message data, each the first size bytes of a segment file. Tag 2 is the
// sidecar of the segment before it (refs.go): each segment holding refs is
// followed by one with every batch they name, so a follower needs nothing
// of the leader's raft log; a binary from before log format 5 refuses
// the tag, and no such stream reaches it (the format waits for every
// member). Version 1
// (before segment files) has the keys only; Restore reads both. A newer
// binary that changes the stream bumps the version byte and keeps reading
// the older ones.
var (
	snapshotMagic   = []byte("WGLSNAP\x02")
	snapshotMagicV1 = []byte("WGLSNAP\x01")
)

// maxSnapshotField bounds a key or value read from a snapshot stream, so a
// corrupt stream cannot make Restore allocate without limit.
const maxSnapshotField = 64 << 20

// Snapshot is a point-in-time view of the whole store, taken by Snapshot and
// written out later, while writes go on: a read transaction for the keys
// and hard links to the segment files as they were, so that retention or
// a delete cannot take them away meanwhile. Taking one costs time in
// proportion to the metadata and the number of segments, not the data.
type Snapshot struct {
	txn *badger.Txn
	// Segments lists the data as of the snapshot; PinDir holds their links
	// (and those of the sidecars the store had for them).
	Segments []SnapshotSegment
	PinDir   string

	refs *refData // the snapshot holds its log floor there until released
}

// SnapshotSegment is one segment file in a snapshot: its first Size bytes
// at Path hold positions [Base, Base+Size) of the stream. Refs and MinRef
// say how many refs it holds and the raft index of the first. With
// Sidecar it is instead the segment's sidecar, Size bytes in all (in a
// snapshot received from a leader).
type SnapshotSegment struct {
	Stream  uint64 `json:"stream"`
	Base    uint64 `json:"base"`
	Size    uint64 `json:"size"`
	Path    string `json:"path"` // relative to the directory holding the links
	Refs    uint32 `json:"refs,omitempty"`
	MinRef  uint64 `json:"minRef,omitempty"`
	Sidecar bool   `json:"sidecar,omitempty"`
	// RefBytes is the bytes its refs name, so the size of its sidecar is
	// known without reading it (0 in lists written before it was kept).
	RefBytes uint64 `json:"refBytes,omitempty"`
}

var pinSeq atomic.Uint64

// Snapshot opens a read transaction at the current state and links the
// segment files it points into. It must not run concurrently with a
// write transaction's commit (the state machine calls it between batches).
// Call Release when done with it.
func (s *Store) Snapshot() (*Snapshot, error) {
	sn := &Snapshot{txn: s.db.NewTransaction(false), refs: s.refs}
	segs, err := (&Tx{txn: sn.txn}).dataManifest()
	if err != nil {
		sn.Release()
		return nil, err
	}
	if len(segs) == 0 {
		return sn, nil
	}
	sn.PinDir = filepath.Join(s.segs.Root(), pinDirName, fmt.Sprint(pinSeq.Add(1)))
	if err := os.MkdirAll(sn.PinDir, 0o755); err != nil {
		sn.Release()
		return nil, err
	}
	for i := range segs {
		sg := &segs[i]
		sg.Path = linkName(sg.Stream, sg.Base)
		src := s.segs.Stream(sg.Stream).Path(sg.Base)
		if err := os.Link(src, filepath.Join(sn.PinDir, sg.Path)); err != nil {
			sn.Release()
			return nil, fmt.Errorf("snapshot: pin segment: %w", err)
		}
		if sg.Refs == 0 {
			continue
		}
		side := s.segs.Stream(sg.Stream).SidecarPath(sg.Base)
		if err := os.Link(side, filepath.Join(sn.PinDir, sidecarLinkName(sg.Stream, sg.Base))); err != nil && !errors.Is(err, os.ErrNotExist) {
			sn.Release()
			return nil, fmt.Errorf("snapshot: pin sidecar: %w", err)
		}
	}
	sn.Segments = segs
	s.refs.mu.Lock()
	s.refs.pinned[sn] = SnapshotLogFloor(sn.PinDir, segs)
	s.refs.mu.Unlock()
	return sn, nil
}

// SnapshotLogFloor is the lowest raft index that writing out the snapshot
// whose links are in dir still reads from the raft log (math.MaxUint64:
// none): for each segment holding refs, its first ref past what the
// sidecar beside it holds.
func SnapshotLogFloor(dir string, segs []SnapshotSegment) uint64 {
	floor := uint64(math.MaxUint64)
	sidecars := map[[2]uint64]bool{}
	for _, sg := range segs {
		if sg.Sidecar {
			sidecars[[2]uint64{sg.Stream, sg.Base}] = true
		}
	}
	for _, sg := range segs {
		if sg.Refs == 0 || sg.Sidecar || sidecars[[2]uint64{sg.Stream, sg.Base}] {
			continue // a received sidecar holds every ref
		}
		side, _ := readSidecarHeader(filepath.Join(dir, sidecarLinkName(sg.Stream, sg.Base)))
		floor = min(floor, logNeed(segmentRefs{Refs: sg.Refs, MinRef: sg.MinRef}, side))
	}
	return floor
}

// sidecarLinkName is what a snapshot calls a segment's sidecar beside it.
func sidecarLinkName(stream, base uint64) string { return fmt.Sprintf("%d-%d.ref", stream, base) }

// pinDirName is where snapshots keep their links until written out.
const pinDirName = ".pinned"

// dataManifest lists every stream's segments as the transaction sees them:
// the sealed ones from their records, then the active one up to the
// committed end.
func (t *Tx) dataManifest() ([]SnapshotSegment, error) {
	var out []SnapshotSegment
	err := t.eachStreamHead(func(id uint64, h streamHead) error {
		err := t.scan(segmentPrefix(id), nil, func(k, v []byte) (bool, error) {
			sr, err := decodeSegmentRecord(k, v)
			out = append(out, SnapshotSegment{Stream: id, Base: sr.Base, Size: sr.End - sr.Base, Refs: sr.Refs, MinRef: sr.MinRef, RefBytes: sr.RefBytes})
			return err == nil, err
		})
		if h.End > h.ActiveBase {
			out = append(out, SnapshotSegment{Stream: id, Base: h.ActiveBase, Size: h.End - h.ActiveBase, Refs: h.ActiveRefs, MinRef: h.ActiveMinRef, RefBytes: h.RefBytes - h.BaseRefBytes})
		}
		return err
	})
	return out, err
}

// WriteTo writes the whole snapshot stream to w: WriteState, then the
// segment section with the data itself.
func (sn *Snapshot) WriteTo(w io.Writer) (int64, error) {
	n, err := sn.WriteState(w)
	if err != nil {
		return n, err
	}
	section, _, err := SegmentSection(sn.PinDir, sn.Segments, sn.refs.log)
	if err != nil {
		return n, err
	}
	defer section.Close()
	m, err := io.Copy(w, section)
	return n + m, err
}

// WriteState writes the stream up to the segment section: the header and
// every key and value.
func (sn *Snapshot) WriteState(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := &countingWriter{w: bw}
	cw.Write(snapshotMagic)
	err := sn.eachKey(func(k, v []byte) error {
		cw.field(k)
		cw.field(v)
		return cw.err
	})
	if err != nil {
		return cw.n, err
	}
	cw.Write([]byte{0})
	if cw.err != nil {
		return cw.n, cw.err
	}
	return cw.n, bw.Flush()
}

// eachKey calls fn with every key and value the snapshot holds, in
// badger's order, until fn returns an error.
func (sn *Snapshot) eachKey(fn func(k, v []byte) error) error {
	it := sn.txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 100})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		err := item.Value(func(v []byte) error { return fn(item.Key(), v) })
		if err != nil {
			return err
		}
	}
	return nil
}

// Release ends the snapshot's read transaction and removes its links, if
// they were not handed on.
func (sn *Snapshot) Release() {
	sn.txn.Discard()
	if sn.refs != nil {
		sn.refs.mu.Lock()
		delete(sn.refs.pinned, sn)
		sn.refs.mu.Unlock()
	}
	if sn.PinDir != "" {
		os.RemoveAll(sn.PinDir)
	}
}

// SegmentSection returns the segment section of a snapshot stream, read
// from the files listed (Path relative to dir), and its length. A segment
// holding refs is followed by its sidecar: the one listed (a snapshot
// received whole), else one built from the segment's refs, reading each
// batch from the sidecar linked beside it when that holds it, else from
// log. Building needs each such segment's refs counted first.
func SegmentSection(dir string, segs []SnapshotSegment, log RaftLog) (io.ReadCloser, int64, error) {
	var parts []sectionPart
	listed := map[[2]uint64]bool{}
	for _, sg := range segs {
		if sg.Sidecar {
			listed[[2]uint64{sg.Stream, sg.Base}] = true
		}
	}
	size := int64(1)
	for _, sg := range segs {
		part := sectionPart{seg: sg}
		parts = append(parts, part)
		size += int64(len(sectionHeader(nil, sg))) + int64(sg.Size)
		if sg.Refs == 0 || sg.Sidecar || listed[[2]uint64{sg.Stream, sg.Base}] {
			continue
		}
		var sideSize uint64
		if sg.RefBytes > 0 {
			sideSize = sidecarBytes(int(sg.Refs), sg.RefBytes)
		} else { // an older list: count the refs' bytes in the segment
			refs, err := segmentRefList(filepath.Join(dir, sg.Path), sg)
			if err != nil {
				return nil, 0, err
			}
			sideSize = sidecarSize(refs)
		}
		side := SnapshotSegment{Stream: sg.Stream, Base: sg.Base, Size: sideSize, Refs: sg.Refs, Sidecar: true}
		parts = append(parts, sectionPart{seg: side, build: true, segSize: sg.Size})
		size += int64(len(sectionHeader(nil, side))) + int64(side.Size)
	}
	return &sectionReader{dir: dir, parts: parts, log: log}, size, nil
}

// segmentRefList reads the refs of segment sg (linked at path), as many as
// the snapshot says it holds.
func segmentRefList(path string, sg SnapshotSegment) ([]BatchRef, error) {
	refs, err := scanRefs(path, sg.Base, sg.Base+sg.Size)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if len(refs) != int(sg.Refs) {
		return nil, fmt.Errorf("snapshot: segment %d of stream %d holds %d refs, its record says %d: %w", sg.Base, sg.Stream, len(refs), sg.Refs, segment.ErrCorrupt)
	}
	return refs, nil
}

// sectionPart is one file of a segment section; build: a sidecar made from
// its segment's refs as it is read.
type sectionPart struct {
	seg     SnapshotSegment
	build   bool
	segSize uint64 // of the segment whose sidecar is built
}

func sectionHeader(b []byte, sg SnapshotSegment) []byte {
	if sg.Sidecar {
		b = binary.AppendUvarint(b, 2)
	} else {
		b = binary.AppendUvarint(b, 1)
	}
	b = binary.AppendUvarint(b, sg.Stream)
	b = binary.AppendUvarint(b, sg.Base)
	return binary.AppendUvarint(b, sg.Size)
}

// sectionReader produces a segment section, one file at a time.
type sectionReader struct {
	dir   string
	parts []sectionPart
	log   RaftLog
	pend  []byte       // header bytes not yet read
	file  io.Reader    // the current file's remaining bytes
	close func() error // closes the current file
	done  bool
}

func (r *sectionReader) Read(p []byte) (int, error) {
	for {
		if len(r.pend) > 0 {
			n := copy(p, r.pend)
			r.pend = r.pend[n:]
			return n, nil
		}
		if r.file != nil {
			n, err := r.file.Read(p)
			if err == io.EOF {
				r.closeFile()
				if n > 0 {
					return n, nil
				}
				continue
			}
			return n, err
		}
		if len(r.parts) == 0 {
			if r.done {
				return 0, io.EOF
			}
			r.done, r.pend = true, []byte{0}
			continue
		}
		part := r.parts[0]
		r.parts = r.parts[1:]
		sg := part.seg
		var src io.Reader
		if part.build {
			pr := r.buildSidecar(sg, part.segSize)
			src, r.close = pr, pr.Close
		} else {
			f, err := os.Open(filepath.Join(r.dir, sg.Path))
			if err != nil {
				return 0, fmt.Errorf("snapshot: segment: %w", err)
			}
			src, r.close = f, f.Close
		}
		r.file = &exactReader{r: io.LimitReader(src, int64(sg.Size)), left: int64(sg.Size)}
		r.pend = sectionHeader(nil, sg)
	}
}

// buildSidecar streams the sidecar of the segment linked in r.dir.
func (r *sectionReader) buildSidecar(side SnapshotSegment, segSize uint64) *io.PipeReader {
	pr, pw := io.Pipe()
	seg := filepath.Join(r.dir, linkName(side.Stream, side.Base))
	local := filepath.Join(r.dir, sidecarLinkName(side.Stream, side.Base))
	go func() {
		err := func() error {
			refs, err := segmentRefList(seg, SnapshotSegment{Stream: side.Stream, Base: side.Base, Size: segSize, Refs: side.Refs})
			if err != nil {
				return err
			}
			if n := sidecarSize(refs); n != side.Size {
				return fmt.Errorf("snapshot: the refs of segment %d of stream %d name a sidecar of %d bytes, its records say %d: %w", side.Base, side.Stream, n, side.Size, segment.ErrCorrupt)
			}
			h, _ := readSidecarHeader(local)
			have, err := openSidecarScan(local, h)
			if err != nil {
				return err
			}
			defer have.Close()
			fromLog := logReader{log: r.log}
			return encodeSidecar(pw, side.Stream, side.Base, refs, func(k int, ref BatchRef) ([]byte, error) {
				if uint32(k) < h.Count {
					return have.next(ref)
				}
				return fromLog.batch(ref)
			})
		}()
		pw.CloseWithError(err)
	}()
	return pr
}

func (r *sectionReader) closeFile() {
	if r.close != nil {
		r.close()
	}
	r.close, r.file = nil, nil
}

func (r *sectionReader) Close() error {
	r.closeFile()
	return nil
}

// exactReader fails when its source ends before left bytes: a segment
// file shorter than the snapshot says is damage, not a short segment.
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if err == io.EOF && e.left > 0 {
		return n, fmt.Errorf("snapshot: a segment file is %d bytes short", e.left)
	}
	return n, err
}

// SnapshotAppliedIndex reads just the head of a snapshot stream and returns
// the raft index the snapshotted state had applied. The meta record's key
// sorts first, so this costs one record, not the whole stream.
func SnapshotAppliedIndex(r io.Reader) (uint64, error) {
	br := bufio.NewReader(r)
	if _, err := readMagic(br); err != nil {
		return 0, err
	}
	k, err := readField(br)
	if err != nil {
		return 0, fmt.Errorf("snapshot head: %w", err)
	}
	if string(k) != string(metaKey()) {
		return 0, nil // a snapshot of a store that had applied nothing
	}
	v, err := readField(br)
	if err != nil {
		return 0, fmt.Errorf("snapshot head: %w", err)
	}
	m, err := decodeMeta(v)
	return m.AppliedIndex, err
}

// readMagic reads the stream's header and returns its version.
func readMagic(br *bufio.Reader) (int, error) {
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil {
		return 0, fmt.Errorf("read snapshot header: %w", err)
	}
	switch string(magic) {
	case string(snapshotMagic):
		return 2, nil
	case string(snapshotMagicV1):
		return 1, nil
	}
	return 0, fmt.Errorf("not a waggle snapshot (header %q)", magic)
}

// Restore replaces the whole store with the snapshot read from r: the
// keys, then the segment files (a local file that already holds a
// segment's bytes is kept), then every stream or segment file the snapshot
// does not name is removed. On error the store may hold part of the
// snapshot; the caller must not serve from it.
func (s *Store) Restore(r io.Reader) error { return s.RestoreLinking(r, SegmentFiles{}) }

// SegmentFiles are a snapshot's segment files on this node's disk (Path
// relative to Dir): where the snapshot being restored keeps its data.
type SegmentFiles struct {
	Dir  string
	Segs []SnapshotSegment
}

// ErrRestoreIncomplete wraps the error of a restore that failed after it
// began replacing the store: the store holds part of the snapshot, claims
// no applied index, and must neither serve nor take entries until a
// restore succeeds.
var ErrRestoreIncomplete = errors.New("the store holds part of a snapshot (a restore failed part way)")

// RestoreLinking is Restore, hard-linking the segments that files hold
// (the same stream, base and size) into place instead of writing the
// bytes r carries for them again: restoring a snapshot received from a
// leader then writes its data once.
func (s *Store) RestoreLinking(r io.Reader, files SegmentFiles) (err error) {
	type fileKey struct {
		stream, base, size uint64
		sidecar            bool
	}
	offered := map[fileKey]string{}
	for _, sg := range files.Segs {
		offered[fileKey{sg.Stream, sg.Base, sg.Size, sg.Sidecar}] = filepath.Join(files.Dir, sg.Path)
	}
	br := bufio.NewReaderSize(r, 1<<20)
	version, err := readMagic(br)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w: %w", ErrRestoreIncomplete, err)
		}
	}()
	s.forgetPruneFloor()
	s.filters.forget() // its keys are about to be replaced
	defer s.filters.rebuild()
	defer s.refs.forget() // the sidecars are replaced too
	// Readers meanwhile find no queue; once the keys are in (or the
	// restore failed part way), the catalog is what badger holds.
	s.setCatalog(newCatalog(nil))
	defer func() {
		s.aclGen.n.Add(1)
		if lerr := s.loadCatalog(); err == nil {
			err = lerr
		}
	}()
	meta, err := s.restoreKeys(br)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	keep := map[uint64][]uint64{}
	for version >= 2 {
		sg, more, err := readSegmentHeader(br)
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		if !more {
			break
		}
		from := offered[fileKey{sg.Stream, sg.Base, sg.Size, sg.Sidecar}]
		if sg.Sidecar {
			if err := s.segs.Stream(sg.Stream).InstallSidecar(sg.Base, sg.Size, br, from); err != nil {
				return fmt.Errorf("restore: %w", err)
			}
			continue
		}
		if err := s.segs.Stream(sg.Stream).Install(sg.Base, sg.Size, br, from); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		keep[sg.Stream] = append(keep[sg.Stream], sg.Base)
	}
	if err := s.segs.Retain(keep); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := s.recoverStreams(); err != nil {
		return err
	}
	if err := s.loadDedupIndex(); err != nil {
		return err
	}
	return s.putHeldKeys(meta)
}

// restoreKeys replaces every key in badger with the key section br holds,
// all but the meta family's, which it returns for the caller to put in
// once the rest of the snapshot is in place (putHeldKeys).
//
// The keys come in badger's order (a snapshot writes them from an
// iterator), so badger's stream writer builds its tables from them
// directly: no write-ahead log, memtables or compactions, which cost
// several times as much for the millions of keys of a million partitions.
// A section out of order fails the restore.
//
// The stream writer adds each table to badger as soon as it is built, so
// a restore cut short (an error, a crash) leaves a prefix of the keys in.
// The meta record, which sorts first, holds the applied index: written
// with them, it would make that prefix look like the whole snapshot, and a
// restarted node would serve it. Held back, the store claims index 0 until
// the restore is done, and the node restores again before it serves.
func (s *Store) restoreKeys(br *bufio.Reader) (held []heldKey, err error) {
	sw := s.db.NewStreamWriter()
	defer sw.Cancel()                    // unblocks badger's writes after a failure
	if err := sw.Prepare(); err != nil { // drops every key
		return nil, fmt.Errorf("drop old state: %w", err)
	}
	buf := z.NewBuffer(restoreBufferBytes+restoreBufferBytes/4, "waggle.restore")
	defer buf.Release()
	err = readKeys(br, func(k, v []byte) error {
		if k[0] == familyMeta {
			held = append(held, heldKey{bytes.Clone(k), bytes.Clone(v)})
			return nil
		}
		if k[0] == familyKV && fault.Is("restore-drop-kv", 10) {
			return nil // a restore that loses KV rows (a test-only fault)
		}
		badger.KVToBuffer(&pb.KV{Key: k, Value: v, Version: 1}, buf)
		if buf.LenNoPadding() < restoreBufferBytes {
			return nil
		}
		err := sw.Write(buf)
		buf.Reset()
		return err
	})
	if err == nil {
		err = sw.Write(buf)
	}
	if err == nil {
		err = sw.Flush()
	}
	return held, err
}

// heldKey is a key and value restoreKeys held back.
type heldKey struct{ key, value []byte }

// putHeldKeys writes the keys restoreKeys held back, ending a restore.
func (s *Store) putHeldKeys(keys []heldKey) error {
	err := s.db.Update(func(txn *badger.Txn) error {
		for _, kv := range keys {
			if err := txn.Set(kv.key, kv.value); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}

// restoreBufferBytes is how many bytes of keys and values restoreKeys
// hands badger at a time.
const restoreBufferBytes = 16 << 20

func readField(br *bufio.Reader) ([]byte, error) { return readFieldInto(br, nil) }

// readFieldInto reads a field as countingWriter.field writes it, into buf
// when it is large enough.
func readFieldInto(br *bufio.Reader, buf []byte) ([]byte, error) {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, err
	}
	if n > maxSnapshotField {
		return nil, errors.New("field larger than any waggle writes: corrupt snapshot")
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	b := buf[:n]
	_, err = io.ReadFull(br, b)
	return b, err
}

type countingWriter struct {
	w      io.Writer
	n      int64
	err    error
	lenBuf []byte
}

// Write records the first error and ignores writes after it, so a stream
// can be written without checking every call.
func (c *countingWriter) Write(p []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
}

// field writes b after its length, as readField reads it.
func (c *countingWriter) field(b []byte) {
	c.lenBuf = binary.AppendUvarint(c.lenBuf[:0], uint64(len(b)))
	c.Write(c.lenBuf)
	c.Write(b)
}

// SplitSnapshot reads a snapshot stream from r and writes it apart: the
// header and the keys to state, and each segment of the segment section
// to a file of its own under dir (named as Snapshot names its links,
// created when the first arrives, fsynced). It returns the segments,
// nil when the stream has no segment section (version 1, or the keys
// alone as WriteState writes them). A node receiving a snapshot from its
// leader keeps it this way: restoring it links the files
// (RestoreLinking), so the data is written once, not twice.
func SplitSnapshot(r io.Reader, state io.Writer, dir string) ([]SnapshotSegment, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	version, err := readMagic(br)
	if err != nil {
		return nil, err
	}
	w := &countingWriter{w: state}
	if version == 1 {
		w.Write(snapshotMagicV1)
	} else {
		w.Write(snapshotMagic)
	}
	err = readKeys(br, func(k, v []byte) error {
		w.field(k)
		w.field(v)
		return w.err
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if w.Write([]byte{0}); w.err != nil { // the end of the keys
		return nil, w.err
	}
	if version < 2 {
		return nil, trailing(br)
	}
	sg, more, err := readSegmentHeader(br)
	if errors.Is(err, io.EOF) {
		return nil, nil // the keys alone
	}
	segs := []SnapshotSegment{}
	if more {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	for ; more && err == nil; sg, more, err = readSegmentHeader(br) {
		if err := segment.WriteFile(filepath.Join(dir, sg.Path), br, sg.Size); err != nil {
			return nil, ReportDiskFault(err, filepath.Join(dir, sg.Path))
		}
		segs = append(segs, sg)
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return segs, trailing(br)
}

// linkName is what a snapshot calls the file of a segment beside it.
func linkName(stream, base uint64) string { return fmt.Sprintf("%d-%d.seg", stream, base) }

// readKeys reads the key section of a snapshot stream, calling fn with
// each key and value in turn, in bytes that are fn's only until it
// returns (they are read into the same two buffers each time).
func readKeys(br *bufio.Reader, fn func(k, v []byte) error) error {
	var kb, vb []byte
	for {
		k, err := readFieldInto(br, kb)
		if err != nil {
			return fmt.Errorf("key: %w", err)
		}
		if len(k) == 0 {
			return nil
		}
		v, err := readFieldInto(br, vb)
		if err != nil {
			return fmt.Errorf("value: %w", err)
		}
		if err := fn(k, v); err != nil {
			return err
		}
		kb, vb = k, v
	}
}

// readSegmentHeader reads the header of the segment section's next segment
// (its Path is linkName's); more is false at the 0 that ends the section.
// A stream that ends before the header answers io.EOF, one that ends
// inside it io.ErrUnexpectedEOF.
func readSegmentHeader(br *bufio.Reader) (sg SnapshotSegment, more bool, err error) {
	tag, err := binary.ReadUvarint(br)
	if err != nil || tag == 0 {
		return sg, false, err
	}
	if tag != 1 && tag != 2 {
		return sg, false, fmt.Errorf("segments: unknown tag %d (a newer waggle wrote this snapshot)", tag)
	}
	var h [3]uint64
	for i := range h {
		if h[i], err = binary.ReadUvarint(br); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return sg, false, fmt.Errorf("segments: %w", err)
		}
	}
	if tag == 2 {
		return SnapshotSegment{Stream: h[0], Base: h[1], Size: h[2], Path: sidecarLinkName(h[0], h[1]), Sidecar: true}, true, nil
	}
	return SnapshotSegment{Stream: h[0], Base: h[1], Size: h[2], Path: linkName(h[0], h[1])}, true, nil
}

// trailing fails when r holds more bytes.
func trailing(r io.Reader) error {
	if n, _ := io.Copy(io.Discard, r); n > 0 {
		return fmt.Errorf("snapshot: %d bytes after its end", n)
	}
	return nil
}
