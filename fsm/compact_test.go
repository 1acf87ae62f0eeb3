package fsm

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

// Compaction is bounded (a pass over 60,000 records takes several
// entries, none writing more than its limit) and deterministic (two
// replicas applying the same entries hold the same bytes), and leaves the
// newest record of each key, with tombstones gone after
// delete.retention.ms (0 here) and a second pass.
func TestCompactionIsBoundedAndDeterministic(t *testing.T) {
	const now, keys, batches, perBatch = int64(1_767_225_600_000), 2000, 60, 1000
	var entries [][]byte
	add := func(c command.Command) { entries = append(entries, c.Encode()) }
	add(&command.SetLogFormatCommand{Format: command.LogFormat2})
	add(&command.CreateTopicCommand{NowMs: now, Name: "c", Partitions: 1, SegmentMs: 1000, SegmentBytes: store.MinSegmentBytes,
		Settings: []command.TopicSetting{{Name: command.ConfigCleanupPolicy, Value: store.PolicyCompact}, {Name: command.ConfigDeleteRetentionMs, Value: -1}}})
	produce := func(at int64, recs []recordbatch.Record) {
		add(&command.ProduceCommand{NowMs: at, Topic: "c", Batches: []command.ProduceBatch{{NumRecords: int32(len(recs)), MaxTimestamp: at, ProducerID: -1,
			Raw: recordbatch.Build(0, recs)}}})
	}
	for b := range batches {
		var recs []recordbatch.Record
		for i := range perBatch {
			n := b*perBatch + i
			recs = append(recs, recordbatch.Record{Offset: int64(i), TimestampMs: now + int64(b), Key: []byte(fmt.Sprint("k", n%keys)), Value: []byte(fmt.Sprint("v", n))})
		}
		produce(now+int64(b), recs)
	}
	f1, f2 := newFSM(t), newFSM(t)
	var writes []int
	f1.EntryWrites = func(typ command.CommandType, n int) {
		if typ == command.CmdCompact {
			writes = append(writes, n)
		}
	}
	apply := func(cmds ...[]byte) []any {
		var out []any
		for _, f := range []*FSM{f1, f2} {
			first := f.meta.AppliedIndex + 1
			out = f.ApplyBatch(logs(first, cmds...))
		}
		return out
	}
	apply(entries...)
	// A pass: the first entry seals the active segment; more follow while
	// the answer says so, and the cleanup entries drop the old segments.
	pass := func(at int64) int {
		n := 0
		res := apply((&command.CompactCommand{NowMs: at, QueueID: queueID(t, f1, "c"), Seal: true}).Encode())[0].(command.CompactResult)
		for n = 1; res.More; n++ {
			if n > 100 {
				t.Fatal("the pass does not finish")
			}
			res = apply((&command.CompactCommand{NowMs: at, QueueID: queueID(t, f1, "c")}).Encode())[0].(command.CompactResult)
		}
		if !res.Finished {
			t.Fatalf("pass ended without finishing: %+v", res)
		}
		for more := true; more; {
			more = apply((&command.CleanupCommand{MaxWrites: command.MaxCleanupWrites}).Encode())[0].(command.CleanupResult).More
		}
		return n
	}
	if n := pass(now + 10_000); n < 4 {
		t.Fatalf("a pass over %d records took %d entries: the entries are not bounded", batches*perBatch, n)
	}
	for _, w := range writes {
		if w > compactMaxWrites+10 {
			t.Fatalf("a compaction entry wrote %d keys, over its bound %d", w, compactMaxWrites)
		}
	}
	if live := liveRecords(t, f1); len(live) != keys {
		t.Fatalf("after compaction %d records, want %d", len(live), keys)
	} else if v := live["k5"]; v != fmt.Sprint("v", (batches*perBatch-keys)+5) {
		t.Fatalf("k5 holds %q, not its newest value", v)
	}
	// Tombstones for 10 keys: the first pass keeps them (and drops what
	// they delete), the next drops them.
	var del []recordbatch.Record
	for i := range 10 {
		del = append(del, recordbatch.Record{Offset: int64(i), TimestampMs: now + 20_000, Key: []byte(fmt.Sprint("k", i))})
	}
	produce(now+20_000, del)
	apply(entries[len(entries)-1])
	pass(now + 30_000)
	if live := liveRecords(t, f1); len(live) != keys {
		t.Fatalf("after the first pass with tombstones %d records, want %d (values and tombstones)", len(live), keys)
	}
	pass(now + 40_000)
	if live := liveRecords(t, f1); len(live) != keys-10 {
		t.Fatalf("after the second pass %d records, want %d", len(live), keys-10)
	}
	if !bytes.Equal(snapshotBytes(t, f1), snapshotBytes(t, f2)) {
		t.Fatal("two replicas applying the same entries hold different state")
	}
}

func queueID(t *testing.T, f *FSM, name string) uint64 {
	var id uint64
	if err := f.store.View(func(tx *store.Tx) error {
		q, err := tx.Queue(name)
		id = q.ID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

// liveRecords reads partition 0 of topic c: key -> value of every record.
func liveRecords(t *testing.T, f *FSM) map[string]string {
	out := map[string]string{}
	n := 0
	inPartition0(t, f, "c", func(tx *store.Tx, _ store.Queue, p store.Partition) error {
		es, err := tx.Entries(p.ID, 0, 1<<40, 1<<30)
		for _, e := range es {
			recs, err := recordbatch.Records(e.Batch, 1<<30)
			if err != nil {
				return err
			}
			for _, r := range recs {
				out[string(r.Key)] = string(r.Value)
				n++
			}
		}
		return err
	})
	if n != len(out) {
		t.Fatalf("%d records for %d keys: duplicates survived", n, len(out))
	}
	return out
}
