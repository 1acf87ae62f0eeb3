// Package segment keeps message data in append-only files.
//
// A stream is one queue's data: a sequence of records addressed by their
// byte position in the stream, split into segment files of bounded size
// named by the position of their first byte ("00000000000067108864.seg").
// Records of all the queue's partitions share the stream, so open files
// and inodes grow with the number of queues and the data, not with the
// number of partitions; the store keeps, per partition and offset, where
// each record sits.
//
// A record is framed as
//
//	length(4) crc32c(4) body(length)
//
// with big-endian integers and the CRC-32C (Castagnoli) of the body. Reads
// check the frame and refuse a damaged record; nothing reads a whole file
// on start.
//
// Appends are buffered in memory until Flush and not fsynced: the raft log
// is the durable copy of every entry. The caller records how far a stream
// is committed (its End after Flush) together with the index entries that
// point into it, and cuts the tail past that point on start (Truncate), so
// a crash between the file write and the index commit leaves nothing
// behind that the index does not know.
//
// The package owns files only: it knows nothing of raft, queues or offsets.
package segment

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// FrameBytes is the size of a record's frame header.
const FrameBytes = 8

// MaxRecord bounds one record's body; a length field above it is damage.
const MaxRecord = 64 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt reports a record whose frame or checksum does not match.
var ErrCorrupt = errors.New("segment: damaged record")

// ErrGone reports a read below the stream's first segment (dropped by
// retention) or past its end.
var ErrGone = errors.New("segment: no such position")

const fileSuffix = ".seg"

// sidecarSuffix names a segment's sidecar: a file the caller keeps beside
// the segment (data its records refer to), removed with the segment.
const sidecarSuffix = ".ref"

// Dir holds the streams under one directory, one sub-directory per stream.
type Dir struct {
	root string

	mu      sync.Mutex
	streams map[uint64]*Stream
	onFault func(path string, err error) // see OnFault
}

// Open opens (creating it if needed) the directory of streams.
func Open(root string) (*Dir, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	return &Dir{root: root, streams: map[uint64]*Stream{}}, nil
}

// OnFault has fn called with each error a write or fsync of a segment
// file answers, and each damaged record (ErrCorrupt) a read finds, with
// the file's path, before the call that met it returns it: a node stops
// on either rather than retry an fsync or serve a damaged record. Set it
// before the first Stream call.
func (d *Dir) OnFault(fn func(path string, err error)) { d.onFault = fn }

// Root is the directory the streams live in.
func (d *Dir) Root() string { return d.root }

// Stream returns the stream with the id, opening it on first use.
func (d *Dir) Stream(id uint64) *Stream {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.streams[id]
	if s == nil {
		s = &Stream{dir: filepath.Join(d.root, strconv.FormatUint(id, 10)), onFault: d.onFault}
		d.streams[id] = s
	}
	return s
}

