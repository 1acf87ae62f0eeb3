package fsm

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/fault"
	"github.com/waggle-mq/waggle/store"
)

// A badger transaction holds 104,857 writes or 9.6 MB with default
// options. The FSM commits before an entry once the open transaction passes
// these marks; one entry (at most MaxEntryWrites writes, a few MB) stays
// well below the rest.
const (
	commitAfterWrites = 30_000
	commitAfterBytes  = 4 << 20
)

// FSM adapts raft to the Processor: it applies batches of committed entries
// in one badger transaction together with the last applied index, skips
// entries a restart finds already applied, and snapshots the store.
type FSM struct {
	store *store.Store
	proc  Processor

	mu   sync.Mutex // guards meta between the apply and restore paths
	meta store.Meta
	// logFormat, appliedIndex and clockMs mirror meta for LogFormat,
	// which every proposal asks, and for AppliedIndex and ClockMs, which
	// health checks and waits for a follower to catch up ask: reading them
	// must not wait for a batch being applied, or a snapshot restored,
	// under mu.
	logFormat    atomic.Uint32
	appliedIndex atomic.Uint64
	clockMs      atomic.Int64

	signalMu sync.Mutex
	signals  map[uint64]chan struct{} // partition id -> closed on its next append

	// appliedBytes and appliedEntries count the command entries applied
	// since start, for sizing the log in bytes (see raftnode/logbytes.go).
	appliedBytes, appliedEntries atomic.Uint64
	// restores counts snapshots restored since start (see raftnode/logbytes.go).
	restores atomic.Uint64
	// stateBytes is the size of the keys the last snapshot wrote (its
	// state.bin), which spaces snapshots out (see raftnode/logbytes.go).
	stateBytes atomic.Uint64
	// restoreFiles, when set, names the segment files of the snapshot
	// being restored, which Restore links instead of copying.
	restoreFiles func() store.SegmentFiles

	// tap, when set, sees each entry before it is applied: tests that
	// apply entries without raft keep the log refs read from with it.
	tap func(*raft.Log)

	// EntryWrites, when set, is told how many keys each command entry
	// wrote (see MaxEntryWrites); set it before raft starts.
	EntryWrites func(t command.CommandType, writes int)

	// Anomaly, when set, is told of state that a consistent store never
	// holds, found while applying (a bug, or a store damaged on disk):
	// the entry is applied as the state says, the same on every replica
	// with that state, and the report names what was found. Set it before
	// raft starts.
	Anomaly func(msg string, args ...any)
	// anomalies counts them since start.
	anomalies atomic.Uint64

	// damaged is set by a restore that failed part way
	// (store.ErrRestoreIncomplete) and cleared by one that succeeds: until
	// then the store mixes two states and nothing may be applied to it.
	damaged atomic.Pointer[error]

	// digests publishes the state digest (digest.go).
	digests digests
	// checks runs the state checks (statecheck.go).
	checks checks
	// Digested, when set, is told the state digest at each index that is
	// a multiple of DigestLogEvery. Set it before raft starts.
	Digested func(DigestPoint)
}

// Damaged returns the error of a restore that failed part way, while no
// restore has succeeded since: the store then holds part of a snapshot,
// and must not be read or applied to. nil otherwise.
func (f *FSM) Damaged() error {
	if p := f.damaged.Load(); p != nil {
		return *p
	}
	return nil
}

// reportAnomaly counts an anomaly and tells the Anomaly hook.
func (f *FSM) reportAnomaly(msg string, args ...any) {
	f.anomalies.Add(1)
	if f.Anomaly != nil {
		f.Anomaly(msg, args...)
	}
}

// Anomalies counts the state anomalies found while applying since start
// (see Anomaly).
func (f *FSM) Anomalies() uint64 { return f.anomalies.Load() }

// AppendSignal returns a channel closed once an append to the partition is
// committed to the store after this call: long-polling readers wait on it
// instead of polling.
func (f *FSM) AppendSignal(partitionID uint64) <-chan struct{} {
	f.signalMu.Lock()
	defer f.signalMu.Unlock()
	ch := f.signals[partitionID]
	if ch == nil {
		if f.signals == nil {
			f.signals = map[uint64]chan struct{}{}
		}
		ch = make(chan struct{})
		f.signals[partitionID] = ch
	}
	return ch
}

func (f *FSM) signalAppends(partitionIDs []uint64) {
	if len(partitionIDs) == 0 {
		return
	}
	f.signalMu.Lock()
	defer f.signalMu.Unlock()
	for _, id := range partitionIDs {
		if ch := f.signals[id]; ch != nil {
			close(ch)
			delete(f.signals, id)
		}
	}
}

