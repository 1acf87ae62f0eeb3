package fsm

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

// A replica's state must come only from the entries it applied: not from
// what its process remembers. The store keeps node-local memory that apply
// reads (the dedup prune floor, the dedup logs' index and filters, the
// queue catalog, the refs to batches in the raft log), rebuilt from disk
// when a node starts. A replica that ran throughout and one that
// restarted must therefore give the same answers and the same state for
// every entry.
//
// This test drives random work (the commands a leader proposes, read off
// the state the way a leader reads it) through one replica that never
// stops and through replicas that restart in each way a node does:
// closed and opened again, killed (its files copied as they stand, the
// process abandoned, the copy opened, as kill -9 leaves them with the page
// cache intact), and restored from the first replica's snapshot. After
// every batch each answer and the state digest must match the first
// replica's; at the end the whole state must.
func TestReplicasAgreeAcrossRestartsUnderRandomWork(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	entries := 4000
	if testing.Short() || raceEnabled {
		seeds, entries = seeds[:1], 1500
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			w := newReplayWork(t, seed)
			w.run(entries)
		})
	}
}

// replayWork is one run: the replicas, the shared raft log, and what the
// leader knows.
type replayWork struct {
	t   *testing.T
	rng *rand.Rand
	log *memLog

	ref    *replica   // never restarts
	others []*replica // restart, each its own way

	index uint64
	nowMs int64
	txSeq int

	// What a leader reads off state or answers to propose more work.
	recent   []string                       // recent transactionIds, pushed again by retries
	lastKey  string                         // the last Idempotency-Key, sent again by retries
	leases   []replayLease                  // popped and not acked yet
	txIDs    map[string]string              // queue/partition/offset -> transactionId
	producer int64                          // an idempotent producer's id, 0 before one is given
	seq      map[int32]int32                // its next sequence per partition
	lastSent map[int32]command.ProduceBatch // the last batch sent per partition, resent by retries
	restarts map[string]int                 // restarts per replica
	kinds    map[string]int                 // entries proposed per kind
	answers  map[uint64]string              // the reference replica's answers, by index
	kindAt   map[uint64]string              // each entry's kind, by index

	pending     []*raft.Log  // proposed, not yet applied
	hooks       []answerHook // told the reference's answers to pending entries
	lastAnswers []any        // the reference's answers to the last batch
}

type replayLease struct {
	group, lease, queue, partition string
	partitionID                    uint64
	offsets                        []int64
}

// replica is one FSM over a store in its own directory.
type replica struct {
	name    string
	kind    string // "ref", "reopen", "kill", "restore"
	dir     string
	st      *store.Store
	f       *FSM
	n       int    // directories used, for kill copies
	applied uint64 // the last index it applied or held at its restart
	// replayFrom is where raft's replay starts after a restart.
	replayFrom uint64
}

// The queues the work uses: dedup windows of 0, 2 and 10 s and the
// default, a queue with retention, and a Kafka topic.
const (
	replayTopic     = "events"
	replayRetention = "short-lived"
	replayJobs      = "jobs"
)

var replayQueues = []struct {
	name   string
	window int64 // -1: default
}{{"nodedup", 0}, {"quick", 2}, {"tens", 10}, {replayJobs, -1}, {replayRetention, 2}}

func newReplayWork(t *testing.T, seed uint64) *replayWork {
	w := &replayWork{
		t: t, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)),
		log:   &memLog{entries: map[uint64][]byte{}},
		nowMs: 1_767_225_600_000,
		txIDs: map[string]string{}, seq: map[int32]int32{}, lastSent: map[int32]command.ProduceBatch{},
		restarts: map[string]int{}, kinds: map[string]int{}, answers: map[uint64]string{}, kindAt: map[uint64]string{},
	}
	w.ref = w.newReplica("ref", "ref")
	for _, k := range []string{"reopen", "kill", "restore"} {
		w.others = append(w.others, w.newReplica(k, k))
	}
	t.Cleanup(func() {
		for _, r := range append([]*replica{w.ref}, w.others...) {
			if r.st != nil {
				r.st.Close()
			}
		}
	})
	return w
}