// IDs lists the streams that have a directory on disk, in id order.
func (d *Dir) IDs() ([]uint64, error) {
	ents, err := os.ReadDir(d.root)
	if err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	var ids []uint64
	for _, e := range ents {
		if id, err := strconv.ParseUint(e.Name(), 10, 64); err == nil && e.IsDir() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Remove deletes a stream and all its files.
func (d *Dir) Remove(id uint64) error {
	d.mu.Lock()
	s := d.streams[id]
	delete(d.streams, id)
	d.mu.Unlock()
	if s != nil {
		s.close()
	}
	if err := os.RemoveAll(filepath.Join(d.root, strconv.FormatUint(id, 10))); err != nil {
		return fmt.Errorf("segment: remove stream %d: %w", id, err)
	}
	return nil
}

// Retain removes every stream not in keep and, in the streams kept, every
// segment file whose base is not listed.
func (d *Dir) Retain(keep map[uint64][]uint64) error {
	ids, err := d.IDs()
	if err != nil {
		return err
	}
	for _, id := range ids {
		bases, ok := keep[id]
		if !ok {
			if err := d.Remove(id); err != nil {
				return err
			}
			continue
		}
		s := d.Stream(id)
		s.close()
		s.mu.Lock()
		err := s.load()
		for _, base := range s.bases {
			if err == nil && !slices.Contains(bases, base) {
				err = os.Remove(s.path(base))
			}
		}
		if err == nil {
			err = s.removeSidecars(func(base uint64) bool { return !slices.Contains(bases, base) })
		}
		s.loaded = false
		s.mu.Unlock()
		if err != nil {
			return fmt.Errorf("segment: %w", err)
		}
	}
	return nil
}

// FlushAll writes every stream's buffered appends to its file.
func (d *Dir) FlushAll() error { return d.each((*Stream).Flush) }

// SyncAll flushes and fsyncs every open stream.
func (d *Dir) SyncAll() error { return d.each((*Stream).Sync) }

// Close flushes and closes every stream.
func (d *Dir) Close() error {
	err := d.each((*Stream).Flush)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.streams {
		s.close()
	}
	return err
}

func (d *Dir) each(fn func(*Stream) error) error {
	d.mu.Lock()
	streams := make([]*Stream, 0, len(d.streams))
	for _, s := range d.streams {
		streams = append(streams, s)
	}
	d.mu.Unlock()
	var errs []error
	for _, s := range streams {
		errs = append(errs, fn(s))
	}
	return errors.Join(errs...)
}

// Info describes one segment file.
type Info struct {
	Base uint64 // stream position of its first byte
	Size uint64 // bytes in it (flushed or buffered)
	Path string
}

// Stream is one queue's sequence of records. Appends come from one writer
// (the state machine); reads may run concurrently with them.
type Stream struct {
	dir     string
	onFault func(path string, err error) // nil: none (see Dir.OnFault)

	mu     sync.Mutex
	loaded bool
	bases  []uint64 // segment bases, ascending; the last is the active one
	active *os.File // the last segment, open for appends; nil when closed
	size   uint64   // bytes in the active segment, including buf
	buf    []byte   // appended, not yet written to the file

	readers map[uint64]*os.File // open sealed segments, by base (see reader)
}

// load reads the stream's segment list from its directory once.
func (s *Stream) load() error {
	if s.loaded {
		return nil
	}
	ents, err := os.ReadDir(s.dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("segment: %w", err)
	}
	s.bases = s.bases[:0]
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), fileSuffix)
		if !ok {
			continue
		}
		if base, err := strconv.ParseUint(name, 10, 64); err == nil {
			s.bases = append(s.bases, base)
		}
	}
	slices.Sort(s.bases)
	s.size = 0
	if n := len(s.bases); n > 0 {
		fi, err := os.Stat(s.path(s.bases[n-1]))
		if err != nil {
			return fmt.Errorf("segment: %w", err)
		}
		s.size = uint64(fi.Size())
	}
	s.loaded = true
	return nil
}

// Path is the file of the segment starting at base.
func (s *Stream) Path(base uint64) string { return s.path(base) }

func (s *Stream) path(base uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%020d%s", base, fileSuffix))
}

// end is the position after the last byte, buffered ones included.
func (s *Stream) end() uint64 {
	if len(s.bases) == 0 {
		return 0
	}
	return s.bases[len(s.bases)-1] + s.size
}

// End is the stream position the next append goes to.
func (s *Stream) End() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(); err != nil {
		return 0, err
	}
	return s.end(), nil
}

// Append adds a record to the active segment (the first append creates
// one at position 0) and returns its position.
func (s *Stream) Append(body []byte) (uint64, error) {
	if len(body) > MaxRecord {
		return 0, fmt.Errorf("segment: record of %d bytes exceeds %d", len(body), MaxRecord)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(); err != nil {
		return 0, err
	}
	if len(s.bases) == 0 {
		if err := s.roll(); err != nil {
			return 0, err
		}
	}
	pos := s.end()
	s.buf = binary.BigEndian.AppendUint32(s.buf, uint32(len(body)))
	s.buf = binary.BigEndian.AppendUint32(s.buf, crc32.Checksum(body, castagnoli))
	s.buf = append(s.buf, body...)
	s.size += uint64(FrameBytes + len(body))
	return pos, nil
}

// Roll seals the active segment (flushed, fsynced, closed) and begins a
// new one at the stream's end. The caller decides when, from replicated
// state, so every replica cuts its segments at the same positions.
func (s *Stream) Roll() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(); err != nil {
		return err
	}
	if n := len(s.bases); n > 0 && s.size == 0 {
		return nil // the active segment is empty: nothing to seal
	}
	return s.roll()
}

