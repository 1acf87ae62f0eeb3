package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"time"

	"github.com/waggle-mq/waggle/store"
)

// Backup file format, version 1 (issue 16):
//
//	header   "WGLBKUP\x00"  version uint32  index uint64  term uint64  created uint64 (Unix ms)
//	body     a store snapshot stream (store/snapshot.go): the bytes a follower receives
//	trailer  "WGLBEND\x00"  body length uint64  CRC-32C uint32
//
// Integers are big-endian. The CRC (Castagnoli) covers every byte before
// it, header and trailer included, so a file cut short or damaged anywhere
// fails the check; the body length tells a truncation from other damage.
// Index and term are the last raft entry whose effects the body holds.
// A newer binary that changes the layout bumps the version and keeps
// reading version 1; the body carries its own version (the snapshot
// stream's), which store.Restore reads as it does for snapshots.
var (
	backupMagic        = []byte("WGLBKUP\x00")
	backupTrailerMagic = []byte("WGLBEND\x00")
)

const (
	backupVersion      = 1
	BackupHeaderSize   = 8 + 4 + 8 + 8 + 8
	BackupTrailerSize  = 8 + 8 + 4
	backupCRCFieldSize = 4
)

var castagnoliBackup = crc32.MakeTable(crc32.Castagnoli)

// BackupHeader says what a backup holds.
type BackupHeader struct {
	Index   uint64    // last raft index applied to the state in the backup
	Term    uint64    // term of that entry
	Created time.Time // when the node took it (the node's clock)
}

func (h BackupHeader) encode() []byte {
	b := make([]byte, 0, BackupHeaderSize)
	b = append(b, backupMagic...)
	b = binary.BigEndian.AppendUint32(b, backupVersion)
	b = binary.BigEndian.AppendUint64(b, h.Index)
	b = binary.BigEndian.AppendUint64(b, h.Term)
	return binary.BigEndian.AppendUint64(b, uint64(h.Created.UnixMilli()))
}

func decodeBackupHeader(b []byte) (BackupHeader, error) {
	if len(b) < BackupHeaderSize || !bytes.Equal(b[:8], backupMagic) {
		return BackupHeader{}, errors.New("not a waggle backup (no WGLBKUP header)")
	}
	if v := binary.BigEndian.Uint32(b[8:]); v != backupVersion {
		return BackupHeader{}, fmt.Errorf("backup format version %d: this binary reads version %d", v, backupVersion)
	}
	return BackupHeader{
		Index:   binary.BigEndian.Uint64(b[12:]),
		Term:    binary.BigEndian.Uint64(b[20:]),
		Created: time.UnixMilli(int64(binary.BigEndian.Uint64(b[28:]))),
	}, nil
}

// Backup is a consistent view of the node's state, taken by FSM.Backup and
// written out later while applies go on.
type Backup struct {
	Header BackupHeader
	snap   *store.Snapshot
}

// Backup takes a store snapshot for a backup file. It holds the apply lock
// while it opens the read transaction and links the segment files (time
// in proportion to the number of segments, not the data), so the state is
// exactly that of Header.Index; writing it out does not block applies.
// now stamps the header; it is not part of the replicated state. Call
// Release when done.
func (f *FSM) Backup(now time.Time) (*Backup, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sn, err := f.store.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	return &Backup{Header: BackupHeader{Index: f.meta.AppliedIndex, Term: f.meta.AppliedTerm, Created: now}, snap: sn}, nil
}