func (w *replayWork) newReplica(name, kind string) *replica {
	r := &replica{name: name, kind: kind, dir: filepath.Join(w.t.TempDir(), "0")}
	w.open(r)
	return r
}

func (w *replayWork) open(r *replica) {
	w.t.Helper()
	st, err := store.Open(r.dir)
	if err != nil {
		w.t.Fatalf("%s: open: %v", r.name, err)
	}
	f, err := NewFSM(st)
	if err != nil {
		w.t.Fatalf("%s: %v", r.name, err)
	}
	f.tap = w.log.add
	st.SetRaftLog(w.log)
	f.Anomaly = func(msg string, args ...any) {
		w.t.Errorf("%s: anomaly at %d: %s %v", r.name, f.AppliedIndex(), msg, args)
	}
	r.st, r.f, r.applied, r.replayFrom = st, f, f.AppliedIndex(), f.AppliedIndex()+1
}

// run proposes entries in batches and applies each batch everywhere,
// restarting a replica now and then.
func (w *replayWork) run(entries int) {
	w.propose(&command.SetLogFormatCommand{Format: command.LogFormat6}, "format")
	w.setUp()
	for w.index < uint64(entries) {
		for range 1 + w.rng.IntN(24) {
			w.next()
		}
		w.applyPending()
		if w.rng.IntN(12) == 0 {
			w.restart(w.others[w.rng.IntN(len(w.others))])
		}
	}
	w.applyPending()
	want := snapshotBytes(w.t, w.ref.f)
	for _, r := range w.others {
		if got := snapshotBytes(w.t, r.f); string(got) != string(want) {
			w.t.Errorf("%s's state differs from the reference's at the end (%d and %d bytes)", r.name, len(got), len(want))
		}
	}
	w.t.Logf("%d entries; kinds %v; restarts %v", w.index, w.kinds, w.restarts)
}

func (w *replayWork) setUp() {
	for _, q := range replayQueues {
		opts := command.QueueOptions{}
		if q.window >= 0 {
			opts.DedupWindowSeconds = &q.window
		}
		lease := int64(3)
		opts.LeaseTimeSeconds = &lease
		if q.name == replayRetention {
			keep := int64(4)
			opts.RetentionSeconds = &keep
		}
		w.propose(&command.ConfigureQueueCommand{NowMs: w.nowMs, Queue: q.name, Options: opts}, "configure")
	}
	w.propose(&command.AlterTopicCommand{Name: replayRetention, Settings: []command.TopicSetting{{Name: command.ConfigSegmentMs, Value: 1000}}}, "alter")
	w.propose(&command.CreateTopicCommand{NowMs: w.nowMs, Name: replayTopic, Partitions: 3, RetentionMs: 5_000, MaxMessageBytes: 1 << 20, SegmentMs: 1000}, "create-topic")
	w.propose(&command.NewProducerIDCommand{}, "producer-id")
	w.applyPending()
	w.producer = w.lastAnswer().(int64)
}