// roll seals the active segment and starts a new one at the stream's end.
func (s *Stream) roll() error {
	base := s.end()
	if len(s.bases) > 0 {
		if err := s.flush(); err != nil {
			return err
		}
		if s.active != nil {
			if err := s.active.Sync(); err != nil {
				return s.fault(s.active.Name(), fmt.Errorf("segment: seal: %w", err))
			}
			s.active.Close()
			s.active = nil
		}
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	f, err := os.OpenFile(s.path(base), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	s.bases = append(s.bases, base)
	s.active, s.size = f, 0
	return nil
}

func (s *Stream) openActive() error {
	if s.active != nil || len(s.bases) == 0 {
		return nil
	}
	f, err := os.OpenFile(s.path(s.bases[len(s.bases)-1]), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	s.active = f
	return nil
}

func (s *Stream) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	if err := s.openActive(); err != nil {
		return err
	}
	at := int64(s.size) - int64(len(s.buf))
	if _, err := s.active.WriteAt(s.buf, at); err != nil {
		return s.fault(s.active.Name(), fmt.Errorf("segment: write: %w", err))
	}
	s.buf = s.buf[:0]
	return nil
}

// Flush writes buffered appends to the file (without fsync).
func (s *Stream) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flush()
}

// Sync flushes and fsyncs the active segment (sealed ones were fsynced
// when sealed).
func (s *Stream) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.flush(); err != nil {
		return err
	}
	if s.active == nil {
		return nil
	}
	if err := s.active.Sync(); err != nil {
		return s.fault(s.active.Name(), fmt.Errorf("segment: %w", err))
	}
	return nil
}

// fault hands err, met in the file at path, to the fault handler, and
// returns it.
func (s *Stream) fault(path string, err error) error {
	if s.onFault != nil {
		s.onFault(path, err)
	}
	return err
}

// damaged reports the damaged record at pos (err is ErrCorrupt) to the
// fault handler, naming its file and place, and returns it.
func (s *Stream) damaged(pos uint64, err error) error {
	s.mu.Lock()
	path := s.dir
	if i, ok := s.find(pos); ok {
		path = s.path(s.bases[i])
		err = fmt.Errorf("%w at byte %d of %s (stream position %d)", err, pos-s.bases[i], filepath.Base(path), pos)
	}
	s.mu.Unlock()
	return s.fault(path, err)
}

func (s *Stream) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeReaders()
	s.flush()
	if s.active != nil {
		s.active.Close()
		s.active = nil
	}
	s.loaded = false
}

// Truncate cuts the stream back to end: bytes appended past the point the
// caller last committed are dropped, whole segments starting at or after
// it are removed. A stream shorter than end is an error: data the index
// points to is missing.
func (s *Stream) Truncate(end uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(); err != nil {
		return err
	}
	if s.end() < end {
		return fmt.Errorf("segment: %s holds %d bytes, the index expects %d", s.dir, s.end(), end)
	}
	if err := s.flush(); err != nil {
		return err
	}
	s.closeReaders()
	if s.active != nil {
		s.active.Close()
		s.active = nil
	}
	// A segment starting at end goes too, unless it is the only one left
	// (the stream's end is its base).
	for n := len(s.bases); n > 0 && (s.bases[n-1] > end || (s.bases[n-1] == end && n > 1)); n = len(s.bases) {
		if err := os.Remove(s.path(s.bases[n-1])); err != nil {
			return fmt.Errorf("segment: %w", err)
		}
		removed := s.bases[n-1]
		s.bases = s.bases[:n-1]
		s.size = 0
		if n > 1 {
			s.size = removed - s.bases[n-2] // the next segment began where it ended
		}
	}
	if n := len(s.bases); n > 0 && s.end() > end {
		s.size = end - s.bases[n-1]
		if err := cutFile(s.path(s.bases[n-1]), s.size); err != nil {
			return err
		}
	}
	return nil
}

// cutFile replaces the file at path with a copy of its first size bytes.
// It never truncates the file in place: a snapshot may hold a hard link of
// it and need the bytes past size (a node that lost power restores that
// snapshot after the cut, which badger's older head asked for).
func cutFile(path string, size uint64) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	defer f.Close()
	return replaceFile(path, f, size)
}