// NewFSM returns a state machine over st, resuming from the applied index
// stored in it.
func NewFSM(st *store.Store) (*FSM, error) {
	f := &FSM{store: st}
	if err := f.loadMeta(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *FSM) loadMeta() error {
	return f.store.View(func(tx *store.Tx) error {
		m, err := tx.Meta()
		if err != nil {
			return err
		}
		f.setMeta(m) // callers hold f.mu, or nothing else runs yet
		return checkLogFormat(m)
	})
}

// AppliedSize reports the bytes and number of command entries applied
// since start.
func (f *FSM) AppliedSize() (bytes, entries uint64) {
	return f.appliedBytes.Load(), f.appliedEntries.Load()
}

// Restores counts the snapshots restored since start.
func (f *FSM) Restores() uint64 { return f.restores.Load() }

// StateBytes is the size of the keys the last snapshot wrote (its
// state.bin), which spaces snapshots out.
func (f *FSM) StateBytes() uint64 { return f.stateBytes.Load() }

// Store is the store the state machine applies to.
func (f *FSM) Store() *store.Store { return f.store }

// LinkSnapshotFiles makes Restore link the segment files files names
// (those of the snapshot being restored) instead of copying them.
func (f *FSM) LinkSnapshotFiles(files func() store.SegmentFiles) { f.restoreFiles = files }

// LogFormat is the cluster's raft log format as of the last applied
// batch.
func (f *FSM) LogFormat() command.LogFormat { return command.LogFormat(f.logFormat.Load()) }

// setMeta replaces meta and its mirrors, with the digests passed on the
// way to it; the caller holds f.mu.
func (f *FSM) setMeta(m store.Meta, passed ...DigestPoint) {
	f.meta = m
	f.logFormat.Store(uint32(effectiveLogFormat(m)))
	f.appliedIndex.Store(m.AppliedIndex)
	f.clockMs.Store(m.ClockMs)
	f.digests.set(m.DigestSince, DigestPoint{Index: m.AppliedIndex, Digest: m.Digest}, passed)
	for _, p := range passed {
		if p.Index%DigestLogEvery == 0 && f.Digested != nil {
			f.Digested(p)
		}
	}
}

// AppliedIndex is the last raft index whose effects are in the store.
func (f *FSM) AppliedIndex() uint64 { return f.appliedIndex.Load() }

// ClockMs is the replicated clock (Unix ms) as of the last applied entry:
// the latest time a leader stamped into one. Timers, leases and dedup
// windows expire by it.
func (f *FSM) ClockMs() int64 { return f.clockMs.Load() }

// Apply implements raft.FSM.
func (f *FSM) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch implements raft.BatchingFSM.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.Damaged(); err != nil {
		// Applying on top would skip entries the snapshot lacks (the
		// applied index is the old one) or mix them into its state: stop,
		// and let the restart restore the snapshot again.
		panic(fmt.Sprintf("fsm: not applying entries %d-%d: %v", logs[0].Index, logs[len(logs)-1].Index, err))
	}
	answers := make([]any, len(logs))
	f.proc.anomaly = f.reportAnomaly
	tx := f.store.BeginWrite()
	defer func() { tx.Discard() }()
	meta := f.meta
	var passed []DigestPoint // digests at multiples of DigestEvery
	for i, l := range logs {
		if l.Index <= meta.AppliedIndex {
			continue // applied before a restart; the store already has it
		}
		if f.tap != nil {
			f.tap(l)
		}
		var cmd []byte
		if l.Type == raft.LogCommand {
			var err error
			if cmd, err = command.Unseal(l.Data); err != nil {
				// Applying it could make this replica diverge; a restart
				// checks the log and repairs it from the peers.
				panic(fmt.Sprintf("fsm: log entry %d: %v", l.Index, err))
			}
		}
		// A cleanup entry reads the state as committed (see
		// store.Tx.CleanUp), so it starts a transaction of its own; so does
		// a compaction entry, whose scans would otherwise sort the
		// transaction's pending writes each time.
		writes, bytes := tx.Pending()
		if writes > commitAfterWrites || bytes > commitAfterBytes || (writes > 0 && len(cmd) > 0 && (command.CommandType(cmd[0]) == command.CmdCleanup || command.CommandType(cmd[0]) == command.CmdCompact)) {
			f.commit(tx, meta, passed)
			tx, passed = f.store.BeginWrite(), nil
		}
		if cmd != nil && fault.Is("fsm-skip-entry", 100) {
			// A replica that skips an entry (a test-only fault): commit
			// what came before, apply the entry to a transaction of its
			// own and drop it.
			f.commit(tx, meta, passed)
			tx.Discard()
			tx, passed = f.store.BeginWrite(), nil
			skipped, m := f.store.BeginWrite(), meta
			answers[i] = f.proc.Apply(skipped, &m, cmd)
			skipped.Discard()
			cmd = nil
		}
		sum := tx.WriteSum()
		if cmd != nil {
			f.appliedBytes.Add(uint64(len(l.Data)))
			f.appliedEntries.Add(1)
			before, _ := tx.Pending()
			f.proc.term, f.proc.index, f.proc.entry = l.Term, l.Index, l.Data
			answers[i] = f.proc.Apply(tx, &meta, cmd)
			if f.EntryWrites != nil {
				after, _ := tx.Pending()
				f.EntryWrites(command.CommandType(cmd[0]), after-before)
			}
		}
		meta.AppliedIndex, meta.AppliedTerm = l.Index, l.Term
		meta.Digest = store.ChainDigest(meta.Digest, l.Index, tx.WriteSum()-sum, meta)
		if l.Index%DigestEvery == 0 {
			passed = append(passed, DigestPoint{Index: l.Index, Digest: meta.Digest})
		}
		if asked := f.checkDue(l.Index); asked != 0 {
			f.commit(tx, meta, passed)
			tx, passed = f.store.BeginWrite(), nil
			f.startCheck(asked, l.Index)
		}
	}
	f.proc.entry = nil
	f.commit(tx, meta, passed)
	f.signalAppends(f.proc.appended)
	f.proc.appended = f.proc.appended[:0]
	return answers
}