// WriteTo writes the backup file to w: header, snapshot stream, trailer.
// Memory stays bounded: the stream is written as it is read. A failure
// leaves no trailer, so the partial output never passes a check.
func (b *Backup) WriteTo(w io.Writer) (int64, error) {
	crc := crc32.New(castagnoliBackup)
	cw := &backupCounter{w: io.MultiWriter(w, crc)}
	if _, err := cw.Write(b.Header.encode()); err != nil {
		return cw.n, err
	}
	body, err := b.snap.WriteTo(cw)
	if err != nil {
		return cw.n, fmt.Errorf("backup: %w", err)
	}
	t := make([]byte, 0, BackupTrailerSize)
	t = append(t, backupTrailerMagic...)
	t = binary.BigEndian.AppendUint64(t, uint64(body))
	if _, err := cw.Write(t); err != nil {
		return cw.n, err
	}
	n, err := w.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
	return cw.n + int64(n), err
}

// Release frees the snapshot's read transaction and segment links.
func (b *Backup) Release() { b.snap.Release() }

type backupCounter struct {
	w io.Writer
	n int64
}

func (c *backupCounter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// BackupVerifier checks a backup file as its bytes are written to it, in
// one pass and bounded memory: it holds back the last trailer-size bytes
// until it knows whether they are the trailer. Check answers once all
// bytes are written.
type BackupVerifier struct {
	crc  hash.Hash32
	n    int64  // bytes written
	head []byte // the first backupHeaderSize bytes
	tail []byte // the last backupTrailerSize bytes seen, not yet summed
}

// NewBackupVerifier returns a verifier with nothing written yet.
func NewBackupVerifier() *BackupVerifier {
	return &BackupVerifier{crc: crc32.New(castagnoliBackup), tail: make([]byte, 0, 2*BackupTrailerSize)}
}

// Write implements io.Writer; it never fails.
func (v *BackupVerifier) Write(p []byte) (int, error) {
	v.n += int64(len(p))
	if len(v.head) < BackupHeaderSize {
		v.head = append(v.head, p[:min(len(p), BackupHeaderSize-len(v.head))]...)
	}
	if len(p) >= BackupTrailerSize {
		v.crc.Write(v.tail)
		v.crc.Write(p[:len(p)-BackupTrailerSize])
		v.tail = append(v.tail[:0], p[len(p)-BackupTrailerSize:]...)
		return len(p), nil
	}
	v.tail = append(v.tail, p...)
	if extra := len(v.tail) - BackupTrailerSize; extra > 0 {
		v.crc.Write(v.tail[:extra])
		v.tail = append(v.tail[:0], v.tail[extra:]...)
	}
	return len(p), nil
}

// Check reports what the backup holds, or why the bytes written are not
// a whole, undamaged backup file.
func (v *BackupVerifier) Check() (BackupHeader, error) {
	h, err := decodeBackupHeader(v.head)
	if err != nil {
		return h, err
	}
	if v.n < BackupHeaderSize+BackupTrailerSize || !bytes.Equal(v.tail[:8], backupTrailerMagic) {
		return h, fmt.Errorf("backup is truncated or damaged: %d bytes end without the WGLBEND trailer", v.n)
	}
	body := binary.BigEndian.Uint64(v.tail[8:])
	if want := uint64(v.n - BackupHeaderSize - BackupTrailerSize); body != want {
		return h, fmt.Errorf("backup is damaged: its trailer says %d body bytes, the file holds %d", body, want)
	}
	v.crc.Write(v.tail[:BackupTrailerSize-backupCRCFieldSize])
	got, want := v.crc.Sum32(), binary.BigEndian.Uint32(v.tail[BackupTrailerSize-backupCRCFieldSize:])
	if got != want {
		return h, fmt.Errorf("backup is damaged: CRC-32C %08x, the trailer says %08x", got, want)
	}
	return h, nil
}

// BackupBody returns the snapshot stream inside a backup file of size
// bytes read through r; verify the file (BackupVerifier) first.
func BackupBody(r io.ReaderAt, size int64) (*io.SectionReader, error) {
	if size < BackupHeaderSize+BackupTrailerSize {
		return nil, fmt.Errorf("backup of %d bytes is too short", size)
	}
	return io.NewSectionReader(r, BackupHeaderSize, size-BackupHeaderSize-BackupTrailerSize), nil
}