// Read returns the body of the record at pos whose body is n bytes long,
// after checking its frame and checksum. The file is read without the
// stream's lock, so a read that goes to the disk does not hold up the
// state machine's appends; a handle closed under it meanwhile (a roll, the
// handle cache) is opened again.
func (s *Stream) Read(pos uint64, n uint32) ([]byte, error) {
	for attempt := 1; ; attempt++ {
		b, err := s.read(pos, n)
		if errors.Is(err, os.ErrClosed) && attempt < 3 {
			continue
		}
		if errors.Is(err, ErrCorrupt) {
			return nil, s.damaged(pos, err)
		}
		return b, err
	}
}

func (s *Stream) read(pos uint64, n uint32) ([]byte, error) {
	if n > MaxRecord {
		return nil, ErrCorrupt
	}
	frame, err := s.readBytes(pos, FrameBytes+int(n))
	if err != nil {
		return nil, err
	}
	return checkFrame(frame, n)
}

// ReadRecord is Read for a caller that knows a record's position but not
// its length: it reads the frame's length first.
func (s *Stream) ReadRecord(pos uint64) ([]byte, error) {
	for attempt := 1; ; attempt++ {
		b, err := s.readBytes(pos, 4)
		if err == nil {
			return s.Read(pos, binary.BigEndian.Uint32(b))
		}
		if errors.Is(err, ErrCorrupt) {
			return nil, s.damaged(pos, err)
		}
		if !errors.Is(err, os.ErrClosed) || attempt == 3 {
			return nil, err
		}
	}
}

// readBytes reads size bytes of the stream at pos, which lie in one
// segment.
func (s *Stream) readBytes(pos uint64, size int) ([]byte, error) {
	s.mu.Lock()
	if err := s.load(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	i, ok := s.find(pos)
	if !ok || pos+uint64(size) > s.end() {
		s.mu.Unlock()
		return nil, ErrGone
	}
	base := s.bases[i]
	frame := make([]byte, size)
	if i == len(s.bases)-1 {
		// The active segment: the tail may still be in the buffer.
		flushed := base + s.size - uint64(len(s.buf))
		if pos >= flushed {
			copy(frame, s.buf[pos-flushed:])
			s.mu.Unlock()
			return frame, nil
		}
		if pos+uint64(len(frame)) > flushed {
			// A record never straddles a flush: Flush writes whole buffers
			// of whole records. Treat it as damage if it does.
			s.mu.Unlock()
			return nil, ErrCorrupt
		}
	}
	f, err := s.reader(i)
	s.mu.Unlock()
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrGone // dropped by retention or a delete meanwhile
	}
	if err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	// Bytes up to the committed end do not change once written (only a
	// tail past it is ever cut), and a file removed meanwhile still reads
	// through an open handle.
	if _, err := f.ReadAt(frame, int64(pos-base)); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, ErrCorrupt
		}
		return nil, fmt.Errorf("segment: %w", err)
	}
	return frame, nil
}

// maxReaders bounds the sealed segments a stream keeps open for reading.
const maxReaders = 4

// reader returns an open file of segment i for reading (the caller holds
// s.mu): the active segment's own handle, or a cached one of a sealed
// segment. Opening a file per read cost a third of the HTTP pop and ack
// throughput.
func (s *Stream) reader(i int) (*os.File, error) {
	if i == len(s.bases)-1 {
		if err := s.openActive(); err != nil {
			return nil, err
		}
		return s.active, nil
	}
	base := s.bases[i]
	if f := s.readers[base]; f != nil {
		return f, nil
	}
	f, err := os.Open(s.path(base))
	if err != nil {
		return nil, err
	}
	if len(s.readers) >= maxReaders {
		s.closeReaders()
	}
	if s.readers == nil {
		s.readers = map[uint64]*os.File{}
	}
	s.readers[base] = f
	return f, nil
}

// closeReaders closes the cached read handles (the caller holds s.mu).
func (s *Stream) closeReaders() {
	for base, f := range s.readers {
		f.Close()
		delete(s.readers, base)
	}
}

func checkFrame(frame []byte, n uint32) ([]byte, error) {
	body := frame[FrameBytes:]
	if binary.BigEndian.Uint32(frame) != n || binary.BigEndian.Uint32(frame[4:]) != crc32.Checksum(body, castagnoli) {
		return nil, ErrCorrupt
	}
	return body, nil
}

