package fsm

import (
	"encoding/binary"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

// txnBatch is a transactional producer's batch of n records, as a client
// would send it.
func txnBatch(producer int64, epoch int16, seq, n int32) command.ProduceBatch {
	var kvs [][2]string
	for range n {
		kvs = append(kvs, [2]string{"", "v"})
	}
	return txnKeyed(producer, epoch, seq, kvs...)
}

// txnKeyed is a transactional batch of keyed records (an empty key: none).
func txnKeyed(producer int64, epoch int16, seq int32, kvs ...[2]string) command.ProduceBatch {
	var body []byte
	n := int32(len(kvs))
	for i, kv := range kvs {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(kv[1])}
		if kv[0] != "" {
			r.Key = []byte(kv[0])
		}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		body = r.AppendTo(body)
	}
	b := kmsg.RecordBatch{Magic: 2, Attributes: 0x10, LastOffsetDelta: n - 1, ProducerID: producer,
		ProducerEpoch: epoch, FirstSequence: seq, NumRecords: n, Records: body}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return command.ProduceBatch{NumRecords: n, ProducerID: producer, ProducerEpoch: epoch, FirstSequence: seq, Raw: raw}
}

func initTxn(nowMs int64, id string) []byte {
	c := command.InitTxnProducerCommand{NowMs: nowMs, TransactionalID: id, TimeoutMs: 10_000, ProducerID: -1, Epoch: -1}
	return c.Encode()
}

func addToTxn(nowMs int64, id string, producer int64, epoch int16, groups []string, parts ...store.TxnPartition) []byte {
	c := command.AddToTxnCommand{NowMs: nowMs, TransactionalID: id, ProducerID: producer, Epoch: epoch, Partitions: parts, Groups: groups}
	return c.Encode()
}

func endTxn(nowMs int64, id string, producer int64, epoch int16, commit, timedOut bool) []byte {
	c := command.EndTxnCommand{NowMs: nowMs, TransactionalID: id, ProducerID: producer, Epoch: epoch, Commit: commit, TimedOut: timedOut}
	return c.Encode()
}

