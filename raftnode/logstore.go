package raftnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/migrate"
	"github.com/hashicorp/raft-wal/types"
	bolt "go.etcd.io/bbolt"

	"github.com/waggle-mq/waggle/store"
)

// The raft log and raft's term and vote live in raft/wal, kept by
// hashicorp/raft-wal: append-only segment files with one fsync per append
// batch and no memory-mapped file (raft-boltdb, which the first releases
// used, fsynced twice per commit and mapped its whole file: under a 1 KB
// produce load it wrote 97,000 records/s with a peak RSS of 1.2 GB where
// raft-wal writes 122,000 with 583 MB). The term and vote sit in the WAL's
// own small bolt file, raft/wal/wal-meta.db.
const (
	walDir       = "wal"
	legacyLogDB  = "raft.db" // raft-boltdb's file, before the WAL
	walMetaFile  = "wal-meta.db"
	migrationDir = "wal.migrating"
)

// stableKeys are the keys raft and waggle keep in the stable store, as
// integers or bytes.
var (
	stableIntKeys  = [][]byte{keyCurrentTerm, keyLastVoteTerm, keyNoVoteThroughTerm, keyNewDirectory}
	stableByteKeys = [][]byte{keyLastVoteCand}
)

// walLog is raft-wal's WAL with two corrections (see GetLog and reopen)
// and a compaction that keeps what message data still needs (see
// DeleteRange).
type walLog struct {
	dir    string
	logger hclog.Logger
	holder *logHolder // nil: delete what raft asks

	// mu guards w and closed: every call holds it shared, a reopen and
	// Close exclusively.
	mu     sync.RWMutex
	w      *wal.WAL // nil: closed, or a reopen failed
	closed bool
	// stored counts the bytes appended since w was opened; at reopenAfter
	// the WAL is reopened.
	stored, reopenAfter int64
	segmentBytes        int // 0: raft-wal's default (64 MiB)
}

// reopenEvery is how many bytes the log appends between reopens of the
// WAL. raft-wal v0.4.2 keeps the writer of every sealed segment, with its
// commit buffer (as large as the largest append batch rounded up to a power
// of two: megabytes under a produce load), until the WAL is opened again,
// which reads sealed segments with a reader holding no buffer. Since the
// raft log also holds Kafka batches (log format 5) it keeps many segments
// for a long time: 10 GB of 1 KB records kept 744 MB of such buffers.
// Reopening after every four segments (64 MiB each) bounds them.
const reopenEvery = 4 * 64 << 20

var (
	errLogClosed    = errors.New("raft log: closed")
	errReopenFailed = errors.New("raft log: not open (reopening it failed)")
)

// wal returns the open WAL and the function that releases it.
func (l *walLog) wal() (*wal.WAL, func(), error) {
	l.mu.RLock()
	if l.w == nil {
		closed := l.closed
		l.mu.RUnlock()
		if closed {
			return nil, nil, errLogClosed
		}
		return nil, nil, errReopenFailed
	}
	return l.w, l.mu.RUnlock, nil
}

// reopen closes the WAL and opens it again (see reopenEvery).
func (l *walLog) reopen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errLogClosed
	}
	if l.w != nil {
		err := closeWAL(l.w)
		l.w = nil
		if err != nil {
			return err
		}
	}
	logTo := wal.WithLogger(l.logger.Named("wal"))
	var w *wal.WAL
	var err error
	if l.segmentBytes > 0 {
		w, err = wal.Open(l.dir, logTo, wal.WithSegmentSize(l.segmentBytes))
	} else {
		w, err = wal.Open(l.dir, logTo)
	}
	if err != nil {
		return fmt.Errorf("reopen the raft log: %w", err)
	}
	if err := finishMend(w); err != nil {
		return errors.Join(err, w.Close())
	}
	l.w, l.stored = w, 0
	return nil
}

// GetLog implements raft.LogStore. raft-wal v0.4.2 still answers entries of
// its active segment that a compaction removed (only its sealed segments
// check the first index); raft must see them gone, so that a follower
// behind the compacted log gets the snapshot, as with any other store.
func (l *walLog) GetLog(index uint64, log *raft.Log) error {
	w, release, err := l.wal()
	if err != nil {
		return err
	}
	defer release()
	if first, err := w.FirstIndex(); err != nil {
		return err
	} else if index < first {
		return raft.ErrLogNotFound
	}
	return l.fault(w.GetLog(index, log), l.dir) // raft panics on a failed read: say why first
}

// StoreLog implements raft.LogStore.
func (l *walLog) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

