package store

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/waggle-mq/waggle/segment"
)

// A sidecar holds copies of the batches a segment's refs name, in ref
// order, so they can be read once the raft log no longer has them:
//
//	"WRF1" stream(8) base(8) count(4) lastIndex(8) crc32c(4)   the header, its CRC over the 32 bytes before
//	count × (position(8) length(4))                               the table: where batch k is in the file
//	count × (batch crc32c(4))                                     the batches, each with its CRC
//
// big-endian. A sidecar holds the segment's first count refs; lastIndex is
// the raft index of the last of them. It is node-local (each node copies
// when its own log needs it, or receives one in a snapshot), written whole
// to a temporary file, fsynced and renamed into place.
var sidecarMagic = []byte("WRF1")

const (
	sidecarHeaderBytes = 36
	sidecarSlotBytes   = 12
)

// sidecarHeader is what a sidecar holds; the zero value: no sidecar.
type sidecarHeader struct {
	Stream, Base uint64
	Count        uint32
	LastIndex    uint64
}

func (h sidecarHeader) encode() []byte {
	b := append(make([]byte, 0, sidecarHeaderBytes), sidecarMagic...)
	b = binary.BigEndian.AppendUint64(b, h.Stream)
	b = binary.BigEndian.AppendUint64(b, h.Base)
	b = binary.BigEndian.AppendUint32(b, h.Count)
	b = binary.BigEndian.AppendUint64(b, h.LastIndex)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoliTable))
}

func decodeSidecarHeader(b []byte) (sidecarHeader, error) {
	if len(b) < sidecarHeaderBytes || string(b[:4]) != string(sidecarMagic) ||
		crc32.Checksum(b[:32], castagnoliTable) != binary.BigEndian.Uint32(b[32:]) {
		return sidecarHeader{}, fmt.Errorf("sidecar header: %w", segment.ErrCorrupt)
	}
	return sidecarHeader{
		Stream:    beUint64(b[4:]),
		Base:      beUint64(b[12:]),
		Count:     binary.BigEndian.Uint32(b[20:]),
		LastIndex: beUint64(b[24:]),
	}, nil
}

// sidecarSize is the size of the sidecar holding refs.
func sidecarSize(refs []BatchRef) uint64 {
	var batches uint64
	for _, r := range refs {
		batches += uint64(r.Length)
	}
	return sidecarBytes(len(refs), batches)
}

// sidecarBytes is the size of a sidecar of count batches of batchBytes in
// all.
func sidecarBytes(count int, batchBytes uint64) uint64 {
	return uint64(sidecarHeaderBytes+(sidecarSlotBytes+4)*count) + batchBytes
}

// readSidecarHeader reads the header of the sidecar at path.
func readSidecarHeader(path string) (sidecarHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return sidecarHeader{}, err
	}
	defer f.Close()
	b := make([]byte, sidecarHeaderBytes)
	if _, err := io.ReadFull(f, b); err != nil {
		return sidecarHeader{}, fmt.Errorf("sidecar %s: %w", path, segment.ErrCorrupt)
	}
	return decodeSidecarHeader(b)
}