// inPartition0 runs fn in a read transaction over partition 0 of topic,
// failing the test on any error.
func inPartition0(t *testing.T, f *FSM, topic string, fn func(tx *store.Tx, q store.Queue, p store.Partition) error) {
	t.Helper()
	err := f.store.View(func(tx *store.Tx) error {
		q, err := tx.Queue(topic)
		if err != nil {
			return err
		}
		p, err := tx.Partition(q.ID, "0")
		if err != nil {
			return err
		}
		return fn(tx, q, p)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// partitionView reads what a read_committed reader needs of partition 0
// of topic: the high watermark, the last stable offset and the aborted
// ranges.
func partitionView(t *testing.T, f *FSM, topic string) (hw, lso uint64, aborted []store.AbortedTxn) {
	t.Helper()
	inPartition0(t, f, topic, func(tx *store.Tx, _ store.Queue, p store.Partition) (err error) {
		hw = p.NextOffset
		if lso, err = tx.StableOffset(p.ID, p.NextOffset); err != nil {
			return err
		}
		aborted, err = tx.AbortedTxns(p.ID, 0, hw, 100)
		return err
	})
	return hw, lso, aborted
}

// groupCursor reads group's cursor on partition 0 of topic.
func groupCursor(t *testing.T, f *FSM, topic, group string) (cur store.Cursor, found bool) {
	t.Helper()
	inPartition0(t, f, topic, func(tx *store.Tx, q store.Queue, p store.Partition) error {
		view, err := tx.ConsumerGroupView(group, q.ID)
		if err != nil {
			return err
		}
		cur, found, err = tx.Position(view, p)
		return err
	})
	return cur, found
}

// A transaction's records stay above the last stable offset until it ends;
// commit and abort each write one marker, an abort is listed for
// read_committed readers, staged offsets commit with the transaction only,
// and a new incarnation of the transactional id fences the old one.
func TestKafkaTransactionLifecycle(t *testing.T) {
	f := newFSM(t)
	tp := store.TxnPartition{Topic: "t", Partition: 0}
	answers := f.ApplyBatch(logs(1,
		produceCmd(1, "t", idemBatch(-1, -1, -1, 2)), // offsets 0-1, creates t
		initTxn(2, "tx"),
	))
	init := answers[1].(command.TxnProducerResult)
	if init.Outcome != command.TopicOK || init.Epoch != 0 {
		t.Fatalf("init: %+v", init)
	}
	pid := init.ProducerID

	// Writing before AddPartitionsToTxn is refused.
	if got := f.ApplyBatch(logs(3, produceCmd(3, "t", txnBatch(pid, 0, 0, 3))))[0].(command.ProduceResult); got.Outcome != command.TxnInvalidState {
		t.Fatalf("write outside a transaction: %+v", got)
	}
	answers = f.ApplyBatch(logs(4,
		addToTxn(4, "tx", pid, 0, []string{"g"}, tp),
		produceCmd(5, "t", txnBatch(pid, 0, 0, 3)),   // offsets 2-4
		produceCmd(6, "t", idemBatch(-1, -1, -1, 1)), // offset 5, not transactional
		(&command.TxnOffsetCommitCommand{NowMs: 7, TransactionalID: "tx", ProducerID: pid, Epoch: 0, Group: "g",
			Offsets: []command.OffsetCommit{{Topic: "t", Partition: 0, Offset: 42}}}).Encode(),
	))
	if got := answers[0].(command.AddToTxnResult); got.Outcome != command.TopicOK {
		t.Fatalf("add: %+v", got)
	}
	if got := answers[1].(command.ProduceResult); got.Outcome != command.TopicOK || got.BaseOffset != 2 {
		t.Fatalf("transactional write: %+v", got)
	}
	if got := answers[3].([]command.TopicOutcome); got[0] != command.TopicOK {
		t.Fatalf("txn offset commit: %v", got)
	}
	if hw, lso, _ := partitionView(t, f, "t"); hw != 6 || lso != 2 {
		t.Fatalf("open transaction: hw %d lso %d, want 6 and 2", hw, lso)
	}
	if off := committedOffset(t, f, "g"); off != -1 {
		t.Fatalf("staged offset visible before commit: %d", off)
	}
	if pending := pendingOffsets(t, f, "g"); len(pending) != 1 || pending[0].Offset != 42 {
		t.Fatalf("pending offsets of g: %+v", pending)
	}

	// Commit: a marker at 6, the LSO moves to the end, the offset lands.
	if got := f.ApplyBatch(logs(8, endTxn(8, "tx", pid, 0, true, false)))[0].(command.TopicOutcome); got != command.TopicOK {
		t.Fatalf("commit: %v", got)
	}
	if hw, lso, aborted := partitionView(t, f, "t"); hw != 7 || lso != 7 || len(aborted) != 0 {
		t.Fatalf("after commit: hw %d lso %d aborted %v", hw, lso, aborted)
	}
	if off := committedOffset(t, f, "g"); off != 42 {
		t.Fatalf("offset after commit: %d, want 42", off)
	}
	if pending := pendingOffsets(t, f, "g"); len(pending) != 0 {
		t.Fatalf("pending offsets of g after the commit: %+v", pending)
	}
	if got := f.ApplyBatch(logs(9, endTxn(9, "tx", pid, 0, true, false)))[0].(command.TopicOutcome); got != command.TopicOK {
		t.Fatalf("retried commit: %v", got)
	}

	// Abort: the range 7..9 (records 7-8, marker 9) is listed; staged
	// offsets are dropped.
	answers = f.ApplyBatch(logs(10,
		addToTxn(10, "tx", pid, 0, []string{"g"}, tp),
		produceCmd(11, "t", txnBatch(pid, 0, 3, 2)),
		(&command.TxnOffsetCommitCommand{NowMs: 12, TransactionalID: "tx", ProducerID: pid, Epoch: 0, Group: "g",
			Offsets: []command.OffsetCommit{{Topic: "t", Partition: 0, Offset: 99}}}).Encode(),
		endTxn(13, "tx", pid, 0, false, false),
	))
	if got := answers[3].(command.TopicOutcome); got != command.TopicOK {
		t.Fatalf("abort: %v", got)
	}
	hw, lso, aborted := partitionView(t, f, "t")
	if hw != 10 || lso != 10 || len(aborted) != 1 || aborted[0] != (store.AbortedTxn{ProducerID: pid, FirstOffset: 7, LastOffset: 9}) {
		t.Fatalf("after abort: hw %d lso %d aborted %+v", hw, lso, aborted)
	}
	if off := committedOffset(t, f, "g"); off != 42 {
		t.Fatalf("offset after abort: %d, want 42 still", off)
	}
	if got := f.ApplyBatch(logs(14, endTxn(14, "tx", pid, 0, true, false)))[0].(command.TopicOutcome); got != command.TxnInvalidState {
		t.Fatalf("commit after abort: %v", got)
	}

	// A new incarnation aborts what the old one left open and fences it.
	answers = f.ApplyBatch(logs(15,
		addToTxn(15, "tx", pid, 0, nil, tp),
		produceCmd(16, "t", txnBatch(pid, 0, 5, 1)), // offset 10
		initTxn(17, "tx"),
		produceCmd(18, "t", txnBatch(pid, 0, 6, 1)),
		endTxn(19, "tx", pid, 0, true, false),
	))
	if got := answers[2].(command.TxnProducerResult); got.ProducerID != pid || got.Epoch != 1 {
		t.Fatalf("re-init: %+v", got)
	}
	// KIP-360: a retry naming the pair the bump left is answered again;
	// one naming an older pair is fenced.
	retry := (&command.InitTxnProducerCommand{NowMs: 20, TransactionalID: "tx", TimeoutMs: 10_000, ProducerID: pid, Epoch: 0}).Encode()
	if got := f.ApplyBatch(logs(20, retry, retry))[1].(command.TxnProducerResult); got.Outcome != command.TopicOK || got.ProducerID != pid || got.Epoch != 1 {
		t.Fatalf("retried re-init: %+v, want the same id at epoch 1", got)
	}
	if got := answers[3].(command.ProduceResult); got.Outcome != command.ProducerFenced {
		t.Fatalf("zombie write: %+v", got)
	}
	if got := answers[4].(command.TopicOutcome); got != command.ProducerFenced {
		t.Fatalf("zombie commit: %v", got)
	}
	if _, _, aborted := partitionView(t, f, "t"); len(aborted) != 2 || aborted[1].FirstOffset != 10 || aborted[1].LastOffset != 11 {
		t.Fatalf("fenced transaction not aborted: %+v", aborted)
	}
}

// The leader's timeout abort applies only once the replicated clock has
// passed the deadline, and fences the producer.
func TestKafkaTransactionTimeout(t *testing.T) {
	f := newFSM(t)
	tp := store.TxnPartition{Topic: "t", Partition: 0}
	answers := f.ApplyBatch(logs(1, produceCmd(1, "t", idemBatch(-1, -1, -1, 1)), initTxn(2, "tx")))
	pid := answers[1].(command.TxnProducerResult).ProducerID
	if due := txnsDue(t, f, 1_000_000); len(due) != 0 {
		t.Fatalf("due before any transaction: %v", due)
	}
	f.ApplyBatch(logs(3, addToTxn(1000, "tx", pid, 0, nil, tp)))
	if due, early := txnsDue(t, f, 11000), txnsDue(t, f, 10999); len(due) != 1 || len(early) != 0 {
		t.Fatalf("due at its deadline %v, a moment before %v: want [tx] and none", due, early)
	}
	answers = f.ApplyBatch(logs(4,
		produceCmd(1001, "t", txnBatch(pid, 0, 0, 1)),
		endTxn(5000, "tx", pid, 0, false, true),  // too early (timeout 10 s)
		endTxn(11000, "tx", pid, 0, false, true), // expired
		endTxn(11001, "tx", pid, 0, true, false), // the producer, too late
	))
	if got := answers[1].(command.TopicOutcome); got != command.TxnInvalidState {
		t.Fatalf("early timeout abort: %v", got)
	}
	if due := txnsDue(t, f, 11000); len(due) != 0 {
		t.Fatalf("transactions still filed as due after the abort: %v", due)
	}
	if got := answers[2].(command.TopicOutcome); got != command.TopicOK {
		t.Fatalf("timeout abort: %v", got)
	}
	if got := answers[3].(command.TopicOutcome); got != command.ProducerFenced {
		t.Fatalf("commit after timeout: %v", got)
	}
	if _, lso, aborted := partitionView(t, f, "t"); lso != 3 || len(aborted) != 1 {
		t.Fatalf("after timeout: lso %d aborted %+v", lso, aborted)
	}
}

func committedOffset(t *testing.T, f *FSM, group string) int64 {
	t.Helper()
	if cur, found := groupCursor(t, f, "t", group); found {
		return cur.Offset
	}
	return -1
}

func pendingOffsets(t *testing.T, f *FSM, group string) (out []store.TxnOffset) {
	t.Helper()
	err := f.store.View(func(tx *store.Tx) (err error) {
		out, err = tx.PendingTxnOffsets(group, 100)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Compaction never cuts into an open transaction, and an aborted record
// never counts as the newest of its key: the committed value survives a
// pass. (Indexing aborted records made an aborted update delete the
// committed value it was meant to replace.)
func TestCompactionHonoursTransactions(t *testing.T) {
	const now = int64(1_767_225_600_000)
	f := newFSM(t)
	apply := func(cmds ...[]byte) []any { return f.ApplyBatch(logs(f.meta.AppliedIndex+1, cmds...)) }
	tp := store.TxnPartition{Topic: "c", Partition: 0}
	keyed := func(k, v string) command.ProduceBatch {
		return command.ProduceBatch{NumRecords: 1, MaxTimestamp: now, ProducerID: -1,
			Raw: recordbatch.Build(0, []recordbatch.Record{{Key: []byte(k), Value: []byte(v)}})}
	}
	answers := apply(
		(&command.SetLogFormatCommand{Format: command.LogFormat2}).Encode(),
		(&command.CreateTopicCommand{NowMs: now, Name: "c", Partitions: 1, SegmentMs: 1000, SegmentBytes: store.MinSegmentBytes,
			Settings: []command.TopicSetting{{Name: command.ConfigCleanupPolicy, Value: store.PolicyCompact}}}).Encode(),
		(&command.ProduceCommand{NowMs: now, Topic: "c", Batches: []command.ProduceBatch{keyed("k", "committed-1")}}).Encode(), // 0
		initTxn(now, "tx"),
	)
	pid := answers[3].(command.TxnProducerResult).ProducerID
	apply(
		addToTxn(now, "tx", pid, 0, nil, tp),
		produceCmd(now, "c", txnKeyed(pid, 0, 0, [2]string{"k", "aborted"}, [2]string{"only-aborted", "x"})), // 1-2
		endTxn(now, "tx", pid, 0, false, false), // marker 3
		addToTxn(now, "tx", pid, 0, nil, tp),
		produceCmd(now, "c", txnKeyed(pid, 0, 2, [2]string{"j", "committed-2"})), // 4, open
	)
	compact := func(at int64) command.CompactResult {
		return apply((&command.CompactCommand{NowMs: at, QueueID: queueID(t, f, "c"), Seal: true}).Encode())[0].(command.CompactResult)
	}
	if r := compact(now + 10_000); r.Started {
		t.Fatalf("a pass started with a transaction open below its cut: %+v", r)
	}
	apply(endTxn(now+10_001, "tx", pid, 0, true, false)) // marker 5
	r := compact(now + 20_000)
	for n := 0; r.More; n++ {
		if n > 10 {
			t.Fatal("the pass does not finish")
		}
		r = apply((&command.CompactCommand{NowMs: now + 20_000, QueueID: queueID(t, f, "c")}).Encode())[0].(command.CompactResult)
	}
	if !r.Finished {
		t.Fatalf("the pass did not finish: %+v", r)
	}
	// What a read_committed reader sees of the partition.
	var seen []string
	inPartition0(t, f, "c", func(tx *store.Tx, _ store.Queue, p store.Partition) error {
		view, err := tx.CommittedView(p)
		if err != nil {
			return err
		}
		es, err := tx.Entries(p.ID, 0, 1<<30, 1<<20)
		if err != nil {
			return err
		}
		for _, e := range es {
			if hidden, err := view.Hidden(e); err != nil || hidden {
				if err != nil {
					return err
				}
				continue
			}
			recs, err := recordbatch.Records(e.Batch, 1<<20)
			if err != nil {
				return err
			}
			for _, r := range recs {
				seen = append(seen, string(r.Key)+"="+string(r.Value))
			}
		}
		return nil
	})
	if !slices.Equal(seen, []string{"k=committed-1", "j=committed-2"}) {
		t.Fatalf("a read_committed reader sees %v after compaction, want k=committed-1 and j=committed-2", seen)
	}
}

// An HTTP pop passes over an aborted transaction whole: the group's cursor
// never lists hidden offsets one by one. (It once added all 5,000 offsets
// of an aborted batch behind a delivered record to the cursor's done list.)
// And an abort is listed even when the log start moved past the
// transaction's first offset meanwhile (its records above the start were
// once delivered).
func TestPopPassesAbortedTransactionsWhole(t *testing.T) {
	f := newFSM(t)
	apply := func(cmds ...[]byte) []any { return f.ApplyBatch(logs(f.meta.AppliedIndex+1, cmds...)) }
	tp := store.TxnPartition{Topic: "t", Partition: 0}
	answers := apply(produceCmd(1, "t", idemBatch(-1, -1, -1, 1)), initTxn(2, "tx")) // offset 0
	pid := answers[1].(command.TxnProducerResult).ProducerID
	apply(
		addToTxn(3, "tx", pid, 0, nil, tp),
		produceCmd(4, "t", txnBatch(pid, 0, 0, 2)),   // 1-2
		produceCmd(5, "t", idemBatch(-1, -1, -1, 1)), // 3
		(&command.DeleteRecordsCommand{Topic: "t", Partitions: []command.RecordsBefore{{Partition: 0, Offset: 2}}}).Encode(),
		produceCmd(6, "t", txnBatch(pid, 0, 2, 5000)), // 4-5003
		endTxn(7, "tx", pid, 0, false, false),         // marker 5004
		produceCmd(8, "t", idemBatch(-1, -1, -1, 1)),  // 5005
	)
	if _, _, aborted := partitionView(t, f, "t"); len(aborted) != 1 || aborted[0].LastOffset != 5004 {
		t.Fatalf("aborted ranges %+v: the abort must be listed", aborted)
	}
	pop := func(lease string) command.PopResult {
		return apply((&command.PopCommand{NowMs: 9, Group: "g", Queue: "t", Batch: 10, LeaseID: lease}).Encode())[0].(command.PopResult)
	}
	cursor := func() store.Cursor {
		cur, _ := groupCursor(t, f, "t", "g")
		return cur
	}
	r := pop("L1")
	if len(r.Offsets) != 1 || r.Offsets[0] != 3 {
		t.Fatalf("first pop leased %v, want only 3 (0-1 below the start, 2 and 4-5004 aborted)", r.Offsets)
	}
	if cur := cursor(); len(cur.Done) != 0 {
		t.Fatalf("the cursor lists %d done offsets after the first pop, want none", len(cur.Done))
	}
	acked := apply((&command.AckCommand{NowMs: 9, Group: "g", Acks: []command.Ack{{PartitionID: r.PartitionID, LeaseID: "L1",
		TransactionID: command.KafkaRecordTxID(3), Status: command.AckCompleted}}}).Encode())[0].([]command.AckResult)
	if acked[0].Error != "" {
		t.Fatalf("ack: %+v", acked[0])
	}
	if r := pop("L2"); len(r.Offsets) != 1 || r.Offsets[0] != 5005 {
		t.Fatalf("second pop leased %v, want 5005", r.Offsets)
	}
	if cur := cursor(); cur.Offset != 5005 || len(cur.Done) != 0 {
		t.Fatalf("cursor at %d with %d done offsets, want 5005 and none", cur.Offset, len(cur.Done))
	}
}

func txnsDue(t *testing.T, f *FSM, nowMs int64) (ids []string) {
	t.Helper()
	err := f.store.View(func(tx *store.Tx) (err error) {
		ids, err = tx.TxnsDue(nowMs, 100)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// A transactional id unused for 7 days of replicated time is forgotten,
// one with a transaction in progress never; a producer coming back later
// gets a new producer id.
func TestTransactionalIDsExpire(t *testing.T) {
	f := newFSM(t)
	apply := func(cmds ...[]byte) []any { return f.ApplyBatch(logs(f.meta.AppliedIndex+1, cmds...)) }
	answers := apply(produceCmd(1, "t", idemBatch(-1, -1, -1, 1)), initTxn(1000, "idle"), initTxn(1000, "busy"))
	idle, busy := answers[1].(command.TxnProducerResult).ProducerID, answers[2].(command.TxnProducerResult).ProducerID
	apply(addToTxn(1000, "busy", busy, 0, nil, store.TxnPartition{Topic: "t", Partition: 0}))
	forget := func(at int64) int {
		return apply((&command.ForgetTxnsCommand{NowMs: at, IDs: []string{"idle", "busy", "unknown"}}).Encode())[0].(int)
	}
	if n := forget(1000 + command.TxnIDExpirationMs - 1); n != 0 {
		t.Fatalf("forgot %d ids a moment before they expire", n)
	}
	if n := forget(1000 + command.TxnIDExpirationMs); n != 1 {
		t.Fatalf("forgot %d ids at expiry, want 1 (not the one in progress)", n)
	}
	err := f.store.View(func(tx *store.Tx) error {
		if _, found, err := tx.TxnOfProducer(idle); found || err != nil {
			t.Errorf("the forgotten id's producer still maps to it (%v)", err)
		}
		_, err := tx.Txn("busy")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := apply(initTxn(2000+command.TxnIDExpirationMs, "idle"))[0].(command.TxnProducerResult); got.ProducerID == idle || got.Epoch != 0 {
		t.Fatalf("a forgotten id came back as %+v, want a new producer id at epoch 0", got)
	}
}

// newTxnProducer is a state machine with topic "t" (offset 0 written)
// and transactional id "tx" at epoch 0, whose producer id it answers.
func newTxnProducer(t *testing.T) (*FSM, int64) {
	f := newFSM(t)
	answers := f.ApplyBatch(logs(1, produceCmd(1, "t", idemBatch(-1, -1, -1, 1)), initTxn(2, "tx")))
	return f, answers[1].(command.TxnProducerResult).ProducerID
}

func endTxnBump(nowMs int64, id string, producer int64, epoch int16, commit bool) []byte {
	c := command.EndTxnBumpCommand{NowMs: nowMs, TransactionalID: id, ProducerID: producer, Epoch: epoch, Commit: commit}
	return c.Encode()
}

// Transaction version 2: each EndTxn moves the producer to its next epoch,
// whose transaction starts its sequences over; a retry from the epoch
// before is answered again, the other direction refused; an abort with
// nothing in progress only moves the epoch, a commit is refused.
func TestEndTxnBumpMovesTheEpoch(t *testing.T) {
	f, pid := newTxnProducer(t)
	tp := store.TxnPartition{Topic: "t", Partition: 0}
	answers := f.ApplyBatch(logs(3,
		addToTxn(3, "tx", pid, 0, nil, tp),
		produceCmd(4, "t", txnBatch(pid, 0, 0, 2)), // offsets 1-2
		endTxnBump(5, "tx", pid, 0, true),          // marker 3
		endTxnBump(6, "tx", pid, 0, true),          // the retry
		endTxnBump(7, "tx", pid, 0, false),         // the other direction
		endTxnBump(8, "tx", pid, 1, true),          // nothing in progress
		addToTxn(9, "tx", pid, 1, nil, tp),
		produceCmd(10, "t", txnBatch(pid, 1, 0, 1)), // offset 4: sequence 0 again
		endTxnBump(11, "tx", pid, 1, false),         // marker 5
		endTxnBump(12, "tx", pid, 2, false),         // an empty abort
		produceCmd(13, "t", txnBatch(pid, 1, 1, 1)), // a fenced epoch
	))
	want := []command.TxnProducerResult{
		{Outcome: command.TopicOK, ProducerID: pid, Epoch: 1},
		{Outcome: command.TopicOK, ProducerID: pid, Epoch: 1},
		{Outcome: command.TxnInvalidState, ProducerID: -1, Epoch: -1},
		{Outcome: command.TxnInvalidState, ProducerID: -1, Epoch: -1},
	}
	for i, w := range want {
		if got := answers[2+i].(command.TxnProducerResult); got != w {
			t.Fatalf("EndTxn %d: %+v, want %+v", i, got, w)
		}
	}
	if got := answers[7].(command.ProduceResult); got.Outcome != command.TopicOK || got.BaseOffset != 4 {
		t.Fatalf("the next epoch's first write: %+v", got)
	}
	if got := answers[8].(command.TxnProducerResult); got != (command.TxnProducerResult{Outcome: command.TopicOK, ProducerID: pid, Epoch: 2}) {
		t.Fatalf("abort: %+v", got)
	}
	if got := answers[9].(command.TxnProducerResult); got != (command.TxnProducerResult{Outcome: command.TopicOK, ProducerID: pid, Epoch: 3}) {
		t.Fatalf("empty abort: %+v", got)
	}
	if got := answers[10].(command.ProduceResult); got.Outcome == command.TopicOK {
		t.Fatalf("a write from a bumped-away epoch: %+v", got)
	}
	if hw, lso, aborted := partitionView(t, f, "t"); hw != 6 || lso != 6 || len(aborted) != 1 || aborted[0].FirstOffset != 4 || aborted[0].LastOffset != 5 {
		t.Fatalf("log: hw %d lso %d aborted %+v", hw, lso, aborted)
	}
}

// A producer fenced by a new instance's InitProducerId stays fenced at
// version 2: its EndTxn from the old epoch is not taken for a retry.
func TestEndTxnBumpKeepsAZombieFenced(t *testing.T) {
	f, pid := newTxnProducer(t)
	tp := store.TxnPartition{Topic: "t", Partition: 0}
	answers := f.ApplyBatch(logs(3,
		addToTxn(3, "tx", pid, 0, nil, tp),
		produceCmd(4, "t", txnBatch(pid, 0, 0, 1)),
		initTxn(5, "tx"),                   // a new instance
		endTxnBump(6, "tx", pid, 0, false), // the zombie
	))
	if got := answers[2].(command.TxnProducerResult); got.Epoch != 1 {
		t.Fatalf("the new instance: %+v", got)
	}
	if got := answers[3].(command.TxnProducerResult); got.Outcome != command.ProducerFenced {
		t.Fatalf("the zombie's EndTxn: %+v, want PRODUCER_FENCED", got)
	}
}
