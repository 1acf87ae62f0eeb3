package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/waggle-mq/waggle/dedup"
)

// Dedup returns what PutDedup stored for that partition and exact id,
// expired or not (expiry is the caller's decision); long ids (keyed by
// their hash) are told apart by the id kept in the record.
func TestDedupReads(t *testing.T) {
	s := openTest(t)
	long := strings.Repeat("x", maxRawIDKey+100)
	longOther := long[:len(long)-1] + "y"
	entry := func(off uint64) dedup.Entry {
		e := dedup.Entry{Offset: off, StoredAtMs: 100, ExpiresAtMs: 50} // expired long ago
		e.MessageID[0], e.MessageID[15] = byte(off), 0xAB
		return e
	}
	stored := map[[2]string]dedup.Entry{
		{"5", "tx"}:                      entry(1),
		{"5", "tx\x00"}:                  entry(2),
		{"6", "tx"}:                      entry(3),
		{"5", long}:                      entry(4),
		{"5", strings.Repeat("x", 1024)}: entry(5), // the longest raw id
	}
	write(t, s, func(tx *Tx) error {
		for k, e := range stored {
			pid := uint64(k[0][0] - '0')
			if err := tx.PutDedup(pid, k[1], e); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx *Tx) error {
		for k, want := range stored {
			pid := uint64(k[0][0] - '0')
			got, found, err := tx.Dedup(pid, k[1])
			if err != nil || !found || got != want {
				t.Errorf("Dedup(%d, %.10q…) = %+v found %v, %v; want %+v", pid, k[1], got, found, err, want)
			}
		}
		for _, c := range []struct {
			pid uint64
			id  string
		}{{5, "t"}, {5, "tx2"}, {5, ""}, {7, "tx"}, {4, "tx"}, {6, long}, {5, longOther}, {5, long[:1023]}} {
			if got, found, err := tx.Dedup(c.pid, c.id); err != nil || found {
				t.Errorf("Dedup(%d, %.10q… of %d bytes) = %+v found %v, %v; want none", c.pid, c.id, len(c.id), got, found, err)
			}
		}
		return nil
	})
}

// PruneDedup forgets the records due at or before now, oldest first, up
// to limit; a record stored again since its old expiry entry was filed
// outlives that entry.
func TestPruneDedup(t *testing.T) {
	s := openTest(t)
	write(t, s, func(tx *Tx) error {
		for i, id := range []string{"c", "a", "b", "d"} {
			if err := tx.PutDedup(5, id, dedup.Entry{Offset: uint64(i), ExpiresAtMs: int64(10 * (i + 1))}); err != nil {
				return err
			}
		}
		// "a" (due at 20) is stored again, due at 100.
		return tx.PutDedup(5, "a", dedup.Entry{Offset: 9, ExpiresAtMs: 100})
	})
	present := func() string {
		var out []string
		view(t, s, func(tx *Tx) error {
			for _, id := range []string{"a", "b", "c", "d"} {
				if _, found, err := tx.Dedup(5, id); err != nil || found {
					out = append(out, id)
				}
			}
			return nil
		})
		return strings.Join(out, "")
	}
	prune := func(now int64, limit, want int) {
		t.Helper()
		var n int
		write(t, s, func(tx *Tx) (err error) {
			n, err = tx.PruneDedup(now, limit)
			return err
		})
		if n != want {
			t.Fatalf("PruneDedup(%d, %d) = %d, want %d", now, limit, n, want)
		}
	}
	prune(9, 10, 0)
	if got := present(); got != "abcd" {
		t.Fatalf("after pruning at 9: %q", got)
	}
	prune(10, 10, 1) // c, due at 10: the bound is inclusive
	if got := present(); got != "abd" {
		t.Fatalf("after pruning at 10: %q", got)
	}
	prune(40, 1, 1) // a's old entry at 20 only: the limit holds, and a is kept
	if got := present(); got != "abd" {
		t.Fatalf("after pruning one at 40: %q", got)
	}
	prune(40, 10, 2) // b at 30, d at 40
	if got := present(); got != "a" {
		t.Fatalf("after pruning at 40: %q", got)
	}
	prune(100, 10, 1)
	if got := present(); got != "" {
		t.Fatalf("after pruning at 100: %q", got)
	}
}

// DeadLetters lists in id order, one queue's when a queue id is given,
// at most limit; DeadLetterByID round-trips; DeleteDeadLetter removes
// exactly the one named.
func TestDeadLetterReads(t *testing.T) {
	s := openTest(t)
	queueOf := map[uint64]uint64{7: 10, 2: 11, 5: 10, 1: 10, 300: 11, 4: 256, 3: 10}
	write(t, s, func(tx *Tx) error {
		for id, q := range queueOf {
			d := DeadLetter{ID: id, QueueID: q, Group: "g", Partition: "0", Offset: int64(id), Payload: json.RawMessage(`{"n":1}`), Error: "boom", Attempts: 3, AtMs: 99}
			if id == 5 {
				d.Replayed = &Replay{AtMs: 120, Offset: 44}
			}
			if err := tx.PutDeadLetter(d); err != nil {
				return err
			}
		}
		return nil
	})
	ids := func(queue uint64, limit int) []uint64 {
		var out []uint64
		view(t, s, func(tx *Tx) error {
			dls, err := tx.DeadLetters(queue, limit)
			for _, d := range dls {
				if queue != 0 && d.QueueID != queue {
					t.Errorf("DeadLetters(%d) returned one of queue %d", queue, d.QueueID)
				}
				out = append(out, d.ID)
			}
			return err
		})
		return out
	}
	for _, c := range []struct {
		queue uint64
		limit int
		want  []uint64
	}{
		{0, 100, []uint64{1, 2, 3, 4, 5, 7, 300}},
		{0, 3, []uint64{1, 2, 3}},
		{10, 100, []uint64{1, 3, 5, 7}},
		{10, 2, []uint64{1, 3}},
		{11, 100, []uint64{2, 300}},
		{256, 100, []uint64{4}},
		{1, 100, nil},
		{12, 100, nil},
	} {
		if got := ids(c.queue, c.limit); !slices.Equal(got, c.want) {
			t.Errorf("DeadLetters(%d, %d) = %v, want %v", c.queue, c.limit, got, c.want)
		}
	}
	view(t, s, func(tx *Tx) error {
		d, err := tx.DeadLetterByID(5)
		if err != nil || d.ID != 5 || d.QueueID != 10 || d.Error != "boom" || d.Attempts != 3 || !bytes.Equal(d.Payload, []byte(`{"n":1}`)) ||
			d.Replayed == nil || d.Replayed.Offset != 44 {
			t.Errorf("DeadLetterByID(5) = %+v, %v", d, err)
		}
		if d, err := tx.DeadLetterByID(6); !errors.Is(err, ErrNotFound) {
			t.Errorf("DeadLetterByID(6) = %+v, %v; want ErrNotFound", d, err)
		}
		return nil
	})
	write(t, s, func(tx *Tx) error {
		if err := tx.DeleteDeadLetter(3); err != nil {
			return err
		}
		return tx.DeleteDeadLetter(6) // none: nothing changes
	})
	if got, want := ids(0, 100), []uint64{1, 2, 4, 5, 7, 300}; !slices.Equal(got, want) {
		t.Errorf("after deleting 3: %v, want %v", got, want)
	}
	view(t, s, func(tx *Tx) error {
		if _, err := tx.DeadLetterByID(3); !errors.Is(err, ErrNotFound) {
			t.Errorf("DeadLetterByID(3) after delete: %v", err)
		}
		return nil
	})
}

// Timers lists one queue's timers in key order; DueTimers lists those due
// at or before now across queues, earliest first; rescheduling and
// deleting keep the due index in step.
func TestTimerReads(t *testing.T) {
	s := openTest(t)
	timers := []Timer{
		{Queue: "q", Key: "b", DueAtMs: 30, Partition: "0", Txn: "tb", Payload: json.RawMessage(`1`)},
		{Queue: "q", Key: "a", DueAtMs: 10, Txn: "ta", Payload: json.RawMessage(`2`)},
		{Queue: "q", Key: "c", DueAtMs: 20, Txn: "tc", Payload: json.RawMessage(`3`)},
		{Queue: "qq", Key: "a", DueAtMs: 15, Txn: "qqa", Payload: json.RawMessage(`4`)},
		{Queue: "q\x00", Key: "a", DueAtMs: 50, Txn: "q0a", Payload: json.RawMessage(`5`)},
	}
	write(t, s, func(tx *Tx) error {
		for _, tm := range timers {
			if err := tx.PutTimer(tm, nil); err != nil {
				return err
			}
		}
		return nil
	})
	names := func(tms []Timer, err error) string {
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tm := range tms {
			out = append(out, tm.Queue+"/"+tm.Key)
		}
		return strings.Join(out, " ")
	}
	check := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %q, want %q", what, got, want)
		}
	}
	view(t, s, func(tx *Tx) error {
		check("Timers(q, 10)", names(tx.Timers("q", 10)), "q/a q/b q/c")
		check("Timers(q, 2)", names(tx.Timers("q", 2)), "q/a q/b")
		check("Timers(qq, 10)", names(tx.Timers("qq", 10)), "qq/a")
		check("Timers(x, 10)", names(tx.Timers("x", 10)), "")
		check("DueTimers(9)", names(tx.DueTimers(9, 10)), "")
		check("DueTimers(15)", names(tx.DueTimers(15, 10)), "q/a qq/a")
		check("DueTimers(100)", names(tx.DueTimers(100, 10)), "q/a qq/a q/c q/b q\x00/a")
		check("DueTimers(100, 2)", names(tx.DueTimers(100, 2)), "q/a qq/a")
		tm, found, err := tx.Timer("q", "b")
		if err != nil || !found || tm.DueAtMs != 30 || tm.Partition != "0" || tm.Txn != "tb" || string(tm.Payload) != "1" || tm.Queue != "q" || tm.Key != "b" {
			t.Errorf("Timer(q, b) = %+v found %v, %v", tm, found, err)
		}
		if tm, found, err := tx.Timer("q", "d"); err != nil || found {
			t.Errorf("Timer(q, d) = %+v found %v, %v", tm, found, err)
		}
		return nil
	})
	write(t, s, func(tx *Tx) error {
		prev := timers[1]
		next := prev
		next.DueAtMs = 40
		if err := tx.PutTimer(next, &prev); err != nil {
			return err
		}
		return tx.DeleteTimer(timers[0])
	})
	view(t, s, func(tx *Tx) error {
		check("DueTimers(15) after moving q/a", names(tx.DueTimers(15, 10)), "qq/a")
		check("DueTimers(100) after moving q/a", names(tx.DueTimers(100, 10)), "qq/a q/c q/a q\x00/a")
		check("Timers(q) after deleting q/b", names(tx.Timers("q", 10)), "q/a q/c")
		return nil
	})
}