// next proposes one entry of a random kind.
func (w *replayWork) next() {
	w.nowMs += int64(w.rng.IntN(120))
	if w.rng.IntN(200) == 0 {
		w.nowMs += 3_000 + int64(w.rng.IntN(8_000)) // a quiet spell
	}
	switch n := w.rng.IntN(100); {
	case n < 40:
		w.push()
	case n < 52:
		w.produce()
	case n < 60:
		w.pop()
	case n < 68:
		w.ack()
	case n < 72:
		w.kv()
	case n < 75:
		w.timers()
	case n < 80:
		w.propose(&command.TickCommand{NowMs: w.nowMs, Limit: 1 + w.rng.IntN(20)}, "tick")
	case n < 86:
		w.propose(&command.PruneDedupCommand{NowMs: w.nowMs, Limit: 1 + w.rng.IntN(30)}, "prune-dedup")
	case n < 88:
		w.propose(&command.PruneRequestsCommand{NowMs: w.nowMs, Limit: 1 + w.rng.IntN(30)}, "prune-requests")
	case n < 92:
		w.retain()
	case n < 94:
		w.transaction()
	case n < 96:
		w.propose(&command.CommitOffsetsCommand{NowMs: w.nowMs, Group: "readers", Offsets: []command.OffsetCommit{{Topic: replayTopic, Partition: int32(w.rng.IntN(3)), Offset: int64(w.rng.IntN(50))}}}, "commit-offsets")
	case n < 97:
		w.recreate()
	default:
		w.propose(&command.CleanupCommand{MaxWrites: 1 + w.rng.IntN(command.MaxCleanupWrites)}, "cleanup")
	}
}

func (w *replayWork) push() {
	var items []command.PushItem
	for range 1 + w.rng.IntN(12) {
		q := replayQueues[w.rng.IntN(len(replayQueues))].name
		var tx string
		switch r := w.rng.IntN(10); {
		case r < 2 && len(w.recent) > 0: // a retry of a recent push
			tx = w.recent[len(w.recent)-1-w.rng.IntN(min(len(w.recent), 50))]
		case r < 3 && len(w.recent) > 0: // a retry of an old one
			tx = w.recent[w.rng.IntN(len(w.recent))]
		default:
			w.txSeq++
			tx = fmt.Sprint("tx-", w.txSeq)
			w.recent = append(w.recent, tx)
		}
		raw := make([]byte, 4+w.rng.IntN(32))
		for i := range raw {
			raw[i] = byte(w.rng.Uint32())
		}
		payload := []byte(`"` + hex.EncodeToString(raw) + `"`) // HTTP payloads are JSON
		items = append(items, command.PushItem{Queue: q, Partition: fmt.Sprint("p", w.rng.IntN(6)), TransactionID: tx,
			MessageID: [16]byte{byte(w.index), byte(w.index >> 8), byte(w.index >> 16), byte(len(items))}, Payload: payload})
	}
	var c interface{ Encode() []byte } = &command.PushCommand{NowMs: w.nowMs, Items: items}
	kind := "push"
	if w.rng.IntN(2) == 0 { // sent with an Idempotency-Key
		w.txSeq++
		key := fmt.Sprint("req-", w.txSeq)
		if w.rng.IntN(5) == 0 && w.lastKey != "" {
			key = w.lastKey // a retried request
		}
		w.lastKey = key
		c = &command.KeyedCommand{NowMs: w.nowMs, Key: key, BodyHash: [32]byte{byte(len(items))}, WindowMs: 3_000, Inner: c.Encode()}
		kind = "keyed-push"
	}
	w.proposeThen(c, kind, func(answer any) {
		if k, ok := answer.(command.KeyedResult); ok {
			answer = k.Answer
		}
		res, ok := answer.([]command.PushResult)
		if !ok {
			return
		}
		for i, r := range res {
			if r.Status == command.PushQueued {
				it := items[i]
				w.txIDs[fmt.Sprint(it.Queue, "/", it.Partition, "/", r.Offset)] = it.TransactionID
			}
		}
	})
}