// Verify reads the stream's records from its first segment up to end and
// checks every frame's length and checksum, and that the records tile the
// positions exactly (none straddles a segment's end; the last ends at
// end). It reads the files once, in order, a segment at a time.
func (s *Stream) Verify(end uint64) error {
	segs, err := s.Segments()
	if err != nil {
		return err
	}
	if len(segs) == 0 {
		if end > 0 {
			return fmt.Errorf("%w: stream %s has no segment, its end is %d", ErrCorrupt, s.dir, end)
		}
		return nil
	}
	for i, sg := range segs {
		stop := min(sg.Base+sg.Size, end)
		if i < len(segs)-1 && stop != sg.Base+sg.Size {
			return fmt.Errorf("%w: %s: the stream ends at %d, before its next segment", ErrCorrupt, sg.Path, end)
		}
		if err := verifyFile(sg.Path, sg.Base, stop); err != nil {
			return err
		}
	}
	if last := segs[len(segs)-1]; last.Base+last.Size < end {
		return fmt.Errorf("%w: stream %s holds %d bytes, its end is %d", ErrCorrupt, s.dir, last.Base+last.Size, end)
	}
	return nil
}

// verifyFile checks the records of the segment file at path, which begins
// at position base, from base to stop.
func verifyFile(path string, base, stop uint64) error { return scanFile(path, base, stop, nil) }

// scanFile reads the records of the segment file at path (which begins at
// position base) from base to stop, checking each frame, and hands each
// body to fn when fn is not nil. The body is only valid during the call.
func scanFile(path string, base, stop uint64, fn func(pos uint64, body []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	frame := make([]byte, FrameBytes)
	for pos := base; pos < stop; {
		if _, err := io.ReadFull(r, frame[:FrameBytes]); err != nil {
			return fmt.Errorf("%w: %s at %d: %v", ErrCorrupt, path, pos, err)
		}
		n := binary.BigEndian.Uint32(frame)
		if n > MaxRecord || pos+FrameBytes+uint64(n) > stop {
			return fmt.Errorf("%w: %s at %d: a record of %d bytes passes %d", ErrCorrupt, path, pos, n, stop)
		}
		frame = slices.Grow(frame[:FrameBytes], int(n))[:FrameBytes+int(n)]
		if _, err := io.ReadFull(r, frame[FrameBytes:]); err != nil {
			return fmt.Errorf("%w: %s at %d: %v", ErrCorrupt, path, pos, err)
		}
		body, err := checkFrame(frame, n)
		if err != nil {
			return fmt.Errorf("%w: %s at %d", err, path, pos)
		}
		if fn != nil {
			if err := fn(pos, body); err != nil {
				return err
			}
		}
		pos += FrameBytes + uint64(n)
	}
	return nil
}

// ScanFile is Scan for the segment file at path that begins at base (a
// snapshot's link to one, say).
func ScanFile(path string, base, stop uint64, fn func(pos uint64, body []byte) error) error {
	return scanFile(path, base, stop, fn)
}

// Scan reads the records of the segment that begins at base, up to stop
// (at most the segment's end), in order, checking each frame, and calls
// fn with each one's position and body (valid only during the call). The
// records must be flushed (see Flush).
func (s *Stream) Scan(base, stop uint64, fn func(pos uint64, body []byte) error) error {
	return scanFile(s.Path(base), base, stop, fn)
}

// find returns the index of the segment holding pos.
func (s *Stream) find(pos uint64) (int, bool) {
	i, found := slices.BinarySearch(s.bases, pos)
	if found {
		return i, true
	}
	return i - 1, i > 0
}

// Segments lists the stream's segments, oldest first.
func (s *Stream) Segments() ([]Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(); err != nil {
		return nil, err
	}
	out := make([]Info, len(s.bases))
	for i, base := range s.bases {
		size := s.size
		if i < len(s.bases)-1 {
			size = s.bases[i+1] - base
		}
		out[i] = Info{Base: base, Size: size, Path: s.path(base)}
	}
	return out, nil
}

// DropBefore removes the sealed segments that end at or before pos. The
// active segment is never removed.
func (s *Stream) DropBefore(pos uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(); err != nil {
		return err
	}
	s.closeReaders()
	for len(s.bases) > 1 && s.bases[1] <= pos {
		for _, path := range []string{s.path(s.bases[0]), s.SidecarPath(s.bases[0])} {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("segment: %w", err)
			}
		}
		s.bases = s.bases[1:]
	}
	return nil
}

