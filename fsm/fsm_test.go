package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/fsm/fsmtest"
	"github.com/waggle-mq/waggle/store"
)

const hourMs = 3600_000

// The entry builders are shared with the raft runtime's tests.
var (
	openStore   = fsmtest.OpenStore
	logs        = fsmtest.Logs
	push        = fsmtest.Push
	item        = fsmtest.Item
	pushResults = fsmtest.PushResults
)

func newFSM(t *testing.T) *FSM {
	t.Helper()
	f, err := NewFSM(openStore(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	return keepLog(f)
}

func requireResult(t *testing.T, got command.PushResult, status command.PushStatus, offset uint64, tag byte) {
	t.Helper()
	if got.Status != status || got.Offset != offset || got.MessageID != [16]byte{tag} {
		t.Fatalf("result = {status %d offset %d id %x}, want {status %d offset %d id %x}",
			got.Status, got.Offset, got.MessageID[0], status, offset, tag)
	}
}

// snapshotBytes is the whole state as the snapshot stream writes it; equal
// bytes mean equal state.
func snapshotBytes(t *testing.T, f *FSM) []byte {
	t.Helper()
	snap, err := f.store.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestPushDedupWithinWindowAndRequest(t *testing.T) {
	f := newFSM(t)
	const t0 = 1_000 * hourMs
	answers := f.ApplyBatch(logs(1,
		push(t0, item("q", "p", "a", 1), item("q", "p", "a", 2), item("q", "p", "b", 3), item("q", "other", "a", 4)),
		push(t0+hourMs-1, item("q", "p", "a", 5)),
		push(t0+hourMs, item("q", "p", "a", 6)),
	))
	first := pushResults(t, answers[0])
	requireResult(t, first[0], command.PushQueued, 0, 1)
	requireResult(t, first[1], command.PushDuplicate, 0, 1) // repeat inside the request
	requireResult(t, first[2], command.PushQueued, 1, 3)
	requireResult(t, first[3], command.PushQueued, 0, 4) // another partition is another scope
	requireResult(t, pushResults(t, answers[1])[0], command.PushDuplicate, 0, 1)
	requireResult(t, pushResults(t, answers[2])[0], command.PushQueued, 2, 6) // the window has passed
}

func TestWindowZeroStillDedupsInsideOneRequest(t *testing.T) {
	f := newFSM(t)
	zero := int64(0)
	cfg := command.ConfigureQueueCommand{NowMs: 1, Queue: "k", Options: command.QueueOptions{DedupWindowSeconds: &zero}}
	answers := f.ApplyBatch(logs(1,
		cfg.Encode(),
		push(2, item("k", "0", "a", 1), item("k", "0", "a", 2)),
		push(3, item("k", "0", "a", 3)),
	))
	if q := answers[0].(command.ConfigureQueueResult).Queue; q.DedupWindowSeconds != 0 {
		t.Fatalf("window = %d after configuring 0", q.DedupWindowSeconds)
	}
	r := pushResults(t, answers[1])
	requireResult(t, r[0], command.PushQueued, 0, 1)
	requireResult(t, r[1], command.PushDuplicate, 0, 1)
	requireResult(t, pushResults(t, answers[2])[0], command.PushQueued, 1, 3)
}

func TestRejectsOverlongTransactionID(t *testing.T) {
	f := newFSM(t)
	long := string(make([]byte, 65536))
	r := pushResults(t, f.ApplyBatch(logs(1, push(1, item("q", "p", long, 1), item("q", "p", "ok", 2))))[0])
	if r[0].Status != command.PushRejected || r[0].Error == "" {
		t.Fatalf("overlong id: %+v, want rejected with an error", r[0])
	}
	requireResult(t, r[1], command.PushQueued, 0, 2)
}

// Regression: the longest allowed id once overflowed badger's key limit
// and panicked the apply. Long ids dedup like short ones, and expire.
func TestLongestTransactionIDDedupsAndExpires(t *testing.T) {
	f := newFSM(t)
	long := string(bytes.Repeat([]byte{'y'}, 65535))
	answers := f.ApplyBatch(logs(1,
		push(1, item("q", "p", long, 1)),
		push(2, item("q", "p", long, 2), item("q", "p", long[:65534], 3)),
		prune(hourMs+2, 10),
		push(hourMs+3, item("q", "p", long, 5)),
	))
	if got := answers[2].(command.PruneDedupResult).Removed; got != 2 {
		t.Fatalf("prune removed %d long-id records, want 2", got)
	}
	requireResult(t, pushResults(t, answers[0])[0], command.PushQueued, 0, 1)
	requireResult(t, pushResults(t, answers[1])[0], command.PushDuplicate, 0, 1)
	requireResult(t, pushResults(t, answers[1])[1], command.PushQueued, 1, 3) // a different long id
	requireResult(t, pushResults(t, answers[3])[0], command.PushQueued, 2, 5) // pruned after its window
}

// Regression guard: a new leader whose wall clock lags must not make the
// state machine's time go backwards (it would revive expired ids, and two
// replicas could disagree with a restart in between).
func TestReplicatedClockNeverGoesBackwards(t *testing.T) {
	f := newFSM(t)
	const t0 = 1_000 * hourMs
	answers := f.ApplyBatch(logs(1,
		push(t0, item("q", "p", "x", 1)),
		push(t0+2*hourMs, item("q", "p", "y", 2)),
		push(t0+10, item("q", "p", "x", 3)), // stamped by a lagging leader
	))
	// At the replicated clock (t0+2h) x's window has passed.
	requireResult(t, pushResults(t, answers[2])[0], command.PushQueued, 2, 3)
	var msgs []store.Entry
	f.store.View(func(tx *store.Tx) error {
		q, _ := tx.Queue("q")
		p, _ := tx.Partition(q.ID, "p")
		msgs, _ = tx.Entries(p.ID, 0, 1<<20, 10)
		return nil
	})
	if len(msgs) != 3 || msgs[2].Message.TimestampMs != t0+2*hourMs {
		t.Fatalf("messages %+v: want 3, the last stamped with the replicated clock", msgs)
	}
}

// The applied index and the clock answer while a batch is being applied
// (or a snapshot restored) under the apply lock: a health check must not
// wait for either.
func TestAppliedIndexAnswersDuringAnApply(t *testing.T) {
	f := newFSM(t)
	f.ApplyBatch(logs(1, push(hourMs, item("q", "p", "x", 1))))
	f.mu.Lock()
	defer f.mu.Unlock()
	answered := make(chan [2]int64, 1)
	go func() { answered <- [2]int64{int64(f.AppliedIndex()), f.ClockMs()} }()
	select {
	case got := <-answered:
		if got != [2]int64{1, hourMs} {
			t.Fatalf("applied index and clock %v, want [1 %d]", got, hourMs)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("AppliedIndex and ClockMs wait for the apply lock")
	}
}

func prune(nowMs int64, limit int) []byte {
	c := command.PruneDedupCommand{NowMs: nowMs, Limit: limit}
	return c.Encode()
}

func TestPruneForgetsExpiredIDsInBoundedSteps(t *testing.T) {
	f := newFSM(t)
	one := int64(1)
	cfg := command.ConfigureQueueCommand{NowMs: 0, Queue: "q", Options: command.QueueOptions{DedupWindowSeconds: &one}}
	var items []command.PushItem
	for i := 0; i < 300; i++ {
		items = append(items, item("q", "p", fmt.Sprint("id-", i), 1))
	}
	answers := f.ApplyBatch(logs(1, cfg.Encode(), push(1000, items...), push(5000, item("q", "p", "z", 2)),
		prune(5001, 256), prune(5002, 256), prune(5003, 256)))
	for i, want := range []int{256, 44, 0} {
		if got := answers[3+i].(command.PruneDedupResult).Removed; got != want {
			t.Fatalf("prune %d removed %d, want %d", i, got, want)
		}
	}
	f.store.View(func(tx *store.Tx) error {
		q, _ := tx.Queue("q")
		p, _ := tx.Partition(q.ID, "p")
		for i := 0; i < 300; i++ {
			if _, found, _ := tx.Dedup(p.ID, fmt.Sprint("id-", i)); found {
				t.Errorf("id-%d still has a dedup record after its window", i)
			}
		}
		if _, found, _ := tx.Dedup(p.ID, "z"); !found {
			t.Error("live id z was pruned")
		}
		return nil
	})
	if got := f.ApplyBatch(logs(7, prune(6000, 256)))[0].(command.PruneDedupResult).Removed; got != 1 {
		t.Fatalf("pruning at z's expiry removed %d, want 1", got)
	}
}

// After a restart the FSM must skip entries the store already holds:
// applying them again would store messages twice.
func TestRestartSkipsAppliedEntries(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := NewFSM(st)
	entries := logs(1, push(1, item("q", "p", "a", 1)), push(2, item("q", "p", "b", 2)))
	f.ApplyBatch(entries)
	st.Close()

	f2, err := NewFSM(openStore(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if f2.AppliedIndex() != 2 {
		t.Fatalf("applied index after reopen = %d, want 2", f2.AppliedIndex())
	}
	answers := f2.ApplyBatch(append(entries, logs(3, push(3, item("q", "p", "c", 3)))...))
	if answers[0] != nil || answers[1] != nil {
		t.Fatalf("replayed entries were applied again: %v", answers[:2])
	}
	requireResult(t, pushResults(t, answers[2])[0], command.PushQueued, 2, 3)
}

func TestSnapshotRestoreGivesSameState(t *testing.T) {
	src := newFSM(t)
	src.ApplyBatch(logs(1, push(1, item("q", "p", "a", 1), item("q", "r", "b", 2)), push(2, item("q2", "p", "c", 3))))
	sink := persisted(t, src)

	dst := newFSM(t)
	dst.ApplyBatch(logs(1, push(1, item("junk", "p", "x", 9)))) // replaced whole by the restore
	if err := dst.Restore(sink.reader()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, src), snapshotBytes(t, dst)) {
		t.Fatal("restored state differs from the snapshot's source")
	}
	if dst.AppliedIndex() != 2 {
		t.Fatalf("applied index after restore = %d, want 2", dst.AppliedIndex())
	}
	r := pushResults(t, dst.ApplyBatch(logs(3, push(3, item("q", "p", "a", 7))))[0])
	requireResult(t, r[0], command.PushDuplicate, 0, 1)
}

func TestRestoreRejectsGarbage(t *testing.T) {
	f := newFSM(t)
	if err := f.Restore(nopCloser{bytes.NewReader([]byte("not a snapshot"))}); err == nil {
		t.Fatal("garbage restored without error")
	}
}

// The state must not depend on how raft happened to batch entries: batches
// differ between replicas. Large entries also force the FSM to split its
// badger transaction.
func TestBatchingDoesNotChangeState(t *testing.T) {
	var entries []*raft.Log
	for e := 0; e < 8; e++ {
		var items []command.PushItem
		for i := 0; i < 5000; i++ {
			items = append(items, item("q", fmt.Sprint(i%3), fmt.Sprint("id-", (e*5000+i)%33000), byte(e)))
		}
		entries = append(entries, logs(uint64(e+1), push(int64(e), items...))...)
	}
	oneBatch, oneByOne := newFSM(t), newFSM(t)
	oneBatch.ApplyBatch(entries)
	for _, l := range entries {
		oneByOne.Apply(l)
	}
	if !bytes.Equal(snapshotBytes(t, oneBatch), snapshotBytes(t, oneByOne)) {
		t.Fatal("state differs between one batch and one entry at a time")
	}
	if oneBatch.AppliedIndex() != 8 {
		t.Fatalf("applied index = %d, want 8", oneBatch.AppliedIndex())
	}
}

func TestUndecodableEntryPanics(t *testing.T) {
	for name, data := range map[string][]byte{
		"unknown type": {0xEE, 1, 2},
		"truncated":    push(1, item("q", "p", "a", 1))[:10],
		"empty":        {},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			newFSM(t).Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: command.Seal(data)})
		})
	}
}

func TestNonCommandEntriesAdvanceAppliedIndex(t *testing.T) {
	f := newFSM(t)
	f.ApplyBatch([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogConfiguration}})
	if f.AppliedIndex() != 1 {
		t.Fatalf("applied index = %d, want 1", f.AppliedIndex())
	}
}