// TxnsDue lists transactional ids whose deadline is at or before now,
// earliest first, at most limit.
func TestTxnsDue(t *testing.T) {
	s := openTest(t)
	write(t, s, func(tx *Tx) error {
		for _, d := range []struct {
			at int64
			id string
		}{{30, "x"}, {10, "y"}, {20, "z"}, {20, "a"}} {
			if err := tx.PutTxnDue(d.at, d.id); err != nil {
				return err
			}
		}
		return nil
	})
	due := func(now int64, limit int) []string {
		var out []string
		view(t, s, func(tx *Tx) (err error) {
			out, err = tx.TxnsDue(now, limit)
			return err
		})
		return out
	}
	for _, c := range []struct {
		now   int64
		limit int
		want  []string
	}{
		{9, 10, nil},
		{10, 10, []string{"y"}},
		{20, 10, []string{"y", "a", "z"}},
		{100, 10, []string{"y", "a", "z", "x"}},
		{100, 2, []string{"y", "a"}},
	} {
		if got := due(c.now, c.limit); !slices.Equal(got, c.want) {
			t.Errorf("TxnsDue(%d, %d) = %q, want %q", c.now, c.limit, got, c.want)
		}
	}
	write(t, s, func(tx *Tx) error { return tx.DeleteTxnDue(20, "a") })
	if got, want := due(100, 10), []string{"y", "z", "x"}; !slices.Equal(got, want) {
		t.Errorf("after DeleteTxnDue(20, a): %q, want %q", got, want)
	}
}

