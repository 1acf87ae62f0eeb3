package raftnode

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/store"
)

// Snapshots keep the message data out of the snapshot file: raft's file
// snapshot store holds the metadata (state.bin, a few MB), and the segment
// files the snapshot needs sit beside it as hard links, so taking one
// costs time in proportion to the metadata, not the data. Opening the
// snapshot (to restore it, or to send it to a follower) streams the links'
// bytes after state.bin as the stream's segment section (store/snapshot.go).
// A snapshot received from a leader is kept the same way: as it arrives,
// the keys go to state.bin and each segment of the stream to a file of its
// own in segments/ (store.SplitSnapshot), and restoring it hard-links
// those files into the store (store.RestoreLinking), so its data is
// written once. A snapshot received whole by an older binary (state.bin
// holding the data too) is removed once a newer one of the node's own
// exists.
//
// The layout inside raft's snapshot directory (<data>/raft/snapshots/<id>):
//
//	state.bin       the stream up to the segment section (raft's CRC covers it)
//	meta.json       raft's
//	segments.json   the linked segments, oldest first (absent: state.bin is whole)
//	segments/       the links
const (
	segmentListFile = "segments.json"
	segmentLinkDir  = "segments"
)

// snapshotStore wraps raft's FileSnapshotStore with segment links.
type snapshotStore struct {
	*raft.FileSnapshotStore
	dir    string // raft's snapshot directory: <base>/snapshots
	logger hclog.Logger
	log    store.RaftLog // where batches that refs name are read from

	mu     sync.Mutex
	opened store.SegmentFiles // of the snapshot Open returned last
}

// openedFiles returns the segment files of the snapshot opened last (and
// forgets them). Raft opens the snapshot it restores and hands the stream
// to the state machine's Restore at once, on its FSM goroutine (raft wraps
// the stream, so it cannot carry them itself); Restore links the files
// whose stream, base and size match what the stream carries, and writes
// any other. Another Open in between (a leader sending a snapshot) would
// offer another snapshot's files: still the right bytes, since a stream
// position holds the same bytes in every snapshot of the cluster.
func (s *snapshotStore) openedFiles() store.SegmentFiles {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.opened
	s.opened = store.SegmentFiles{}
	return f
}

func newSnapshotStore(base string, retain int, logger hclog.Logger) (*snapshotStore, error) {
	fs, err := raft.NewFileSnapshotStoreWithLogger(base, retain, logger)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(base, "snapshots")
	if err := removeUnfinishedSnapshots(dir, logger); err != nil {
		return nil, err
	}
	return &snapshotStore{FileSnapshotStore: fs, dir: dir, logger: logger}, nil
}

// unfinishedSuffix ends the directory raft's file snapshot store writes a
// snapshot into until the snapshot is complete and renamed.
const unfinishedSuffix = ".tmp"

// removeUnfinishedSnapshots deletes the snapshots a crash left half
// written. Raft never lists or reaps them, and their links hold segment
// files (and the disk space of segments retention has dropped) for ever.
// Nothing writes a snapshot while the store opens.
func removeUnfinishedSnapshots(dir string, logger hclog.Logger) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("listing snapshots: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || filepath.Ext(e.Name()) != unfinishedSuffix {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("removing unfinished snapshot: %w", err)
		}
		logger.Info("removed a snapshot left unfinished by a crash", "dir", e.Name())
	}
	return nil
}

// Create implements raft.SnapshotStore.
func (s *snapshotStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	// raft's sink writes into <id>.tmp and renames it to <id> on Close.
	return &linkingSink{SnapshotSink: sink, dir: filepath.Join(s.dir, sink.ID()+unfinishedSuffix), store: s, index: index}, nil
}

// removeWholeUpTo removes the snapshots up to index that have no segment
// links: those received whole, a full copy of data the store and the
// node's own snapshot at index hold (right after a restore, at the same
// index). Raft only ever reads the newest snapshot.
func (s *snapshotStore) removeWholeUpTo(index uint64) error {
	metas, err := s.List()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range metas {
		if m.Index > index {
			continue
		}
		dir := filepath.Join(s.dir, m.ID)
		if _, linked, err := readSegmentList(dir); err != nil || linked {
			continue
		}
		errs = append(errs, os.RemoveAll(dir))
	}
	return errors.Join(errs...)
}

// Open implements raft.SnapshotStore: state.bin, followed by the segment
// section read from the links when the snapshot has them. The size in the
// returned meta is the whole stream's (a follower reads exactly that many
// bytes).
func (s *snapshotStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.FileSnapshotStore.Open(id)
	if err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(s.dir, id)
	segs, linked, err := readSegmentList(dir)
	if err != nil {
		rc.Close()
		return nil, nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	s.mu.Lock()
	s.opened = store.SegmentFiles{Dir: filepath.Join(dir, segmentLinkDir), Segs: segs}
	s.mu.Unlock()
	if !linked {
		return meta, rc, nil
	}
	section, size, err := store.SegmentSection(filepath.Join(dir, segmentLinkDir), segs, s.log)
	if err != nil {
		rc.Close()
		return nil, nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	whole := *meta
	whole.Size += size
	return &whole, &multiReadCloser{Reader: io.MultiReader(rc, section), closers: []io.Closer{rc, section}}, nil
}

// readSegmentList reads the segments a snapshot directory links; linked
// is false for a snapshot without links (received whole from a leader).
func readSegmentList(dir string) (segs []store.SnapshotSegment, linked bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, segmentListFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &segs)
	}
	if err != nil {
		return nil, false, fmt.Errorf("segment list: %w", err)
	}
	return segs, true, nil
}