func (w *replayWork) produce() {
	p := int32(w.rng.IntN(3))
	if sent, ok := w.lastSent[p]; ok && w.rng.IntN(8) == 0 { // a resent batch
		w.propose(&command.ProduceCommand{NowMs: w.nowMs, Topic: replayTopic, Partition: p, Batches: []command.ProduceBatch{sent}}, "produce-resent")
		return
	}
	var recs []recordbatch.Record
	for i := range 1 + w.rng.IntN(6) {
		v := make([]byte, 16+w.rng.IntN(200))
		for j := range v {
			v[j] = byte(w.rng.Uint32())
		}
		recs = append(recs, recordbatch.Record{Offset: int64(i), Key: []byte(fmt.Sprint("k", w.rng.IntN(20))), Value: v})
	}
	b := command.ProduceBatch{NumRecords: int32(len(recs)), MaxTimestamp: w.nowMs, ProducerID: w.producer, FirstSequence: w.seq[p],
		Raw: recordbatch.Build(w.nowMs, recs)}
	w.seq[p] += int32(len(recs))
	w.lastSent[p] = b
	w.propose(&command.ProduceCommand{NowMs: w.nowMs, Topic: replayTopic, Partition: p, Batches: []command.ProduceBatch{b}}, "produce")
}

func (w *replayWork) pop() {
	q := []string{replayJobs, "quick", replayRetention}[w.rng.IntN(3)]
	group := []string{"g1", "g2"}[w.rng.IntN(2)]
	w.txSeq++
	lease := fmt.Sprint("lease-", w.txSeq)
	w.proposeThen(&command.PopCommand{NowMs: w.nowMs, Group: group, Queue: q, Batch: 1 + w.rng.IntN(5), LeaseID: lease}, "pop", func(answer any) {
		res, ok := answer.(command.PopResult)
		if ok && len(res.Offsets) > 0 {
			w.leases = append(w.leases, replayLease{group, lease, q, res.Partition, res.PartitionID, res.Offsets})
		}
	})
}

func (w *replayWork) ack() {
	if len(w.leases) == 0 {
		return
	}
	i := w.rng.IntN(len(w.leases))
	l := w.leases[i]
	w.leases = append(w.leases[:i], w.leases[i+1:]...)
	status := []string{command.AckCompleted, command.AckCompleted, command.AckFailed, command.AckRetry}[w.rng.IntN(4)]
	var acks []command.Ack
	for _, off := range l.offsets {
		acks = append(acks, command.Ack{PartitionID: l.partitionID, LeaseID: l.lease, TransactionID: w.txIDs[fmt.Sprint(l.queue, "/", l.partition, "/", off)], Status: status})
	}
	w.propose(&command.AckCommand{NowMs: w.nowMs, Group: l.group, Acks: acks}, "ack")
}

func (w *replayWork) kv() {
	key := fmt.Sprint("k", w.rng.IntN(30))
	var op command.KVOp
	switch w.rng.IntN(4) {
	case 0:
		op = command.KVOp{Op: command.KVPut, NS: "app", Key: key, Value: json.RawMessage(strconv.Itoa(w.rng.IntN(1000))), TTLSeconds: 1 + int64(w.rng.IntN(5))}
	case 1:
		op = command.KVOp{Op: command.KVIncr, NS: "app", Key: key, Value: json.RawMessage(`1`), Forever: true}
	case 2:
		op = command.KVOp{Op: command.KVDelete, NS: "app", Key: key}
	default:
		op = command.KVOp{Op: command.KVPut, NS: "app", Key: key, Value: json.RawMessage(`"v"`), Forever: true}
	}
	w.propose(&command.KVCommand{NowMs: w.nowMs, Ops: []command.KVOp{op}}, "kv")
}

func (w *replayWork) timers() {
	key := fmt.Sprint("t", w.rng.IntN(20))
	op := command.TimerOp{Op: command.TimerSchedule, Queue: "quick", TimerKey: key, Partition: "p1", DelayMs: int64(w.rng.IntN(4000)), Payload: json.RawMessage(`"due"`)}
	if w.rng.IntN(3) == 0 {
		op = command.TimerOp{Op: command.TimerCancel, Queue: "quick", TimerKey: key}
	}
	w.propose(&command.TimersCommand{NowMs: w.nowMs, Ops: []command.TimerOp{op}}, "timers")
}