// SidecarPath is the file the caller may keep beside the segment starting
// at base: DropBefore and Dir.Retain remove it with the segment.
func (s *Stream) SidecarPath(base uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%020d%s", base, sidecarSuffix))
}

// removeSidecars removes the sidecar files whose segment base doom picks.
func (s *Stream) removeSidecars(doom func(base uint64) bool) error {
	ents, err := os.ReadDir(s.dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("segment: %w", err)
	}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), sidecarSuffix)
		if !ok {
			continue
		}
		if base, err := strconv.ParseUint(name, 10, 64); err == nil && doom(base) {
			if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil {
				return fmt.Errorf("segment: %w", err)
			}
		}
	}
	return nil
}

// BaseOf returns the base of the segment holding stream position pos.
func (s *Stream) BaseOf(pos uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(); err != nil {
		return 0, err
	}
	i, ok := s.find(pos)
	if !ok || pos >= s.end() {
		return 0, ErrGone
	}
	return s.bases[i], nil
}

// Install writes a segment received from a peer (a snapshot) into the
// stream's directory from r: size bytes at base. When from names a file of
// exactly size bytes holding them (the snapshot's own copy), it is
// hard-linked into place, replacing any local file, so the data is on disk
// once; else a local file that already holds at least those bytes is kept.
// Either way r is read past them. The bytes at a stream position are the
// same on every replica (appends are decided by the replicated log), so a
// file with the right stream, base and size holds the right bytes.
func (s *Stream) Install(base, size uint64, r io.Reader, from string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loaded = false
	s.closeReaders()
	if s.active != nil {
		s.active.Close()
		s.active = nil
	}
	s.buf = s.buf[:0]
	return s.install(s.path(base), size, r, from, true)
}

// InstallSidecar is Install for the sidecar of the segment at base: a
// sidecar received whole (size bytes from r), linked from the snapshot's
// copy when from holds exactly those bytes. A local sidecar is replaced
// (its bytes may cover less than the received one).
func (s *Stream) InstallSidecar(base, size uint64, r io.Reader, from string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.install(s.SidecarPath(base), size, r, from, false)
}

// install puts size bytes from r at path, hard-linking from instead when it
// holds exactly size bytes; keepLonger keeps a local file already holding
// at least size bytes (a segment's bytes are the same on every replica).
// r is read past the bytes either way.
func (s *Stream) install(path string, size uint64, r io.Reader, from string, keepLonger bool) error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	fromInfo, err := os.Stat(from)
	link := from != "" && err == nil && uint64(fromInfo.Size()) == size
	local, err := os.Stat(path)
	keep := keepLonger && !link && err == nil && uint64(local.Size()) >= size
	if !link && !keep {
		return replaceFile(path, r, size)
	}
	if _, err := io.CopyN(io.Discard, r, int64(size)); err != nil {
		return fmt.Errorf("segment: install: %w", err)
	}
	switch {
	case keep:
		return os.Truncate(path, int64(size))
	case local != nil && os.SameFile(local, fromInfo):
		return nil // linked already
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("segment: install: %w", err)
	}
	if err := os.Link(from, path); err != nil {
		return fmt.Errorf("segment: install: %w", err)
	}
	return SyncDir(s.dir)
}

// replaceFile writes size bytes from r to a new file and renames it to
// path. The file path named before is never written: it may be the very
// file r reads from, a hard link of it in the snapshot being restored (a
// node restoring its own snapshot after it lost unsynced data), which
// truncating in place would empty under the reader.
func replaceFile(path string, r io.Reader, size uint64) error {
	tmp := path + ".tmp"
	if err := WriteFile(tmp, r, size); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("segment: install: %w", err)
	}
	// The rename too must outlive a power loss: undone, path would name
	// the file it replaced, whose bytes the snapshot no longer vouches for.
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs directory dir, making the names in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("segment: sync %s: %w", dir, err)
	}
	return nil
}

// WriteFile writes size bytes from r to the file at path (created, or
// emptied first) and fsyncs it.
func WriteFile(path string, r io.Reader, size uint64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	if n, err := io.CopyN(f, r, int64(size)); err != nil {
		f.Close()
		return fmt.Errorf("segment: write %s: %d of %d bytes: %w", path, n, size, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("segment: write %s: %w", path, err)
	}
	return f.Close()
}
