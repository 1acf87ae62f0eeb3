package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	badger "github.com/dgraph-io/badger/v4"
)

// Snapshot stream format, version 1:
//
//	"WGLSNAP" 0x01
//	repeated: uvarint(len(key)) key uvarint(len(value)) value
//	uvarint(0)                       end marker (keys are never empty)
//
// A newer binary that changes the stream bumps the version byte and keeps
// reading version 1.
var snapshotMagic = []byte("WGLSNAP\x01")

// maxSnapshotField bounds a key or value read from a snapshot stream, so a
// corrupt stream cannot make Restore allocate without limit.
const maxSnapshotField = 64 << 20

// Snapshot is a point-in-time view of the whole store, taken by Snapshot and
// written out later, while writes go on.
type Snapshot struct {
	txn *badger.Txn
}

// Snapshot opens a read transaction at the current state. Call Release when
// done with it.
func (s *Store) Snapshot() *Snapshot {
	return &Snapshot{txn: s.db.NewTransaction(false)}
}

// WriteTo streams every key and value of the snapshot to w.
func (sn *Snapshot) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := &countingWriter{w: bw}
	cw.Write(snapshotMagic)
	it := sn.txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 100})
	defer it.Close()
	var lenBuf []byte
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		k := item.Key()
		lenBuf = binary.AppendUvarint(lenBuf[:0], uint64(len(k)))
		cw.Write(lenBuf)
		cw.Write(k)
		err := item.Value(func(v []byte) error {
			lenBuf = binary.AppendUvarint(lenBuf[:0], uint64(len(v)))
			cw.Write(lenBuf)
			cw.Write(v)
			return nil
		})
		if err != nil {
			return cw.n, err
		}
		if cw.err != nil {
			return cw.n, cw.err
		}
	}
	cw.Write([]byte{0})
	if cw.err != nil {
		return cw.n, cw.err
	}
	return cw.n, bw.Flush()
}

// Release ends the snapshot's read transaction.
func (sn *Snapshot) Release() { sn.txn.Discard() }

// SnapshotAppliedIndex reads just the head of a snapshot stream and returns
// the raft index the snapshotted state had applied. The meta record's key
// sorts first, so this costs one record, not the whole stream.
func SnapshotAppliedIndex(r io.Reader) (uint64, error) {
	br := bufio.NewReader(r)
	if err := readMagic(br); err != nil {
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

func readMagic(br *bufio.Reader) error {
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil {
		return fmt.Errorf("read snapshot header: %w", err)
	}
	if string(magic) != string(snapshotMagic) {
		return fmt.Errorf("not a waggle snapshot (header %q)", magic)
	}
	return nil
}

// Restore replaces the whole store with the snapshot read from r. On error
// the store may hold part of the snapshot; the caller must not serve from it.
func (s *Store) Restore(r io.Reader) error {
	br := bufio.NewReaderSize(r, 1<<20)
	if err := readMagic(br); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := s.db.DropAll(); err != nil {
		return fmt.Errorf("restore: drop old state: %w", err)
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for {
		k, err := readField(br)
		if err != nil {
			return fmt.Errorf("restore: key: %w", err)
		}
		if len(k) == 0 {
			break
		}
		v, err := readField(br)
		if err != nil {
			return fmt.Errorf("restore: value: %w", err)
		}
		if err := wb.Set(k, v); err != nil {
			return fmt.Errorf("restore: write: %w", err)
		}
	}
	return wb.Flush()
}

func readField(br *bufio.Reader) ([]byte, error) {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, err
	}
	if n > maxSnapshotField {
		return nil, errors.New("field larger than any waggle writes: corrupt snapshot")
	}
	b := make([]byte, n)
	_, err = io.ReadFull(br, b)
	return b, err
}

type countingWriter struct {
	w   io.Writer
	n   int64
	err error
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