// StoreLogs implements raft.LogStore. raft calls it from one goroutine at a
// time, so the reopen it may do follows the append it counted.
func (l *walLog) StoreLogs(logs []*raft.Log) error {
	w, release, err := l.wal()
	if errors.Is(err, errReopenFailed) {
		err = l.reopen() // try again
		if err == nil {
			w, release, err = l.wal()
		}
	}
	if err != nil {
		return err
	}
	err = w.StoreLogs(logs)
	release()
	// A rotation that failed (a full disk) left the segment sealed in
	// raft-wal's metadata too: opening the WAL again makes the next one.
	// Only a tail sealed in its file alone needs the mend.
	for _, mend := range []func() error{l.reopen, l.mendSealedTail} {
		if !errors.Is(err, types.ErrSealed) {
			break
		}
		if err = mend(); err == nil {
			err = l.do(func(w *wal.WAL) error { return w.StoreLogs(logs) })
		}
	}
	for _, e := range logs {
		l.stored += int64(len(e.Data))
	}
	if err == nil && l.stored >= l.reopenAfter {
		err = l.reopen()
	}
	return l.fault(err, l.dir)
}

// fault hands err to the node's fault handler when it is a failed write
// or fsync (or EIO) of the raft log, in file or directory where: raft
// would answer a follower's next append by writing again after a failed
// fsync, and panics when its term or vote cannot be saved. It returns
// err.
func (l *walLog) fault(err error, where string) error {
	if err == nil {
		return nil
	}
	return store.ReportDiskFault(err, where)
}

// walLog must say what raft-wal says of itself: raft wipes a monotonic
// log before it installs a snapshot (the next append then starts past the
// snapshot, which raft-wal only takes on an empty log).
var _ raft.MonotonicLogStore = (*walLog)(nil)

// IsMonotonic implements raft.MonotonicLogStore: the WAL takes only
// consecutive indexes.
func (l *walLog) IsMonotonic() bool { return true }

// FirstIndex implements raft.LogStore.
func (l *walLog) FirstIndex() (uint64, error) {
	return withWAL(l, func(w *wal.WAL) (uint64, error) { return w.FirstIndex() })
}

// LastIndex implements raft.LogStore.
func (l *walLog) LastIndex() (uint64, error) {
	return withWAL(l, func(w *wal.WAL) (uint64, error) { return w.LastIndex() })
}

// Set implements raft.StableStore.
func (l *walLog) Set(key, val []byte) error {
	return l.fault(l.do(func(w *wal.WAL) error { return w.Set(key, val) }), filepath.Join(l.dir, walMetaFile))
}

// Get implements raft.StableStore.
func (l *walLog) Get(key []byte) ([]byte, error) {
	return withWAL(l, func(w *wal.WAL) ([]byte, error) { return w.Get(key) })
}

// SetUint64 implements raft.StableStore.
func (l *walLog) SetUint64(key []byte, val uint64) error {
	return l.fault(l.do(func(w *wal.WAL) error { return w.SetUint64(key, val) }), filepath.Join(l.dir, walMetaFile))
}

// GetUint64 implements raft.StableStore.
func (l *walLog) GetUint64(key []byte) (uint64, error) {
	return withWAL(l, func(w *wal.WAL) (uint64, error) { return w.GetUint64(key) })
}

// Close closes the WAL.
func (l *walLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.w == nil {
		return nil
	}
	err := closeWAL(l.w)
	l.w = nil
	return err
}

// closeWAL closes w once the rotation its last append may have started is
// done. The append that seals a full segment leaves the rotation to a
// goroutine, and Close drops a pending one: the WAL would open again with a
// sealed tail (see mendSealedTail). raft-wal's DeleteRange waits for a
// pending rotation before it looks at the range, and one past the last
// entry deletes nothing.
func closeWAL(w *wal.WAL) error {
	last, err := w.LastIndex()
	if err == nil {
		err = w.DeleteRange(last+1, last+1)
	}
	return errors.Join(err, w.Close())
}

// mendSealedTail lets a WAL whose tail segment is sealed take appends
// again. raft-wal v0.4.2 seals a full segment in the append that filled it
// and creates the next one in a goroutine; a crash in between (kill -9, a
// power loss) leaves a log that opens with that sealed segment as its tail
// and answers every append with ErrSealed, for ever. raft-wal has no call
// that starts a new segment without deleting, but a tail truncation does
// start one: the last entry is read, deleted and appended again, the same
// bytes at the same index. The entry is first saved in raft-wal's metadata
// store (keyMendEntry), and an open that finds it there and the log one
// short appends it (finishMend): raft never sees a stored entry vanish.
func (l *walLog) mendSealedTail() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return errReopenFailed
	}
	first, err := l.w.FirstIndex()
	if err != nil {
		return err
	}
	last, err := l.w.LastIndex()
	if err != nil {
		return err
	}
	if last <= first {
		// Deleting the only entry would be a head truncation, which
		// starts no segment.
		return fmt.Errorf("raft log: its tail segment is sealed and holds only entry %d; it cannot be mended in place", last)
	}
	var e raft.Log
	if err := l.w.GetLog(last, &e); err != nil {
		return fmt.Errorf("raft log: read entry %d to mend a sealed tail: %w", last, err)
	}
	saved, err := encodeMendEntry(&e)
	if err != nil {
		return err
	}
	if err := l.w.Set(keyMendEntry, saved); err != nil {
		return fmt.Errorf("raft log: save entry %d to mend a sealed tail: %w", last, err)
	}
	if err := l.w.DeleteRange(last, last); err != nil {
		return fmt.Errorf("raft log: mend a sealed tail: %w", err)
	}
	if err := finishMend(l.w); err != nil {
		return err
	}
	l.logger.Warn("mended the raft log: its tail segment was sealed but no next segment was made (a crash right after a segment filled); the last entry was rewritten into a new segment", "index", last)
	return nil
}

