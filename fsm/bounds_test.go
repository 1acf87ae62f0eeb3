package fsm

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/waggle-mq/waggle/recordbatch"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// boundHarness applies entries to one FSM and records the most keys an
// entry of each command type wrote.
type boundHarness struct {
	t     *testing.T
	f     *FSM
	index uint64
	most  map[command.CommandType]int
}

func newBoundHarness(t *testing.T) *boundHarness {
	h := &boundHarness{t: t, f: newFSM(t), most: map[command.CommandType]int{}}
	h.f.EntryWrites = func(c command.CommandType, writes int) {
		h.most[c] = max(h.most[c], writes)
		if writes > command.MaxEntryWrites {
			t.Errorf("an entry of type %d wrote %d keys; the bound is %d", c, writes, command.MaxEntryWrites)
		}
	}
	return h
}

// apply applies the commands as consecutive entries, in batches as raft
// would hand them over, and returns their answers.
func (h *boundHarness) apply(cmds ...[]byte) []any {
	var out []any
	for len(cmds) > 0 {
		n := min(len(cmds), 64)
		out = append(out, h.f.ApplyBatch(logs(h.index+1, cmds[:n]...))...)
		h.index += uint64(n)
		cmds = cmds[n:]
	}
	return out
}

func (h *boundHarness) one(cmd []byte) any { return h.apply(cmd)[0] }