// readSidecarBatch reads batch k of the sidecar at path whose header is h,
// checking its CRC.
func readSidecarBatch(path string, h sidecarHeader, k uint32) ([]byte, error) {
	if k >= h.Count {
		return nil, fmt.Errorf("sidecar %s holds %d batches, not %d", path, h.Count, k+1)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	slot := make([]byte, sidecarSlotBytes)
	if _, err := f.ReadAt(slot, sidecarHeaderBytes+int64(k)*sidecarSlotBytes); err != nil {
		return nil, fmt.Errorf("sidecar %s: %w: %v", path, segment.ErrCorrupt, err)
	}
	pos, n := sidecarSlot(slot)
	if n > segment.MaxRecord {
		return nil, fmt.Errorf("sidecar %s: %w", path, segment.ErrCorrupt)
	}
	b := make([]byte, n+4)
	if _, err := f.ReadAt(b, int64(pos)); err != nil {
		return nil, fmt.Errorf("sidecar %s: %w: %v", path, segment.ErrCorrupt, err)
	}
	return checkSidecarBatch(path, k, b)
}

// sidecarSlot reads a table slot: where its batch begins and its length.
func sidecarSlot(slot []byte) (pos uint64, n uint32) {
	return beUint64(slot), binary.BigEndian.Uint32(slot[8:])
}

// checkSidecarBatch checks batch k of the sidecar at path, read with the
// CRC that follows it, and returns the batch without the CRC.
func checkSidecarBatch(path string, k uint32, b []byte) ([]byte, error) {
	n := len(b) - 4
	if crc32.Checksum(b[:n], castagnoliTable) != binary.BigEndian.Uint32(b[n:]) {
		return nil, fmt.Errorf("sidecar %s batch %d: %w", path, k, segment.ErrCorrupt)
	}
	return b[:n:n], nil
}

// sidecarScan reads a sidecar's batches in order from one open file, the
// table and the batches each through a buffer, checking that every batch
// is where the table says and that its CRC holds.
type sidecarScan struct {
	path  string
	h     sidecarHeader
	f     *os.File
	table *bufio.Reader
	data  *bufio.Reader
	k     uint32 // the batch next reads
	pos   uint64 // where batch k begins
	buf   []byte
}

// openSidecarScan opens the sidecar at path, whose header is h, for reading
// its batches in order. With h the zero value (no sidecar) it opens
// nothing, and next fails.
func openSidecarScan(path string, h sidecarHeader) (*sidecarScan, error) {
	sc := &sidecarScan{path: path, h: h}
	if h.Count == 0 {
		return sc, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	first := uint64(sidecarHeaderBytes + sidecarSlotBytes*uint64(h.Count))
	sc.f, sc.pos = f, first
	sc.table = bufio.NewReaderSize(io.NewSectionReader(f, sidecarHeaderBytes, int64(first-sidecarHeaderBytes)), 64<<10)
	sc.data = bufio.NewReaderSize(io.NewSectionReader(f, int64(first), 1<<62), 1<<20)
	return sc, nil
}

// next reads the sidecar's next batch, which must be ref's, in bytes
// shared with the next call: the caller must not change them.
func (sc *sidecarScan) next(ref BatchRef) ([]byte, error) {
	if sc.k >= sc.h.Count {
		return nil, fmt.Errorf("sidecar %s holds %d batches, not %d", sc.path, sc.h.Count, sc.k+1)
	}
	var slot [sidecarSlotBytes]byte
	if _, err := io.ReadFull(sc.table, slot[:]); err != nil {
		return nil, fmt.Errorf("sidecar %s: %w: %v", sc.path, segment.ErrCorrupt, err)
	}
	pos, n := sidecarSlot(slot[:])
	if pos != sc.pos || n != ref.Length || n > segment.MaxRecord {
		return nil, fmt.Errorf("sidecar %s batch %d: at %d for %d bytes, expected %d for %d: %w", sc.path, sc.k, pos, n, sc.pos, ref.Length, segment.ErrCorrupt)
	}
	if cap(sc.buf) < int(n)+4 {
		sc.buf = make([]byte, n+4)
	}
	b := sc.buf[:n+4]
	if _, err := io.ReadFull(sc.data, b); err != nil {
		return nil, fmt.Errorf("sidecar %s: %w: %v", sc.path, segment.ErrCorrupt, err)
	}
	batch, err := checkSidecarBatch(sc.path, sc.k, b)
	if err != nil {
		return nil, err
	}
	sc.k++
	sc.pos += uint64(n) + 4
	return batch, nil
}

// Close closes the sidecar's file.
func (sc *sidecarScan) Close() error {
	if sc.f == nil {
		return nil
	}
	return sc.f.Close()
}

// scanRefs lists the refs of the segment file at path (which begins at
// base) up to stop, in ordinal order.
func scanRefs(path string, base, stop uint64) ([]BatchRef, error) {
	var refs []BatchRef
	err := segment.ScanFile(path, base, stop, func(pos uint64, body []byte) error {
		d, ok, err := refOf(body)
		if err != nil || !ok {
			return err
		}
		if d.ordinal != uint32(len(refs)) {
			return fmt.Errorf("%s at %d: ref %d where %d was due: %w", path, pos, d.ordinal, len(refs), segment.ErrCorrupt)
		}
		refs = append(refs, d.ref)
		return nil
	})
	return refs, err
}

// encodeSidecar writes the sidecar holding refs to w, reading batch k with
// get.
func encodeSidecar(w io.Writer, stream, base uint64, refs []BatchRef, get func(k int, r BatchRef) ([]byte, error)) error {
	h := sidecarHeader{Stream: stream, Base: base, Count: uint32(len(refs))}
	if len(refs) > 0 {
		h.LastIndex = refs[len(refs)-1].Index
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	bw.Write(h.encode())
	pos := uint64(sidecarHeaderBytes + sidecarSlotBytes*len(refs))
	slot := make([]byte, 0, sidecarSlotBytes)
	for _, r := range refs {
		slot = binary.BigEndian.AppendUint64(slot[:0], pos)
		bw.Write(binary.BigEndian.AppendUint32(slot, r.Length))
		pos += uint64(r.Length) + 4
	}
	var sum [4]byte
	for k, r := range refs {
		b, err := get(k, r)
		if err != nil {
			return err
		}
		if len(b) != int(r.Length) {
			return fmt.Errorf("batch %d of stream %d's segment %d: %d bytes, its ref says %d", k, stream, base, len(b), r.Length)
		}
		bw.Write(b)
		binary.BigEndian.PutUint32(sum[:], crc32.Checksum(b, castagnoliTable))
		if _, err := bw.Write(sum[:]); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// writeSidecar writes the sidecar holding refs at path: to a temporary
// file, fsynced, then renamed into place.
func writeSidecar(path string, stream, base uint64, refs []BatchRef, get func(k int, r BatchRef) ([]byte, error)) (sidecarHeader, error) {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return sidecarHeader{}, err
	}
	err = encodeSidecar(f, stream, base, refs, get)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = segment.SyncDir(filepath.Dir(path))
	}
	if err != nil {
		os.Remove(tmp)
		return sidecarHeader{}, ReportDiskFault(fmt.Errorf("write sidecar %s: %w", path, err), path)
	}
	return readSidecarHeader(path)
}