func (w *replayWork) transaction() {
	w.txSeq++
	tx := fmt.Sprint("txn-", w.txSeq)
	c := &command.TransactionCommand{NowMs: w.nowMs, TxnID: tx,
		Ops: []command.TxnOp{{Type: "push", Items: []command.PushItem{{Queue: "tens", Partition: "p0", TransactionID: tx, MessageID: [16]byte{0xee, byte(w.txSeq)}, Payload: []byte(`"t"`)}}}},
		KV:  []command.KVOp{{Op: command.KVIncr, NS: "app", Key: "txns", Value: json.RawMessage(`1`), Forever: true}},
	}
	if len(w.leases) > 0 && w.rng.IntN(2) == 0 {
		l := w.leases[0]
		w.leases = w.leases[1:]
		c.Ops = append(c.Ops, command.TxnOp{Type: "ack", Group: l.group,
			Ack: &command.Ack{PartitionID: l.partitionID, LeaseID: l.lease, TransactionID: w.txIDs[fmt.Sprint(l.queue, "/", l.partition, "/", l.offsets[0])], Status: command.AckCompleted}})
	}
	w.propose(c, "transaction")
}

// retain proposes what the leader's retention pass would, read off the
// reference replica's state.
func (w *replayWork) retain() {
	w.applyPending() // the leader reads applied state
	var cmds []command.RetainCommand
	err := w.ref.st.View(func(tx *store.Tx) error {
		for _, name := range []string{replayRetention, replayTopic} {
			q, err := tx.Queue(name)
			if err != nil {
				continue
			}
			lim := store.RetentionLimit{CutoffMs: w.nowMs - 4_000}
			pos, found, err := tx.RetentionPoint(q.ID, lim)
			if err != nil {
				return err
			}
			if found {
				cmds = append(cmds, command.RetainCommand{NowMs: w.nowMs, QueueID: q.ID, Pos: pos, CutoffMs: lim.CutoffMs})
			}
		}
		return nil
	})
	if err != nil {
		w.t.Fatal(err)
	}
	for i := range cmds {
		w.propose(&cmds[i], "retain")
	}
}

// recreate deletes a queue and makes it again; cleanup entries work off
// what it held.
func (w *replayWork) recreate() {
	name := []string{"quick", "nodedup"}[w.rng.IntN(2)]
	w.propose(&command.DeleteQueueCommand{Name: name}, "delete-queue")
	window := int64(2)
	if name == "nodedup" {
		window = 0
	}
	w.propose(&command.ConfigureQueueCommand{NowMs: w.nowMs, Queue: name, Options: command.QueueOptions{DedupWindowSeconds: &window}}, "configure")
}

// propose numbers an entry; it is applied with the next batch.
func (w *replayWork) propose(c interface{ Encode() []byte }, kind string) {
	w.proposeThen(c, kind, nil)
}

type answerHook struct {
	index uint64
	fn    func(any)
}

func (w *replayWork) proposeThen(c interface{ Encode() []byte }, kind string, then func(any)) {
	w.index++
	w.pending = append(w.pending, logs(w.index, c.Encode())[0])
	w.kinds[kind]++
	w.kindAt[w.index] = kind
	if then != nil {
		w.hooks = append(w.hooks, answerHook{w.index, then})
	}
}

func (w *replayWork) lastAnswer() any { return w.lastAnswers[len(w.lastAnswers)-1] }

// applyPending applies the pending entries to every replica, in batches
// cut differently on each, and compares their answers and digests.
func (w *replayWork) applyPending() {
	if len(w.pending) == 0 {
		return
	}
	batch := w.pending
	w.pending = nil
	w.lastAnswers = w.ref.f.ApplyBatch(batch)
	for i, l := range batch {
		w.answers[l.Index] = answerText(w.lastAnswers[i])
	}
	for _, h := range w.hooks {
		h.fn(w.lastAnswers[h.index-batch[0].Index])
	}
	w.hooks = nil
	want := w.ref.f.StateDigest().Applied
	for _, r := range w.others {
		w.catchUp(r, batch)
		if got := r.f.StateDigest().Applied; got != want {
			w.t.Fatalf("%s (restarted %d times) disagrees at %d: digest %+v, the reference's %+v", r.name, w.restarts[r.name], want.Index, got, want)
		}
	}
}