// keyMendEntry is waggle's key in raft-wal's metadata store: the entry
// mendSealedTail deleted, until it is appended again.
var keyMendEntry = []byte("WaggleMendEntry")

// mendCodec encodes the entry a mend saves: raft-wal's own entry codec.
var mendCodec wal.BinaryCodec

// encodeMendEntry encodes e for keyMendEntry.
func encodeMendEntry(e *raft.Log) ([]byte, error) {
	var b bytes.Buffer
	err := mendCodec.Encode(e, &b)
	return b.Bytes(), err
}

// finishMend appends the entry a mend saved when the log lacks it, and
// forgets it once the log holds it.
func finishMend(w *wal.WAL) error {
	saved, err := w.Get(keyMendEntry)
	if err != nil || len(saved) == 0 {
		return err
	}
	e := new(raft.Log)
	if err := mendCodec.Decode(saved, e); err != nil {
		return fmt.Errorf("raft log: the saved entry of a mend is damaged: %w", err)
	}
	last, err := w.LastIndex()
	if err != nil {
		return err
	}
	if last+1 == e.Index {
		if err := w.StoreLogs([]*raft.Log{e}); err != nil {
			return fmt.Errorf("raft log: append entry %d again to mend a sealed tail: %w", e.Index, err)
		}
		last = e.Index
	}
	if last < e.Index {
		return fmt.Errorf("raft log: ends at %d, before entry %d that a mend saved", last, e.Index)
	}
	return w.Set(keyMendEntry, nil)
}

// do calls fn with the open WAL, held for the call.
func (l *walLog) do(fn func(*wal.WAL) error) error {
	_, err := withWAL(l, func(w *wal.WAL) (struct{}, error) { return struct{}{}, fn(w) })
	return err
}

// withWAL calls fn with the open WAL, held for the call, and returns its
// result.
func withWAL[T any](l *walLog, fn func(*wal.WAL) (T, error)) (T, error) {
	w, release, err := l.wal()
	if err != nil {
		var zero T
		return zero, err
	}
	defer release()
	return fn(w)
}

// openWAL opens (creating) the WAL in dir. v0.4.2 or later is needed: v0.4.0
// left a tail truncation's segment sealed without its index, and the node
// could not start again (raft-wal issue 31; found by the chaos run).
func openWAL(dir string, logger hclog.Logger) (*walLog, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	l := &walLog{dir: dir, logger: logger, reopenAfter: reopenEvery}
	if err := l.reopen(); err != nil {
		return nil, err
	}
	return l, nil
}

// openLogStore opens the raft log under raftDir, first moving a log that
// raft-boltdb kept there into the WAL.
func openLogStore(raftDir string, logger hclog.Logger) (*walLog, error) {
	dir := filepath.Join(raftDir, walDir)
	legacy := filepath.Join(raftDir, legacyLogDB)
	if _, err := os.Stat(legacy); err == nil {
		if _, err := os.Stat(dir); err == nil {
			// Moved over before a crash that came before the old file went.
			if err := os.Remove(legacy); err != nil {
				return nil, err
			}
		} else if err := migrateBoltLog(legacy, dir, logger); err != nil {
			return nil, fmt.Errorf("move the raft log from %s to %s: %w", legacy, dir, err)
		}
	}
	return openWAL(dir, logger)
}

// migrateBoltLog copies a raft-boltdb log, term and vote into a new WAL
// beside it, renames it into place, then removes the old file.
func migrateBoltLog(legacy, dir string, logger hclog.Logger) error {
	tmp := filepath.Join(filepath.Dir(dir), migrationDir)
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	src, err := raftboltdb.New(raftboltdb.Options{Path: legacy, BoltOptions: &bolt.Options{Timeout: time.Second}})
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := openWAL(tmp, logger)
	if err != nil {
		return err
	}
	start := time.Now()
	err = migrate.CopyLogs(context.Background(), dst, src, 8<<20, nil)
	if err == nil {
		err = copyStable(dst, src)
	}
	if err := errors.Join(err, dst.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return err
	}
	logger.Info("moved the raft log to raft-wal", "from", legacy, "took", time.Since(start))
	return os.Remove(legacy) // still open until the deferred Close: unlinking it is fine
}

// copyStable copies the stable keys that are set (raft-boltdb answers an
// error for a key never written).
func copyStable(dst, src raft.StableStore) error {
	for _, k := range stableIntKeys {
		if v, err := src.GetUint64(k); err == nil {
			if err := dst.SetUint64(k, v); err != nil {
				return err
			}
		}
	}
	for _, k := range stableByteKeys {
		if v, err := src.Get(k); err == nil {
			if err := dst.Set(k, v); err != nil {
				return err
			}
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