// commit stores meta with the transaction's writes. Failing to write state
// already acknowledged by raft leaves no safe way on: panic, and let the
// restart replay from the raft log. passed are the digests the entries
// reached on the way, published with meta.
func (f *FSM) commit(tx *store.Tx, meta store.Meta, passed []DigestPoint) {
	if meta == f.meta {
		return // nothing applied
	}
	if err := tx.PutMeta(meta); err != nil {
		panic(fmt.Sprintf("fsm: write meta: %v", err))
	}
	if err := tx.Commit(); err != nil {
		panic(fmt.Sprintf("fsm: commit applied entries: %v", err))
	}
	f.setMeta(meta, passed...)
}

// Snapshot implements raft.FSM. Raft calls it between batches: it fsyncs
// the message data applied so far (the snapshot lets raft compact the log
// that is its durable copy), opens a read transaction and links the
// segment files; Persist writes the stream later, concurrently with new
// applies.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	if err := f.Damaged(); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err) // it would carry the mix
	}
	if err := f.store.SyncData(); err != nil {
		return nil, fmt.Errorf("snapshot: sync message data: %w", err)
	}
	sn, err := f.store.Snapshot()
	if err != nil {
		return nil, err
	}
	return &fsmSnapshot{snap: sn, stateBytes: &f.stateBytes}, nil
}

// Restore implements raft.FSM: the store is replaced whole.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.StopCheck()
	var files store.SegmentFiles
	if f.restoreFiles != nil {
		files = f.restoreFiles()
	}
	if err := f.store.RestoreLinking(rc, files); err != nil {
		if errors.Is(err, store.ErrRestoreIncomplete) {
			f.damaged.Store(&err)
		}
		return err
	}
	f.damaged.Store(nil)
	f.restores.Add(1)
	f.digests.forget()
	if err := f.loadMeta(); err != nil {
		return err
	}
	f.checkPassedBy(f.meta.AppliedIndex)
	return nil
}

// Reset empties the store, for raft to re-apply its whole log.
func (f *FSM) Reset() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.StopCheck()
	if err := f.store.Reset(); err != nil {
		return err
	}
	f.damaged.Store(nil)
	f.digests.forget()
	return f.loadMeta()
}

type fsmSnapshot struct {
	snap       *store.Snapshot
	stateBytes *atomic.Uint64 // set to the keys' size once persisted
}

// Persist writes the snapshot's keys to the sink. The segment files go as
// hard links into the snapshot's directory when the sink takes them (see
// snapshots.go), and are copied into the stream otherwise.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	fail := func(err error) error {
		sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	a, linking := sink.(segmentAdopter)
	if !linking {
		if _, err := s.snap.WriteTo(sink); err != nil {
			return fail(err)
		}
		return sink.Close()
	}
	n, err := s.snap.WriteState(sink)
	if err != nil {
		return fail(err)
	}
	s.stateBytes.Store(uint64(n))
	if err := a.AdoptSegments(s.snap.PinDir, s.snap.Segments); err != nil {
		return fail(err)
	}
	s.snap.PinDir = ""
	return sink.Close()
}

func (s *fsmSnapshot) Release() { s.snap.Release() }

// segmentAdopter is a snapshot sink that takes a snapshot's segment links
// (raftnode's snapshot store): Persist hands it the pinned segment files
// instead of streaming their bytes.
type segmentAdopter interface {
	AdoptSegments(pinDir string, segs []store.SnapshotSegment) error
}