type multiReadCloser struct {
	io.Reader
	closers []io.Closer
}

func (m *multiReadCloser) Close() error {
	var errs []error
	for _, c := range m.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// linkingSink is raft's file sink that also takes segment links, and
// splits a stream written to it whole (a snapshot from the leader) into
// state.bin and segment files.
type linkingSink struct {
	raft.SnapshotSink
	dir     string
	store   *snapshotStore
	index   uint64 // of the snapshot
	adopted bool   // it took links: a snapshot of this node's own

	split *io.PipeWriter          // to the goroutine running store.SplitSnapshot
	done  chan splitResult        // its answer
	segs  []store.SnapshotSegment // what it wrote (nil: no segment section)
}

type splitResult struct {
	segs []store.SnapshotSegment
	err  error
}

// Write implements io.Writer: the stream goes through store.SplitSnapshot.
func (l *linkingSink) Write(p []byte) (int, error) {
	if l.split == nil {
		pr, pw := io.Pipe()
		l.split, l.done = pw, make(chan splitResult, 1)
		go func() {
			segs, err := store.SplitSnapshot(pr, l.SnapshotSink, filepath.Join(l.dir, segmentLinkDir))
			pr.CloseWithError(cmp.Or(err, io.ErrClosedPipe)) // a failed split fails the writes
			l.done <- splitResult{segs, err}
		}()
	}
	return l.split.Write(p)
}

// finishSplit ends the stream and waits for the split.
func (l *linkingSink) finishSplit() error {
	if l.split == nil {
		return nil
	}
	l.split.Close()
	res := <-l.done
	l.split = nil
	l.segs = res.segs
	return res.err
}

// Cancel implements raft.SnapshotSink.
func (l *linkingSink) Cancel() error {
	if l.split != nil {
		l.split.CloseWithError(errors.New("snapshot cancelled"))
		<-l.done
		l.split = nil
	}
	return l.SnapshotSink.Cancel()
}

// Close implements raft.SnapshotSink; a received stream's segments are
// listed, and a snapshot of this node's own makes older snapshots received
// whole redundant, and they go.
func (l *linkingSink) Close() error {
	if err := l.finishSplit(); err != nil {
		l.SnapshotSink.Cancel()
		return fmt.Errorf("snapshot: %w", err)
	}
	if l.segs != nil {
		if err := l.writeSegmentList(l.segs); err != nil {
			l.SnapshotSink.Cancel()
			return err
		}
	}
	if err := l.SnapshotSink.Close(); err != nil {
		return store.ReportDiskFault(err, l.dir) // its fsync failed, say
	}
	if l.adopted {
		if err := l.store.removeWholeUpTo(l.index); err != nil {
			l.store.logger.Warn("could not remove a snapshot received whole (the next snapshot tries again)", "error", err)
		}
	}
	return nil
}

// AdoptSegments moves the pinned links into the snapshot's directory (one
// rename) and lists them.
func (l *linkingSink) AdoptSegments(pinDir string, segs []store.SnapshotSegment) error {
	if err := l.finishSplit(); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if segs == nil {
		segs = []store.SnapshotSegment{}
	}
	if pinDir != "" {
		if err := os.Rename(pinDir, filepath.Join(l.dir, segmentLinkDir)); err != nil {
			return fmt.Errorf("snapshot: take segment links: %w", err)
		}
	}
	l.adopted = true
	return l.writeSegmentList(segs)
}

// writeSegmentList writes segments.json, which makes the snapshot one with
// its data in files beside it.
func (l *linkingSink) writeSegmentList(segs []store.SnapshotSegment) error {
	b, err := json.Marshal(segs)
	if err != nil {
		return err
	}
	path := filepath.Join(l.dir, segmentListFile)
	return store.ReportDiskFault(writeFileSync(path, b), path)
}

func writeFileSync(path string, b []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// checkSizes checks a snapshot without reading it: state.bin holds the
// bytes raft recorded (the linked part excluded), and each linked segment
// file holds at least the bytes the snapshot needs.
func (s *snapshotStore) checkSizes(id string) error {
	dir := filepath.Join(s.dir, id)
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return err
	}
	var meta struct{ Size int64 }
	if err := json.Unmarshal(b, &meta); err != nil {
		return fmt.Errorf("snapshot %s: meta.json: %w", id, err)
	}
	fi, err := os.Stat(filepath.Join(dir, "state.bin"))
	if err != nil {
		return err
	}
	if fi.Size() != meta.Size {
		return fmt.Errorf("snapshot %s: state.bin holds %d bytes, raft recorded %d", id, fi.Size(), meta.Size)
	}
	segs, _, err := readSegmentList(dir)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", id, err)
	}
	for _, sg := range segs {
		fi, err := os.Stat(filepath.Join(dir, segmentLinkDir, sg.Path))
		if err != nil {
			return fmt.Errorf("snapshot %s: %w", id, err)
		}
		if uint64(fi.Size()) < sg.Size {
			return fmt.Errorf("snapshot %s: segment %s holds %d bytes, the snapshot needs %d", id, sg.Path, fi.Size(), sg.Size)
		}
	}
	return nil
}