func (h *boundHarness) families() map[byte]int {
	h.t.Helper()
	var out map[byte]int
	err := h.f.store.View(func(tx *store.Tx) error {
		var err error
		out, err = tx.KeysByFamily()
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

// cleanUp applies cleanup entries until no tombstone is left.
func (h *boundHarness) cleanUp() int {
	h.t.Helper()
	for n := 1; ; n++ {
		c := command.CleanupCommand{MaxWrites: command.MaxCleanupWrites}
		if !h.one(c.Encode()).(command.CleanupResult).More {
			return n
		}
		if n > 10_000 {
			h.t.Fatal("cleanup does not end")
		}
	}
}

// Regression test for issue 14: deleting a queue of 60,000 partitions was
// one entry of 120,000 writes; badger refused it ("Txn is too big"), the
// apply panicked, and every replica crash-looped on that entry. Every
// command type is applied here to state that is large for it, and no entry
// may write more than MaxEntryWrites keys.
func TestEveryEntryWritesABoundedNumberOfKeys(t *testing.T) {
	scale := 200_000 // partitions, group cursors, KV keys
	if testing.Short() || raceEnabled {
		scale = 20_000
	}
	h := newBoundHarness(t)
	start := time.Now()
	now := int64(1_000_000)
	before := h.families()

	// A queue with one message in each of scale partitions, dedup on.
	var pushes [][]byte
	for first := 0; first < scale; first += command.MaxPushTargets {
		var items []command.PushItem
		for i := first; i < min(first+command.MaxPushTargets, scale); i++ {
			items = append(items, item("wide", "c-"+strconv.Itoa(i), "tx-"+strconv.Itoa(i), 1))
		}
		pushes = append(pushes, push(now, items...))
	}
	h.apply(pushes...)
	t.Logf("%v: pushed", time.Since(start))

	// scale group cursors: group g commits every partition of topics of
	// 10,000 partitions.
	var topics [][]byte
	var commits [][]byte
	for ti := range scale / maxKafkaPartitions {
		name := "t" + strconv.Itoa(ti)
		topics = append(topics, (&command.CreateTopicCommand{NowMs: now, Name: name, Partitions: maxKafkaPartitions}).Encode())
		var offsets []command.OffsetCommit
		for p := range int32(maxKafkaPartitions) {
			offsets = append(offsets, command.OffsetCommit{Topic: name, Partition: p, Offset: 0})
		}
		commits = append(commits, (&command.CommitOffsetsCommand{NowMs: now, Group: "g", Offsets: offsets}).Encode())
	}
	h.apply(topics...)
	for _, r := range h.apply(commits...) {
		for _, o := range r.([]command.TopicOutcome) {
			if o != command.TopicOK {
				t.Fatalf("commit outcome %d", o)
			}
		}
	}
	t.Logf("%v: committed", time.Since(start))
	grown := h.families()
	if got := grown[0x0B] - before[0x0B]; got != scale/maxKafkaPartitions*maxKafkaPartitions {
		t.Fatalf("%d cursors after the commits, want %d", got, scale)
	}

	// scale KV keys under one prefix, expiring in a minute; timers due then.
	var kvs [][]byte
	for first := 0; first < scale; first += 1000 {
		var ops []command.KVOp
		for i := first; i < first+1000; i++ {
			ops = append(ops, command.KVOp{Op: command.KVPut, NS: "ns", Key: "p/" + strconv.Itoa(i), Value: json.RawMessage(`1`), TTLSeconds: 60})
		}
		kvs = append(kvs, (&command.KVCommand{NowMs: now, Ops: ops}).Encode())
	}
	var timerOps []command.TimerOp
	for i := range 3000 {
		timerOps = append(timerOps, command.TimerOp{Op: command.TimerSchedule, Queue: "fired", TimerKey: strconv.Itoa(i), Partition: "p" + strconv.Itoa(i%500), DelayMs: 60_000})
	}
	kvs = append(kvs, (&command.TimersCommand{NowMs: now, Ops: timerOps[:1000]}).Encode(),
		(&command.TimersCommand{NowMs: now, Ops: timerOps[1000:2000]}).Encode(), (&command.TimersCommand{NowMs: now, Ops: timerOps[2000:]}).Encode())
	h.apply(kvs...)

	t.Logf("%v: kv", time.Since(start))
	// The commands that touch what grew, on the large state.
	h.one((&command.KVCommand{NowMs: now, Ops: []command.KVOp{{Op: command.KVGetPrefix, NS: "ns", Prefix: "p/"}}}).Encode())
	if r := h.one((&command.PopCommand{NowMs: now, Group: "h", Queue: "wide", Batch: 10, FromNew: true, LeaseID: "L1"}).Encode()).(command.PopResult); len(r.Offsets) != 0 {
		t.Fatalf("a first pop from new leased %v of what was there before", r.Offsets)
	}
	h.one((&command.SeekCommand{NowMs: now, Group: "g", Queue: "wide", ToEnd: true}).Encode())
	h.one((&command.SeekCommand{NowMs: now, Group: "g2", Queue: "t0", Offset: 0}).Encode())
	// Only what is pushed after the first pop from new reaches group h.
	h.one(push(now, item("wide", "c-7", "after", 2)))
	// A pop looks at maxPopScan partitions; successive pops go round the
	// queue and find the one message.
	var r command.PopResult
	pops := 0
	for ; len(r.Offsets) == 0 && pops <= scale/maxPopScan+1; pops++ {
		r = h.one((&command.PopCommand{NowMs: now, Group: "h", Queue: "wide", Batch: 10, LeaseID: "L2"}).Encode()).(command.PopResult)
	}
	if r.Partition != "c-7" || len(r.Offsets) != 1 || r.Offsets[0] != 1 {
		t.Fatalf("%d pops after the reset leased %s %v, want c-7 [1]", pops, r.Partition, r.Offsets)
	}
	h.one((&command.ExtendLeaseCommand{NowMs: now, LeaseID: "L2", Seconds: 30}).Encode())
	pid := h.one((&command.PopCommand{NowMs: now, Group: "h2", Queue: "wide", Batch: 1, LeaseID: "L3"}).Encode()).(command.PopResult)
	h.one((&command.AckCommand{NowMs: now, Group: "h2", Acks: []command.Ack{{PartitionID: pid.PartitionID, LeaseID: "L3", TransactionID: "tx-0", Status: command.AckCompleted}}}).Encode())
	h.one((&command.TransactionCommand{NowMs: now, TxnID: "t1", Ops: []command.TxnOp{{Type: "push", Items: []command.PushItem{item("wide", "c-1", "in-txn", 3)}}},
		KV: []command.KVOp{{Op: command.KVPut, NS: "ns", Key: "once", Value: json.RawMessage(`1`), Forever: true}}}).Encode())
	parts := int32(maxKafkaPartitions)
	h.one((&command.ConfigureQueueCommand{NowMs: now, Queue: "configured", Options: command.QueueOptions{KafkaPartitions: &parts}}).Encode())
	h.one((&command.CreateTopicCommand{NowMs: now, Name: "grown", Partitions: 1}).Encode())
	if o := h.one((&command.AddPartitionsCommand{Name: "grown", Count: maxKafkaPartitions}).Encode()).(command.TopicOutcome); o != command.TopicOK {
		t.Fatalf("adding partitions answered %d", o)
	}
	producer := h.one((&command.NewProducerIDCommand{}).Encode()).(int64)
	h.one((&command.ProduceCommand{NowMs: now, Topic: "t0", Partition: 3, Batches: []command.ProduceBatch{idemBatch(producer, 0, 0, 2)}}).Encode())
	// Log format 1's JSON entries apply through the same code as their
	// format 2 types; small ones cover their types here.
	h.one(mustEncodeAs(t, &command.KVCommand{NowMs: now, Ops: []command.KVOp{{Op: command.KVGet, NS: "ns", Key: "once"}}}, command.LogFormat1))
	h.one(mustEncodeAs(t, &command.TimersCommand{NowMs: now, Ops: []command.TimerOp{{Op: command.TimerCancel, Queue: "wide", TimerKey: "none"}}}, command.LogFormat1))
	h.one(mustEncodeAs(t, &command.TransactionCommand{NowMs: now, TxnID: "t-json", KV: []command.KVOp{{Op: command.KVGet, NS: "ns", Key: "once"}}}, command.LogFormat1))
	h.one(mustEncodeAs(t, &command.TickCommand{NowMs: now, Limit: 1}, command.LogFormat1))
	h.one((&command.SetLogFormatCommand{Format: command.MaxLogFormat}).Encode())
	h.one((&command.AlterTopicCommand{Name: "t0", Settings: []command.TopicSetting{{Name: command.ConfigRetentionMs, Value: 1000}}}).Encode())
	h.one((&command.DeleteRecordsCommand{Topic: "t0", Partitions: []command.RecordsBefore{{Partition: 3, Offset: 1}}}).Encode())
	h.one((&command.RegisterNodeCommand{Node: store.Node{ID: "9", HTTPAddr: "h", KafkaAddr: "k"}}).Encode())
	h.one((&command.ForgetNodeCommand{ID: "9"}).Encode())
	h.one((&command.DeleteOffsetsCommand{Group: "g", Offsets: []command.OffsetCommit{{Topic: "t0", Partition: 1}}}).Encode())
	if r := h.one((&command.RetainCommand{NowMs: now, QueueID: 1, Pos: 1, CutoffMs: now}).Encode()).(command.RetainResult); r.Started {
		t.Fatal("a retain at no segment's end started a trim")
	}

	// The largest entries the broker lets through: a push of MaxPushItems
	// into MaxPushTargets partitions of as many new queues, and a
	// transaction with as many pushed items, 1,000 KV writes and 1,000
	// timers.
	var widest, txnItems []command.PushItem
	var kvOps []command.KVOp
	for i := range 10_000 {
		q := "new-" + strconv.Itoa(i%command.MaxPushTargets)
		widest = append(widest, item(q, "p", "w-"+strconv.Itoa(i), 5))
		txnItems = append(txnItems, item(q, "p2", "t-"+strconv.Itoa(i), 6))
	}
	for i := range 1000 {
		kvOps = append(kvOps, command.KVOp{Op: command.KVPut, NS: "txn", Key: strconv.Itoa(i), Value: json.RawMessage(`1`), Forever: true})
	}
	h.one(push(now, widest...))
	if r := h.one((&command.TransactionCommand{NowMs: now, TxnID: "t2", Ops: []command.TxnOp{{Type: "push", Items: txnItems}}, KV: kvOps, Timers: timerOps[:1000]}).Encode()).(command.TransactionResult); !r.Success {
		t.Fatalf("the largest transaction rolled back: %+v", r.Error)
	}
	// The largest Kafka transaction: MaxTxnPartitions partitions written,
	// offsets staged for as many, ended in one entry.
	txnProducer := h.one((&command.InitTxnProducerCommand{NowMs: now, TransactionalID: "big", TimeoutMs: 60_000, ProducerID: -1, Epoch: -1}).Encode()).(command.TxnProducerResult).ProducerID
	var txnParts []store.TxnPartition
	var txnOffsets []command.OffsetCommit
	for i := range int32(command.MaxTxnPartitions) {
		txnParts = append(txnParts, store.TxnPartition{Topic: "grown", Partition: i})
		txnOffsets = append(txnOffsets, command.OffsetCommit{Topic: "grown", Partition: i, Offset: 1})
	}
	if r := h.one((&command.AddToTxnCommand{NowMs: now, TransactionalID: "big", ProducerID: txnProducer, Partitions: txnParts, Groups: []string{"txn-g"}}).Encode()).(command.AddToTxnResult); r.Outcome != command.TopicOK {
		t.Fatalf("adding %d partitions to a transaction answered %d", len(txnParts), r.Outcome)
	}
	for _, tp := range txnParts {
		h.one((&command.ProduceCommand{NowMs: now, Topic: "grown", Partition: tp.Partition, Batches: []command.ProduceBatch{txnBatch(txnProducer, 0, 0, 1)}}).Encode())
	}
	h.one((&command.TxnOffsetCommitCommand{NowMs: now, TransactionalID: "big", ProducerID: txnProducer, Group: "txn-g", Offsets: txnOffsets}).Encode())
	if o := h.one((&command.EndTxnCommand{NowMs: now, TransactionalID: "big", ProducerID: txnProducer, Commit: true}).Encode()).(command.TopicOutcome); o != command.TopicOK {
		t.Fatalf("committing the largest transaction answered %d", o)
	}
	// Again, ended by transaction version 2's EndTxn.
	h.one((&command.AddToTxnCommand{NowMs: now, TransactionalID: "big", ProducerID: txnProducer, Partitions: txnParts}).Encode())
	for _, tp := range txnParts {
		h.one((&command.ProduceCommand{NowMs: now, Topic: "grown", Partition: tp.Partition, Batches: []command.ProduceBatch{txnBatch(txnProducer, 0, 1, 1)}}).Encode())
	}
	if r := h.one((&command.EndTxnBumpCommand{NowMs: now, TransactionalID: "big", ProducerID: txnProducer, Commit: true}).Encode()).(command.TxnProducerResult); r.Outcome != command.TopicOK {
		t.Fatalf("committing the largest transaction at version 2 answered %+v", r)
	}
	var forget []string
	for i := range command.MaxForgetTxns {
		forget = append(forget, "id-"+strconv.Itoa(i))
	}
	h.one((&command.ForgetTxnsCommand{NowMs: now, IDs: forget}).Encode())
	// Dead letters: a replay (one push and the mark), and a delete naming
	// the most ids one entry may.
	h.one((&command.ReplayDeadLetterCommand{NowMs: now, ID: 1}).Encode())
	deadLetters := make([]uint64, command.MaxDeleteDeadLetters)
	for i := range deadLetters {
		deadLetters[i] = uint64(i + 1)
	}
	h.one((&command.DeleteDeadLettersCommand{IDs: deadLetters}).Encode())
	// A keyed push of the widest kind: its inner's writes and 2 more.
	h.one((&command.KeyedCommand{NowMs: now, Key: "k", WindowMs: 60_000, Inner: push(now, widest[:command.MaxPushTargets]...)}).Encode())
	if n := h.one((&command.DeleteOffsetsCommand{Group: "txn-g", All: true}).Encode()).(int); n != 1 {
		t.Fatalf("the transaction's offsets were not committed: deleting its group answered %d", n)
	}
	// A compaction pass over 30,000 distinct keys (one batch): several
	// bounded entries.
	h.one((&command.CreateTopicCommand{NowMs: now, Name: "compacted", Partitions: 1, SegmentMs: 1000,
		Settings: []command.TopicSetting{{Name: command.ConfigCleanupPolicy, Value: store.PolicyCompact}}}).Encode())
	var keyed []recordbatch.Record
	for i := range 30_000 {
		keyed = append(keyed, recordbatch.Record{Offset: int64(i), Key: []byte(strconv.Itoa(i)), Value: []byte("v")})
	}
	h.one((&command.ProduceCommand{NowMs: now, Topic: "compacted", Batches: []command.ProduceBatch{{NumRecords: 30_000, MaxTimestamp: now, ProducerID: -1,
		Raw: recordbatch.Build(0, keyed)}}}).Encode())
	compactedID := queueID(t, h.f, "compacted")
	c := &command.CompactCommand{NowMs: now + 10_000, QueueID: compactedID, Seal: true}
	for ; ; c = (&command.CompactCommand{NowMs: now + 10_000, QueueID: compactedID}) {
		if r := h.one(c.Encode()).(command.CompactResult); !r.More {
			if !r.Finished {
				t.Fatalf("compaction answered %+v", r)
			}
			break
		}
	}
	t.Logf("%v: commands", time.Since(start))
	// Time passes: expired dedup records, KV rows and due timers are worked
	// off in bounded entries.
	later := now + 2*hourMs
	for n := 0; ; n++ {
		if h.one(prune(later, command.MaxPruneLimit)).(command.PruneDedupResult).Removed < command.MaxPruneLimit {
			break
		}
	}
	h.one((&command.PruneRequestsCommand{NowMs: later, Limit: command.MaxPruneLimit}).Encode())
	h.one((&command.SeedIDsCommand{Base: 1 << 44}).Encode())
	h.one((&command.PreferLeaderCommand{Group: 1, Node: "2"}).Encode())
	h.one((&command.SetReplicasCommand{Group: 1, Replicas: []string{"2", "3", "4"}}).Encode())
	h.one((&command.SaveClassicGroupCommand{Group: store.ClassicGroup{Name: "g", Generation: 1, Members: []store.ClassicMember{{ID: "m"}}}}).Encode())
	many := make([]command.GroupConfigChange, 10_000)
	for i := range many {
		many[i] = command.GroupConfigChange{Name: fmt.Sprint("c", i), Value: "v"}
	}
	h.one((&command.AlterGroupConfigCommand{Group: "g", Changes: many}).Encode())
	bindings := make([]store.ACL, 2*store.MaxACLs) // past the cap: the rest are refused
	for i := range bindings {
		bindings[i] = store.ACL{ResourceType: 2, ResourceName: fmt.Sprint("t-", i), PatternType: 3, Principal: "User:*", Host: "*", Operation: 3, Permission: 3}
	}
	if r := h.one((&command.AlterACLsCommand{Create: bindings}).Encode()).(command.AlterACLsResult); r.Created[store.MaxACLs-1] == false || r.Created[store.MaxACLs] {
		t.Fatalf("creating past the cap of %d bindings: the cap did not hold", store.MaxACLs)
	}
	h.one((&command.AlterACLsCommand{Delete: bindings}).Encode())
	leaseIDs := make([]string, 2_000)
	names := make([]string, len(leaseIDs))
	for i := range leaseIDs {
		leaseIDs[i], names[i] = fmt.Sprint("share-", i), fmt.Sprint(i)
	}
	h.one((&command.ShareAcquireCommand{NowMs: later, Group: "sharers", Queue: "wide", Partitions: names, LeaseIDs: leaseIDs,
		Batch: command.MaxShareAcquireBatch, LeaseMs: 1000, MaxDeliveries: 1}).Encode())
	shared := make([]string, len(names))
	for i := range shared {
		shared[i] = command.SharedLeaseID("m", fmt.Sprint(i))
	}
	h.one((&command.ShareAcquireCommand{NowMs: later, Group: "sharers", Queue: "wide", Partitions: names, LeaseIDs: shared,
		Batch: command.MaxShareAcquireBatch, LeaseMs: 1000, MaxDeliveries: 1, MaxLocks: command.MaxShareLocks, ReadUncommitted: true}).Encode())
	acks := make([]command.ShareAck, 10_000)
	for i := range acks {
		acks[i] = command.ShareAck{Queue: "wide", Partition: fmt.Sprint(i), Holder: "none", Kind: command.ShareRelease, Rest: true}
	}
	h.one((&command.ShareAckCommand{NowMs: later, Group: "sharers", Acks: acks}).Encode())
	for {
		r := h.one((&command.TickCommand{NowMs: later, Limit: 1000}).Encode()).(command.TickResult)
		if r.PrunedKV < 1000 && r.Fired < 1000 {
			break
		}
	}

	t.Logf("%v: pruned", time.Since(start))
	// Deleting the group and the queue: each one bounded entry, then
	// bounded cleanup entries until nothing of them is left.
	if n := h.one((&command.DeleteOffsetsCommand{Group: "g", All: true}).Encode()).(int); n != 1 {
		t.Fatalf("deleting group g answered %d", n)
	}
	if o := h.one((&command.DeleteQueueCommand{Name: "wide"}).Encode()).(command.TopicOutcome); o != command.TopicOK {
		t.Fatalf("deleting the queue answered %d", o)
	}
	entries := h.cleanUp()
	t.Logf("%v: cleanup took %d entries", time.Since(start), entries)

	after := h.families()
	for _, fam := range []byte{0x03, 0x04} { // partitions: the topics', the timers' and the largest push's remain
		want := before[fam] + (scale/maxKafkaPartitions+2)*maxKafkaPartitions + 500 + 2*command.MaxPushTargets + 1 // + topic "compacted"
		if after[fam] != want {
			t.Errorf("family %#x holds %d keys after cleanup, want %d", fam, after[fam], want)
		}
	}
	// Dedup records: only the 3,000 messages the timers fired (into queue
	// "fired", after the prune) remain, in the dedup log (format 4): no
	// badger record or expiry key of any push is left.
	if after[0x06] != before[0x06] || after[0x07] != before[0x07] {
		t.Errorf("dedup records or expiry keys left behind: %d, %d", after[0x06]-before[0x06], after[0x07]-before[0x07])
	}
	if ids, _ := h.f.store.DedupIndexStats(); ids != 3000 {
		t.Errorf("the dedup logs hold %d ids after the prune, want the 3000 the timers pushed", ids)
	}
	if got := after[0x0B]; got != 0 { // cursors: g's are gone, h's and h2's were on the deleted queue
		t.Errorf("%d cursors left after deleting group g and queue wide", got)
	}
	if after[0x0C] != 0 || after[0x14] != 0 || after[0x15] != 0 {
		t.Errorf("leases %d, tombstones %d, group records %d left", after[0x0C], after[0x14], after[0x15])
	}

	// The name is free: a new queue of the same name starts empty.
	if r := pushResults(t, h.one(push(later, item("wide", "c-0", "tx-0", 4)))); r[0].Status != command.PushQueued || r[0].Offset != 0 {
		t.Fatalf("push to the recreated queue answered %+v", r[0])
	}

	for typ := range handlers {
		if _, seen := h.most[typ]; !seen {
			t.Errorf("command type %d was not exercised: add it to this test", typ)
		}
	}
	for typ, n := range h.most {
		t.Logf("type %2d: at most %6d writes in one entry", typ, n)
	}
}

// bigPayload is a JSON string of about n bytes.
func bigPayload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	b[0], b[n-1] = '"', '"'
	return b
}

// A dead letter copies its message: acking ten leased messages of 900 KB
// as dlq in one call made one entry of 9 MB, which badger refuses (found
// in review of issue 14). One entry dead-letters at most
// maxDeadLetterBytes; the other acks are refused, to be sent again.
func TestDeadLetteringIsBoundedPerEntry(t *testing.T) {
	h := newBoundHarness(t)
	var items []command.PushItem
	for i := range 5 {
		it := item("q", "p", strconv.Itoa(i), byte(i))
		it.Payload = bigPayload(900 << 10)
		items = append(items, it)
	}
	for _, it := range items {
		h.one(push(1, it))
	}
	pop := h.one(popCmd(2, "g", "L", 5, 60_000)).(command.PopResult)
	if len(pop.Offsets) != 5 {
		t.Fatalf("pop leased %v", pop.Offsets)
	}
	acks := func(ids ...int) []command.Ack {
		var out []command.Ack
		for _, i := range ids {
			out = append(out, command.Ack{PartitionID: pop.PartitionID, LeaseID: "L", TransactionID: strconv.Itoa(i), Status: command.AckDLQ})
		}
		return out
	}
	// A transaction may not dead-letter more than the bound either: it
	// rolls back whole.
	txn := command.TransactionCommand{NowMs: 3, TxnID: "t", Ops: []command.TxnOp{{Type: "ack", Group: "g", Ack: &acks(0)[0]}, {Type: "ack", Group: "g", Ack: &acks(1)[0]}, {Type: "ack", Group: "g", Ack: &acks(2)[0]}}}
	if r := h.one(txn.Encode()).(command.TransactionResult); r.Success || r.Reason != command.RollbackRejectedAck {
		t.Fatalf("a transaction dead-lettering 2.7 MB: %+v", r)
	}
	res := h.one(ackCmd(3, "g", acks(0, 1, 2, 3, 4)...)).([]command.AckResult)
	var taken []int
	for i, r := range res {
		if r.DeadLettered {
			taken = append(taken, i)
		} else if r.Success || r.Error == "" {
			t.Fatalf("ack %d neither dead-lettered nor refused: %+v", i, r)
		}
	}
	if len(taken) != 2 {
		t.Fatalf("one entry dead-lettered %v, want the first two", taken)
	}
	// Sent again, the refused ones go through in later entries.
	for _, next := range [][]int{{2, 3}, {4}} {
		for _, r := range h.one(ackCmd(4, "g", acks(next...)...)).([]command.AckResult) {
			if !r.DeadLettered {
				t.Fatalf("acking %v again: %+v", next, r)
			}
		}
	}
}

// Due timers are pushed by the tick entry: a thousand timers with 64 KiB
// payloads due at once made one entry of 64 MB (found in review of issue
// 14). A tick fires what fits in maxFiredBytes and says there is more.
func TestTickFiresDueTimersWithinAByteBound(t *testing.T) {
	h := newBoundHarness(t)
	var ops []command.TimerOp
	for i := range 5 {
		ops = append(ops, command.TimerOp{Op: command.TimerSchedule, Queue: "fired", TimerKey: strconv.Itoa(i), DelayMs: 1000, Payload: bigPayload(900 << 10)})
	}
	h.one((&command.TimersCommand{NowMs: 1, Ops: ops}).Encode())
	var fired []int
	for tick := 0; tick < 5; tick++ {
		r := h.one((&command.TickCommand{NowMs: 5000, Limit: 1000}).Encode()).(command.TickResult)
		fired = append(fired, r.Fired)
		if !r.More {
			break
		}
	}
	if want := []int{2, 2, 1}; !slices.Equal(fired, want) {
		t.Fatalf("ticks fired %v timers, want %v", fired, want)
	}
}

// Tombstones that leave nothing to delete cost a write each (their own
// removal) and were not charged to a cleanup entry's budget: 20,000
// deletes of empty queues made one cleanup entry of 20,000 writes that ran
// for minutes (found in review of issue 14; enough of them and badger
// refuses the entry on every replica).
func TestCleanupOfManyEmptyQueuesIsBounded(t *testing.T) {
	h := newBoundHarness(t)
	const queues = 20_000
	var cmds [][]byte
	for i := range queues {
		cmds = append(cmds, (&command.ConfigureQueueCommand{NowMs: 1, Queue: "e" + strconv.Itoa(i)}).Encode())
	}
	for i := range queues {
		cmds = append(cmds, (&command.DeleteQueueCommand{Name: "e" + strconv.Itoa(i)}).Encode())
	}
	h.apply(cmds...)
	start := time.Now()
	entries := h.cleanUp()
	if most := h.most[command.CmdCleanup]; most > command.MaxCleanupWrites+1 {
		t.Fatalf("a cleanup entry wrote %d keys", most)
	}
	if fams := h.families(); fams[0x14] != 0 {
		t.Fatalf("%d tombstones left", fams[0x14])
	}
	t.Logf("%d tombstones removed by %d cleanup entries in %v", queues, entries, time.Since(start))
}

// Retention of a queue whose segments hold many partitions works off in
// bounded cleanup entries: every partition's start moves, the index
// entries before it go, and no entry writes more than the bound.
func TestRetentionOfAWideQueueIsBounded(t *testing.T) {
	h := newBoundHarness(t)
	h.one((&command.CreateTopicCommand{NowMs: 1000, Name: "aged", Partitions: maxKafkaPartitions, RetentionMs: 1000, SegmentBytes: store.MinSegmentBytes}).Encode())
	var cmds [][]byte
	for round := range 3 { // every partition gets 3 messages, one second apart
		var items []command.PushItem
		for p := range maxKafkaPartitions {
			items = append(items, item("aged", strconv.Itoa(p), fmt.Sprintf("%d-%d", round, p), 1))
			if len(items) == 1000 {
				cmds = append(cmds, push(int64(1000*(round+1)), items...))
				items = nil
			}
		}
	}
	h.apply(cmds...)
	var q store.Queue
	var pos uint64
	h.f.store.View(func(tx *store.Tx) error {
		q, _ = tx.Queue("aged")
		var found bool
		pos, found, _ = tx.RetentionPoint(q.ID, store.RetentionLimit{CutoffMs: 2500})
		if !found {
			t.Fatal("no retention point after the first two seconds")
		}
		return nil
	})
	if r := h.one((&command.RetainCommand{NowMs: 3500, QueueID: q.ID, Pos: pos, CutoffMs: 2500}).Encode()).(command.RetainResult); !r.Started {
		t.Fatal("retain did not start a trim")
	}
	entries := h.cleanUp()
	if most := h.most[command.CmdCleanup]; most > command.MaxCleanupWrites+1 {
		t.Fatalf("a cleanup entry wrote %d keys", most)
	}
	moved := 0
	h.f.store.View(func(tx *store.Tx) error {
		parts, err := tx.Partitions(q.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			if p.StartOffset > 0 {
				moved++
			}
			if p.StartOffset > 2 {
				t.Fatalf("partition %s starts at %d: the last second's message is gone", p.Name, p.StartOffset)
			}
		}
		return nil
	})
	if moved < maxKafkaPartitions/2 {
		t.Fatalf("%d of %d partitions moved their start", moved, maxKafkaPartitions)
	}
	t.Logf("trim of %d partitions: %d cleanup entries", maxKafkaPartitions, entries)
}

// mustEncodeAs encodes cmd in log format f.
func mustEncodeAs(t *testing.T, cmd command.Command, f command.LogFormat) []byte {
	t.Helper()
	b, err := command.EncodeAs(cmd, f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