// persisted is a snapshot of f written out as raft would.
func persisted(t *testing.T, f *FSM) *memSink {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	return sink
}

type memSink struct{ bytes.Buffer }

func (m *memSink) ID() string    { return "mem" }
func (m *memSink) Cancel() error { return nil }
func (m *memSink) Close() error  { return nil }
func (m *memSink) reader() nopCloser {
	return nopCloser{bytes.NewReader(m.Bytes())}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// A flipped bit in a log entry is refused, never applied as some other
// command.
func TestEntryWithAFlippedBitIsRefused(t *testing.T) {
	data := command.Seal(push(1, item("q", "p", "a", 1)))
	data[len(data)/2] ^= 0x08
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "checksum") {
			t.Fatalf("applied or refused for another reason: %v", r)
		}
	}()
	newFSM(t).Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: data})
}

// A dedup hit naming an offset its partition has not reached is state a
// consistent store never holds: it is reported, and the push still answers
// as the state says (every replica with that state answers alike).
func TestDedupRecordAheadOfItsPartitionIsReported(t *testing.T) {
	f := newFSM(t)
	var reports []string
	f.Anomaly = func(msg string, args ...any) { reports = append(reports, fmt.Sprint(append([]any{msg}, args...)...)) }
	const t0 = 1_000 * hourMs
	f.ApplyBatch(logs(1, push(t0, item("q", "p", "a", 1))))
	again := f.ApplyBatch(logs(2, push(t0+1, item("q", "p", "a", 2))))
	requireResult(t, pushResults(t, again[0])[0], command.PushDuplicate, 0, 1)
	if len(reports) != 0 {
		t.Fatalf("a consistent store reported %q", reports)
	}

	// The partition loses its message; the dedup record stays.
	forgetMessages(t, f, "q", "p")

	third := f.ApplyBatch(logs(3, push(t0+2, item("q", "p", "a", 3))))
	requireResult(t, pushResults(t, third[0])[0], command.PushDuplicate, 0, 1)
	if len(reports) != 1 || !strings.Contains(reports[0], "has not reached") || f.Anomalies() != 1 {
		t.Fatalf("reports = %q, counted %d, want one about the dedup record ahead of its partition", reports, f.Anomalies())
	}
}