// Txn, TxnOfProducer and PendingTxnOffsets read back what PutTxn and
// PutTxnGroup stored, for that id, producer and group only.
func TestTxnReads(t *testing.T) {
	s := openTest(t)
	t1 := TxnState{TransactionalID: "t1", ProducerID: 40, Epoch: 2, Status: TxnOngoing, TimeoutMs: 6000,
		Partitions: []TxnPartition{{Topic: "q", Partition: 1}},
		Offsets: []TxnOffset{
			{Group: "g", Topic: "q", Partition: 0, Offset: 5},
			{Group: "g2", Topic: "q", Partition: 0, Offset: 6},
			{Group: "g", Topic: "q", Partition: 1, Offset: 7},
		}}
	t2 := TxnState{TransactionalID: "t2", ProducerID: 41, Status: TxnOngoing,
		Offsets: []TxnOffset{{Group: "g", Topic: "r", Partition: 0, Offset: 9}}}
	write(t, s, func(tx *Tx) error {
		for _, err := range []error{
			tx.PutTxn(t1), tx.PutTxn(t2),
			tx.PutTxnGroup("g", "t1"), tx.PutTxnGroup("g2", "t1"), tx.PutTxnGroup("g", "t0"), // t0 has no state
			tx.PutTxnGroup("g", "t2"),
		} {
			if err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx *Tx) error {
		if got, err := tx.Txn("t1"); err != nil || !reflect.DeepEqual(got, t1) {
			t.Errorf("Txn(t1) = %+v, %v; want %+v", got, err, t1)
		}
		for _, id := range []string{"t", "t10", ""} {
			if got, err := tx.Txn(id); !errors.Is(err, ErrNotFound) {
				t.Errorf("Txn(%q) = %+v, %v; want ErrNotFound", id, got, err)
			}
		}
		if id, found, err := tx.TxnOfProducer(41); err != nil || !found || id != "t2" {
			t.Errorf("TxnOfProducer(41) = %q %v, %v", id, found, err)
		}
		if id, found, err := tx.TxnOfProducer(42); err != nil || found {
			t.Errorf("TxnOfProducer(42) = %q %v, %v", id, found, err)
		}
		offsets := func(group string, limit int) []int64 {
			os, err := tx.PendingTxnOffsets(group, limit)
			if err != nil {
				t.Fatal(err)
			}
			var out []int64
			for _, o := range os {
				if o.Group != group {
					t.Errorf("PendingTxnOffsets(%q) returned %+v", group, o)
				}
				out = append(out, o.Offset)
			}
			return out
		}
		for _, c := range []struct {
			group string
			limit int
			want  []int64
		}{
			{"g", 10, []int64{5, 7, 9}},
			{"g", 2, []int64{5, 7}}, // t0 and t1 looked at
			{"g2", 10, []int64{6}},
			{"h", 10, nil},
		} {
			if got := offsets(c.group, c.limit); !slices.Equal(got, c.want) {
				t.Errorf("PendingTxnOffsets(%q, %d) = %v, want %v", c.group, c.limit, got, c.want)
			}
		}
		return nil
	})
	write(t, s, func(tx *Tx) error {
		if err := tx.DeleteTxnGroup("g", "t1"); err != nil {
			return err
		}
		return tx.DeleteTxn(t2)
	})
	view(t, s, func(tx *Tx) error {
		if got, err := tx.PendingTxnOffsets("g", 10); err != nil || len(got) != 0 {
			t.Errorf("PendingTxnOffsets(g) after ending: %+v, %v", got, err)
		}
		if _, err := tx.Txn("t2"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Txn(t2) after DeleteTxn: %v", err)
		}
		if id, found, err := tx.TxnOfProducer(41); err != nil || found {
			t.Errorf("TxnOfProducer(41) after DeleteTxn = %q %v, %v", id, found, err)
		}
		return nil
	})
}

// OpenTxns, StableOffset and AbortedTxns read one partition's index only.
func TestTxnPartitionIndexes(t *testing.T) {
	s := openTest(t)
	write(t, s, func(tx *Tx) error {
		for _, err := range []error{
			tx.PutOpenTxn(5, 7, 100), tx.PutOpenTxn(5, 3, 120), tx.PutOpenTxn(4, 1, 10), tx.PutOpenTxn(6, 1, 50),
			tx.PutAbortedTxn(5, AbortedTxn{ProducerID: 1, FirstOffset: 10, LastOffset: 20}),
			tx.PutAbortedTxn(5, AbortedTxn{ProducerID: 2, FirstOffset: 30, LastOffset: 40}),
			tx.PutAbortedTxn(5, AbortedTxn{ProducerID: 3, FirstOffset: 5, LastOffset: 50}),
			tx.PutAbortedTxn(6, AbortedTxn{ProducerID: 4, FirstOffset: 0, LastOffset: 25}),
		} {
			if err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx *Tx) error {
		if first, found, err := tx.OpenTxn(5, 7); err != nil || !found || first != 100 {
			t.Errorf("OpenTxn(5, 7) = %d %v, %v", first, found, err)
		}
		if first, found, err := tx.OpenTxn(5, 1); err != nil || found {
			t.Errorf("OpenTxn(5, 1) = %d %v, %v", first, found, err)
		}
		if got, err := tx.OpenTxns(5, 10); err != nil || !slices.Equal(got, []OpenTxn{{3, 120}, {7, 100}}) {
			t.Errorf("OpenTxns(5, 10) = %v, %v", got, err)
		}
		if got, err := tx.OpenTxns(5, 1); err != nil || !slices.Equal(got, []OpenTxn{{3, 120}}) {
			t.Errorf("OpenTxns(5, 1) = %v, %v", got, err)
		}
		for _, c := range []struct{ pid, next, want uint64 }{{5, 200, 100}, {5, 90, 90}, {6, 200, 50}, {7, 200, 200}} {
			if got, err := tx.StableOffset(c.pid, c.next); err != nil || got != c.want {
				t.Errorf("StableOffset(%d, %d) = %d, %v; want %d", c.pid, c.next, got, err, c.want)
			}
		}
		producers := func(from, to uint64, limit int) []int64 {
			as, err := tx.AbortedTxns(5, from, to, limit)
			if err != nil {
				t.Fatal(err)
			}
			var out []int64
			for _, a := range as {
				out = append(out, a.ProducerID)
			}
			return out
		}
		for _, c := range []struct {
			from, to uint64
			limit    int
			want     []int64
		}{
			{0, 100, 10, []int64{1, 2, 3}},
			{21, 35, 10, []int64{2, 3}},
			{20, 11, 10, []int64{1, 3}},
			{0, 8, 10, []int64{3}},
			{0, 8, 2, nil}, // looks at two ranges only
			{51, 100, 10, nil},
		} {
			if got := producers(c.from, c.to, c.limit); !slices.Equal(got, c.want) {
				t.Errorf("AbortedTxns(5, %d, %d, %d) = %v, want %v", c.from, c.to, c.limit, got, c.want)
			}
		}
		return nil
	})
	write(t, s, func(tx *Tx) error { return tx.DeleteOpenTxn(5, 7) })
	view(t, s, func(tx *Tx) error {
		if got, err := tx.StableOffset(5, 200); err != nil || got != 120 {
			t.Errorf("StableOffset after DeleteOpenTxn = %d, %v", got, err)
		}
		return nil
	})
}

// Producer returns what PutProducer stored for that producer and
// partition; PartitionProducers lists one partition's producers and says
// when it stopped at maxScan.
func TestProducerReads(t *testing.T) {
	s := openTest(t)
	st := dedup.ProducerState{Epoch: 3, LastUpdateMs: 77, Batches: []dedup.ProducerBatch{{FirstSeq: 0, LastSeq: 4, BaseOffset: 10}}}
	write(t, s, func(tx *Tx) error {
		for _, p := range []struct {
			producer int64
			pid      uint64
		}{{1, 5}, {1, 6}, {2, 6}, {3, 5}} {
			st := st
			st.Epoch = int16(p.producer)
			if err := tx.PutProducer(p.producer, p.pid, st); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx *Tx) error {
		want := st
		want.Epoch = 3
		if got, found, err := tx.Producer(3, 5); err != nil || !found || !reflect.DeepEqual(got, want) {
			t.Errorf("Producer(3, 5) = %+v %v, %v; want %+v", got, found, err, want)
		}
		for _, c := range [][2]int64{{2, 5}, {3, 6}, {4, 5}} {
			if got, found, err := tx.Producer(c[0], uint64(c[1])); err != nil || found {
				t.Errorf("Producer(%d, %d) = %+v %v, %v", c[0], c[1], got, found, err)
			}
		}
		for _, c := range []struct {
			pid      uint64
			maxScan  int
			want     []int64
			complete bool
		}{
			{5, 10, []int64{1, 3}, true},
			{6, 10, []int64{1, 2}, true},
			{7, 10, nil, true},
			{5, 2, []int64{1}, false},
			{5, 4, []int64{1, 3}, true},
		} {
			got, complete, err := tx.PartitionProducers(c.pid, c.maxScan)
			var ids []int64
			for _, p := range got {
				ids = append(ids, p.ProducerID)
				if p.State.Epoch != int16(p.ProducerID) {
					t.Errorf("PartitionProducers(%d): producer %d with the state of another", c.pid, p.ProducerID)
				}
			}
			if err != nil || complete != c.complete || !slices.Equal(ids, c.want) {
				t.Errorf("PartitionProducers(%d, %d) = %v complete %v, %v; want %v %v", c.pid, c.maxScan, ids, complete, err, c.want, c.complete)
			}
		}
		return nil
	})
}

// Tombstones are listed oldest first, up to limit; Nodes in id order; a
// new store's Meta has NextID 1, and Meta reads back PutMeta and
// PutLogFormat.
func TestSmallListingsAndMeta(t *testing.T) {
	s := openTest(t)
	view(t, s, func(tx *Tx) error {
		if m, err := tx.Meta(); err != nil || m != (Meta{NextID: 1}) {
			t.Errorf("Meta of a new store = %+v, %v", m, err)
		}
		if n, err := tx.Node("a"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Node(a) = %+v, %v; want ErrNotFound", n, err)
		}
		return nil
	})
	meta := Meta{AppliedIndex: 9, AppliedTerm: 2, ClockMs: -5, NextID: 70, LogFormat: 2}
	write(t, s, func(tx *Tx) error {
		for _, err := range []error{
			tx.PutMeta(meta), tx.PutLogFormat(2),
			tx.DeleteQueue(Queue{ID: 1, Name: "x"}, 50), tx.DeleteQueue(Queue{ID: 2, Name: "y"}, 3), tx.DeleteQueue(Queue{ID: 3, Name: "z"}, 256),
			tx.PutNode(Node{ID: "n2", HTTPAddr: "h2"}), tx.PutNode(Node{ID: "n10", HTTPAddr: "h10"}), tx.PutNode(Node{ID: "n1", HTTPAddr: "h1", LogFormat: 2}),
		} {
			if err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx *Tx) error {
		if m, err := tx.Meta(); err != nil || m != meta {
			t.Errorf("Meta = %+v, %v; want %+v", m, err, meta)
		}
		for limit, want := range map[int][]uint64{10: {3, 50, 256}, 2: {3, 50}} {
			tss, err := tx.Tombstones(limit)
			var seqs []uint64
			for _, ts := range tss {
				seqs = append(seqs, ts.Seq)
				if ts.Kind != TombstoneQueue || ts.Queue == "" {
					t.Errorf("tombstone %+v", ts)
				}
			}
			if err != nil || !slices.Equal(seqs, want) {
				t.Errorf("Tombstones(%d) = %v, %v; want %v", limit, seqs, err, want)
			}
		}
		nodes, err := tx.Nodes()
		var ids []string
		for _, n := range nodes {
			ids = append(ids, n.ID)
		}
		if err != nil || !slices.Equal(ids, []string{"n1", "n10", "n2"}) {
			t.Errorf("Nodes = %v, %v", ids, err)
		}
		if n, err := tx.Node("n1"); err != nil || n != (Node{ID: "n1", HTTPAddr: "h1", LogFormat: 2}) {
			t.Errorf("Node(n1) = %+v, %v", n, err)
		}
		return nil
	})
	write(t, s, func(tx *Tx) error { return tx.DeleteNode("n10") })
	view(t, s, func(tx *Tx) error {
		if _, err := tx.Node("n10"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Node(n10) after delete: %v", err)
		}
		if nodes, err := tx.Nodes(); err != nil || len(nodes) != 2 {
			t.Errorf("Nodes after delete: %+v, %v", nodes, err)
		}
		return nil
	})
}

// ConsumerGroups returns every group when there are at most limit (a
// group with both a cursor and a subscription counted once), and none,
// with complete false, when there are more.
func TestConsumerGroupsAtTheLimit(t *testing.T) {
	s := openTest(t)
	write(t, s, func(tx *Tx) error {
		for _, g := range []string{"b", "a", "a\x00"} {
			if err := tx.PutCursor(g, Cursor{QueueID: 1, Partition: "0", Offset: 1}, 1); err != nil {
				return err
			}
		}
		for _, g := range []string{"a", "c"} {
			if err := tx.PutSubscription(g, 1, Subscription{}, 1); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx *Tx) error {
		want := []string{"a", "a\x00", "b", "c"}
		for limit := len(want); limit <= len(want)+1; limit++ {
			if got, complete, err := tx.ConsumerGroups(limit); err != nil || !complete || !slices.Equal(got, want) {
				t.Errorf("ConsumerGroups(%d) = %q complete %v, %v; want %q", limit, got, complete, err, want)
			}
		}
		if got, complete, err := tx.ConsumerGroups(len(want) - 1); err != nil || complete || got != nil {
			t.Errorf("ConsumerGroups(%d) = %q complete %v, %v; want none, incomplete", len(want)-1, got, complete, err)
		}
		if g, c, err := tx.LeaseCursor("no-such-lease"); !errors.Is(err, ErrNotFound) {
			t.Errorf("LeaseCursor of an unknown lease = %q %+v, %v", g, c, err)
		}
		return nil
	})
}