// catchUp applies to r what it lacks of the log up to batch's end, in
// pieces of random size, and checks each answer against the reference's.
func (w *replayWork) catchUp(r *replica, batch []*raft.Log) {
	end := batch[len(batch)-1].Index
	// After a restart raft replays from its last snapshot: entries the
	// store holds come again, and must be skipped.
	from := min(r.replayFrom, r.f.AppliedIndex()+1)
	r.replayFrom = end + 1
	for from <= end {
		n := min(end-from+1, uint64(1+w.rng.IntN(16)))
		var piece []*raft.Log
		for i := from; i < from+n; i++ {
			piece = append(piece, w.entry(i))
		}
		answers := r.f.ApplyBatch(piece)
		for i, l := range piece {
			if l.Index <= r.applied {
				if answers[i] != nil {
					w.t.Fatalf("%s applied entry %d again after a restart: %+v", r.name, l.Index, answers[i])
				}
				continue
			}
			if got := answerText(answers[i]); got != w.answers[l.Index] {
				w.t.Fatalf("%s (restarted %d times) answered entry %d (%s) %s; the reference answered %s",
					r.name, w.restarts[r.name], l.Index, w.kindAt[l.Index], got, w.answers[l.Index])
			}
		}
		from += n
	}
	r.applied = end
}

// entry is entry i of the raft log.
func (w *replayWork) entry(i uint64) *raft.Log {
	w.log.mu.Lock()
	defer w.log.mu.Unlock()
	data, ok := w.log.entries[i]
	if !ok {
		w.t.Fatalf("entry %d is not in the log", i)
	}
	return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: data}
}

// restart restarts r its own way; raft then replays a stretch of entries
// it already holds before the ones it lacks.
func (w *replayWork) restart(r *replica) {
	w.t.Helper()
	w.restarts[r.name]++
	switch r.kind {
	case "reopen":
		if err := r.st.Close(); err != nil {
			w.t.Fatal(err)
		}
		w.open(r)
	case "kill":
		// The files as a kill -9 leaves them: copied while the store is
		// open, then the process's store is dropped without a close.
		r.n++
		dir := filepath.Join(filepath.Dir(r.dir), strconv.Itoa(r.n))
		// cp keeps badger's preallocated files sparse (a 2 GB value log).
		// A table badger's compaction deletes mid-copy fails it: copy
		// again, as a kill at another moment.
		for try := 0; ; try++ {
			os.RemoveAll(dir)
			out, err := exec.Command("cp", "-a", "--sparse=always", r.dir, dir).CombinedOutput()
			if err == nil {
				break
			}
			if try == 5 {
				w.t.Fatalf("copying %s: %v: %s", r.dir, err, out)
			}
		}
		old := r.st
		r.dir = dir
		w.open(r)
		w.t.Cleanup(func() { old.Close() })
	case "restore":
		sink := persisted(w.t, w.ref.f)
		if err := r.f.Restore(sink.reader()); err != nil {
			w.t.Fatal(err)
		}
	}
	r.applied = r.f.AppliedIndex()
	r.replayFrom = r.applied + 1 - min(r.applied, uint64(w.rng.IntN(200)))
}

// answerText is an answer to compare: as JSON, which follows pointers.
func answerText(a any) string {
	b, err := json.Marshal(a)
	if err != nil {
		return fmt.Sprintf("%T %+v", a, a)
	}
	return fmt.Sprintf("%T %s", a, b)
}