// A restore that fails part way leaves a store of no one state: the FSM
// applies nothing more to it (it would skip or mix entries) until a
// restore succeeds.
func TestRestoreFailedPartWayStopsApplying(t *testing.T) {
	src := newFSM(t)
	src.ApplyBatch(logs(1, push(1, item("q", "p", "a", 1), item("q", "r", "b", 2))))
	whole := persisted(t, src).Bytes()

	dst := newFSM(t)
	dst.ApplyBatch(logs(1, push(1, item("other", "p", "x", 9)), push(2, item("other", "p", "y", 8))))
	err := dst.Restore(nopCloser{bytes.NewReader(whole[:len(whole)/2])})
	if !errors.Is(err, store.ErrRestoreIncomplete) || dst.Damaged() == nil {
		t.Fatalf("restore of half a snapshot: err %v, damaged %v; want ErrRestoreIncomplete", err, dst.Damaged())
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "part of a snapshot") {
				t.Fatalf("applying after a failed restore: panic %v, want one naming the half restore", r)
			}
		}()
		dst.ApplyBatch(logs(3, push(3, item("q", "p", "c", 3))))
	}()
	if _, err := dst.Snapshot(); err == nil {
		t.Fatal("a snapshot of a half-restored store was taken")
	}

	if err := dst.Restore(nopCloser{bytes.NewReader(whole)}); err != nil || dst.Damaged() != nil {
		t.Fatalf("restore of the whole snapshot: err %v, damaged %v", err, dst.Damaged())
	}
	r := pushResults(t, dst.ApplyBatch(logs(3, push(3, item("q", "p", "a", 7))))[0])
	requireResult(t, r[0], command.PushDuplicate, 0, 1)
}

// forgetMessages sets a partition back to offset 0 outside the state
// machine, as a damaged store would hold it.
func forgetMessages(t *testing.T, f *FSM, queue, partition string) {
	t.Helper()
	tx := f.store.BeginWrite()
	defer tx.Discard()
	q, err := tx.Queue(queue)
	if err != nil {
		t.Fatal(err)
	}
	part, err := tx.Partition(q.ID, partition)
	if err != nil {
		t.Fatal(err)
	}
	part.NextOffset = 0
	if err := tx.PutPartition(part); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
