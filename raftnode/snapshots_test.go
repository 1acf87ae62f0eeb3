package raftnode

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/fsm"
)

// randomPush pushes n messages of random (incompressible) payloads.
func randomPush(nowMs int64, queue string, first, n int) []byte {
	items := make([]command.PushItem, n)
	for i := range items {
		p := make([]byte, 600)
		rand.Read(p)
		items[i] = command.PushItem{Queue: queue, Partition: "p", TransactionID: fmt.Sprint(first + i), MessageID: [16]byte{byte(i)},
			Payload: fmt.Appendf(nil, `"%x"`, p)}
	}
	return push(nowMs, items...)
}

// A snapshot in raft's snapshot store holds the metadata in state.bin and
// links to the segment files; opening it streams both, with the size raft
// sends a follower, and the follower that restores it has the same state.
func TestSnapshotLinksSegmentsAndStreamsThem(t *testing.T) {
	src := newFSM(t)
	var entries [][]byte
	for i := range 40 {
		entries = append(entries, randomPush(int64(1000+i), "q", i*50, 50))
	}
	src.ApplyBatch(logs(1, entries...))

	snaps, err := newSnapshotStore(t.TempDir(), 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	id := persistSnapshot(t, src, snaps, 40)

	// state.bin is the metadata only (pointers, dedup records: ~150 bytes a
	// message), far smaller than the ~2.4 MB of data.
	state, err := os.Stat(filepath.Join(snaps.dir, id, "state.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if state.Size() > 600<<10 {
		t.Fatalf("state.bin is %d bytes: the data was copied", state.Size())
	}
	links, _ := filepath.Glob(filepath.Join(snaps.dir, id, segmentLinkDir, "*.seg"))
	if len(links) == 0 {
		t.Fatal("no segment links in the snapshot")
	}

	meta, rc, err := snaps.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(stream)) != meta.Size || meta.Size < 2<<20 {
		t.Fatalf("stream of %d bytes, meta says %d", len(stream), meta.Size)
	}
	// More appends on the source do not change what the snapshot holds.
	src.ApplyBatch(logs(41, randomPush(2000, "q", 9000, 20)))

	dst := newFSM(t)
	if err := dst.Restore(nopCloser{bytes.NewReader(stream)}); err != nil {
		t.Fatal(err)
	}
	want := newFSM(t)
	want.ApplyBatch(logs(1, entries...))
	if !bytes.Equal(snapshotBytes(t, dst), snapshotBytes(t, want)) {
		t.Fatal("the restored state differs from the state at the snapshot")
	}
	// The restored follower applies what comes next exactly as the source.
	dst.ApplyBatch(logs(41, randomPush(2000, "q", 9000, 20)))
	if got := pushResults(t, dst.ApplyBatch(logs(42, randomPush(2001, "q", 9000, 1)))[0]); got[0].Status != command.PushDuplicate {
		t.Fatalf("a retried push after the restore: %+v", got[0])
	}
}

// A snapshot received from a leader arrives as one stream; the sink keeps
// the keys in state.bin and each segment in a file of its own, and a node
// restoring it links those files into its store, whether it was empty or
// held part of the data already: the data is on disk once.
func TestSnapshotReceivedIsSplitAndRestoredByLinking(t *testing.T) {
	for _, held := range []int{0, 30} {
		t.Run(fmt.Sprintf("%d of 41 entries held", held), func(t *testing.T) { testReceivedSnapshotLinks(t, held) })
	}
}

func testReceivedSnapshotLinks(t *testing.T, held int) {
	src := newFSM(t)
	// Small segments, so a follower that fell behind holds whole ones.
	create := command.CreateTopicCommand{NowMs: 999, Name: "q", Partitions: 1, SegmentBytes: 64 << 10}
	entries := [][]byte{create.Encode()}
	for i := range 40 {
		entries = append(entries, randomPush(int64(1000+i), "q", i*50, 50))
	}
	src.ApplyBatch(logs(1, entries...))
	snaps, err := newSnapshotStore(t.TempDir(), 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	id := receiveSnapshot(t, src, snaps, 40)
	dir := filepath.Join(snaps.dir, id)
	if state, err := os.Stat(filepath.Join(dir, "state.bin")); err != nil || state.Size() > 600<<10 {
		t.Fatalf("state.bin of a received snapshot: %v (%v): the data went into it", state, err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, segmentLinkDir, "*.seg"))
	if len(files) == 0 {
		t.Fatal("no segment files beside a received snapshot")
	}

	storeDir := t.TempDir()
	dst, err := fsm.NewFSM(openStore(t, storeDir))
	if err != nil {
		t.Fatal(err)
	}
	dst.LinkSnapshotFiles(snaps.openedFiles)
	if held > 0 { // a follower that fell behind
		dst.ApplyBatch(logs(1, entries[:held]...))
	}
	_, rc, err := snaps.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.Restore(rc); err != nil {
		t.Fatal(err)
	}
	want := newFSM(t)
	want.ApplyBatch(logs(1, entries...))
	if !bytes.Equal(snapshotBytes(t, dst), snapshotBytes(t, want)) {
		t.Fatal("the restored state differs from the state at the snapshot")
	}
	live, _ := filepath.Glob(filepath.Join(storeDir, "segments", "*", "*.seg"))
	if len(live) != len(files) {
		t.Fatalf("%d segment files restored, the snapshot has %d", len(live), len(files))
	}
	for _, l := range live {
		li, _ := os.Stat(l)
		linked := false
		for _, f := range files {
			fi, _ := os.Stat(f)
			linked = linked || os.SameFile(li, fi)
		}
		if !linked {
			t.Fatalf("%s was written again, not linked from the snapshot", l)
		}
	}
}

// receiveSnapshot writes src's snapshot into snaps as raft does with one
// from the leader: the whole stream copied into a new sink.
func receiveSnapshot(t *testing.T, src *fsm.FSM, snaps *snapshotStore, index uint64) string {
	t.Helper()
	return writeSnapshot(t, src, snaps, index, func(_ raft.FSMSnapshot, sink *linkingSink) error {
		if err := writeWhole(src, sink); err != nil {
			return err
		}
		return sink.Close()
	})
}

// writeWhole writes src's state as one stream, the data inside it, as
// binaries before the split of snapshots into keys and linked segments did.
func writeWhole(src *fsm.FSM, w io.Writer) error {
	sn, err := src.Store().Snapshot()
	if err != nil {
		return err
	}
	defer sn.Release()
	_, err = sn.WriteTo(w)
	return err
}

// persistSnapshot writes src's snapshot into snaps as the node itself
// does: the keys, and links to its segment files.
func persistSnapshot(t *testing.T, src *fsm.FSM, snaps *snapshotStore, index uint64) string {
	t.Helper()
	return writeSnapshot(t, src, snaps, index, func(fs raft.FSMSnapshot, sink *linkingSink) error { return fs.Persist(sink) })
}

// writeSnapshot takes src's snapshot, has write put it into a new sink of
// snaps at index (and close it), and returns the snapshot's id.
func writeSnapshot(t *testing.T, src *fsm.FSM, snaps *snapshotStore, index uint64, write func(raft.FSMSnapshot, *linkingSink) error) string {
	t.Helper()
	fs, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Release()
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(fs, sink.(*linkingSink)); err != nil {
		t.Fatal(err)
	}
	return sink.ID()
}

// A snapshot an older binary received whole (its data inside state.bin)
// is a full copy of the data; once the node has written a snapshot of its
// own after it, it is removed. One newer than the node's own is kept.
func TestSnapshotReceivedWholeGoesOnceANewerOwnOneExists(t *testing.T) {
	src := newFSM(t)
	src.ApplyBatch(logs(1, randomPush(1000, "q", 0, 50)))
	snaps, err := newSnapshotStore(t.TempDir(), 5, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	whole := func(index uint64) string {
		t.Helper()
		return writeSnapshot(t, src, snaps, index, func(_ raft.FSMSnapshot, sink *linkingSink) error {
			// Past the split, straight into raft's file sink, as before it.
			if err := writeWhole(src, sink.SnapshotSink); err != nil {
				return err
			}
			return sink.Close()
		})
	}
	exists := func(id string) bool {
		_, err := os.Stat(filepath.Join(snaps.dir, id))
		return err == nil
	}
	old, same := whole(10), whole(20)
	split := receiveSnapshot(t, src, snaps, 15)
	ownID := persistSnapshot(t, src, snaps, 20) // taken right after restoring the one received at 20
	newer := whole(30)
	if exists(old) || exists(same) {
		t.Fatal("a snapshot received whole up to the node's own is still there")
	}
	if !exists(ownID) || !exists(newer) || !exists(split) {
		t.Fatal("the node's own snapshot, a newer one or one received split (no copy) was removed")
	}
}

// Regression: a node killed while writing a snapshot left <id>.tmp behind
// with links to segment files; raft never lists or reaps it, so the links
// held disk space for ever. Opening the store removes it, and keeps
// finished snapshots.
func TestUnfinishedSnapshotsAreRemovedAtOpen(t *testing.T) {
	src := newFSM(t)
	src.ApplyBatch(logs(1, randomPush(1000, "q", 0, 50)))
	base := t.TempDir()
	snaps, err := newSnapshotStore(base, 5, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	done := persistSnapshot(t, src, snaps, 10)
	sink, err := snaps.Create(raft.SnapshotVersionMax, 20, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte("half a snapshot")); err != nil { // never closed: the crash
		t.Fatal(err)
	}
	unfinished := sink.(*linkingSink).dir
	if _, err := os.Stat(unfinished); err != nil {
		t.Fatalf("no unfinished snapshot to remove: %v", err)
	}

	if _, err := newSnapshotStore(base, 5, hclog.NewNullLogger()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(unfinished); !os.IsNotExist(err) {
		t.Fatalf("unfinished snapshot %s still there after open (%v)", filepath.Base(unfinished), err)
	}
	if _, err := os.Stat(filepath.Join(snaps.dir, done)); err != nil {
		t.Fatalf("finished snapshot gone: %v", err)
	}
}
