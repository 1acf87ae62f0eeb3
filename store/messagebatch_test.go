package store

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/waggle-mq/waggle/dedup"
)

// putMessageBatches commits batches of sizes messages each to partition
// pid of q, from offset 0, one PutMessages per batch, and returns the
// payloads in offset order.
func putMessageBatches(t *testing.T, s *Store, q Queue, pid uint64, sizes ...int) [][]byte {
	t.Helper()
	var out [][]byte
	write(t, s, func(tx *Tx) error {
		for _, n := range sizes {
			var msgs []Message
			for range n {
				p := randomPayload(60 + len(out)%40)
				msgs = append(msgs, Message{Offset: uint64(len(out)), ID: [16]byte{byte(len(out))}, TimestampMs: 1000 + int64(len(out)),
					TransactionID: fmt.Sprint("tx-", len(out)), Payload: p, AppendSeq: 7})
				out = append(out, p)
			}
			if err := tx.PutMessages(q, pid, msgs); err != nil {
				return err
			}
		}
		return nil
	})
	return out
}

// A batch of messages is one record and one pointer, and reads as one
// entry per message: from any offset, whole or cut by a reader's limits,
// one offset at a time, and without its body as one entry of Count
// offsets.
func TestMessageBatchReadsAsMessages(t *testing.T) {
	s := openTest(t)
	q := Queue{ID: 1, Name: "q"}
	putQueue(t, s, q, 0, 2)
	want := putMessageBatches(t, s, q, 2, 3, 1, 4) // offsets 0-2, 3, 4-7

	err := s.View(func(tx *Tx) error {
		if n, err := tx.KeysByFamily(); err != nil || n[familyMessage] != 3 {
			t.Errorf("message keys: %d (%v), want one per batch: 3", n[familyMessage], err)
		}
		for from := range uint64(len(want)) {
			got, err := tx.Entries(2, from, 1<<30, 100)
			if err != nil {
				return err
			}
			if len(got) != len(want)-int(from) {
				t.Fatalf("from %d: %d entries, want %d", from, len(got), len(want)-int(from))
			}
			for i, e := range got {
				o := from + uint64(i)
				if e.Offset != o || e.Count != 1 || e.Message == nil || !bytes.Equal(e.Message.Payload, want[o]) ||
					e.Message.TransactionID != fmt.Sprint("tx-", o) || e.Message.ID[0] != byte(o) || e.AppendSeq != 7 {
					t.Fatalf("from %d: entry %d is %+v", from, i, e)
				}
			}
		}
		// maxCount and maxBytes count messages, not batches.
		if got, _ := tx.Entries(2, 1, 1<<30, 3); len(got) != 3 || got[2].Offset != 3 {
			t.Errorf("three entries from 1: %d, last %+v", len(got), got[len(got)-1])
		}
		if got, _ := tx.Entries(2, 4, 250, 100); len(got) != 2 {
			t.Errorf("250 bytes from 4 gave %d entries, want 2", len(got))
		}
		for o := range uint64(len(want)) {
			e, found, err := tx.EntryAt(2, o)
			if err != nil || !found || e.Offset != o || e.Message == nil || !bytes.Equal(e.Message.Payload, want[o]) {
				t.Fatalf("EntryAt(%d): %+v %v %v", o, e, found, err)
			}
			idx, found, err := tx.entryAt(2, o, false)
			if err != nil || !found || idx.Message != nil || idx.Offset > o || idx.Offset+uint64(idx.Count) <= o {
				t.Fatalf("index entry at %d: %+v %v %v", o, idx, found, err)
			}
		}
		if _, found, err := tx.EntryAt(2, 8); found || err != nil {
			t.Errorf("EntryAt past the end: found %v, %v", found, err)
		}
		e, found, err := tx.FirstEntryAtOrAfter(Partition{ID: 2, NextOffset: 8}, 1004)
		if err != nil || !found || e.Offset != 4 || e.Message == nil {
			t.Errorf("first entry at or after 1004 ms: %+v %v %v (a batch has its first message's time)", e, found, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The cached batch is dropped when its message key is written, so a read
// after a retention trim or a delete in the same transaction sees it gone.
func TestMessageBatchCacheFollowsWrites(t *testing.T) {
	s := openTest(t)
	q := Queue{ID: 1, Name: "q"}
	putQueue(t, s, q, 0, 2)
	putMessageBatches(t, s, q, 2, 4)
	tx := s.BeginWrite()
	defer tx.Discard()
	if _, found, err := tx.EntryAt(2, 2); !found || err != nil {
		t.Fatalf("EntryAt(2): %v %v", found, err)
	}
	if err := tx.del(messageKey(2, 0)); err != nil {
		t.Fatal(err)
	}
	if e, found, err := tx.EntryAt(2, 3); found || err != nil {
		t.Fatalf("EntryAt(3) after the batch's key was deleted: %+v %v %v", e, found, err)
	}
}

// A damaged batch record is refused, never read past its end.
func TestDecodeMessageBatchRefusesDamage(t *testing.T) {
	msgs := []Message{{Offset: 5, TransactionID: "a", Payload: []byte("xy")}, {Offset: 6, TransactionID: "bb", Payload: []byte("z")}}
	good := appendMessageBatch(nil, msgs)
	e, err := decodeMessageBatch(5, good)
	if err != nil || e.Count != 2 || e.Messages[1].Offset != 6 || string(e.Messages[1].Payload) != "z" || e.Messages[1].TransactionID != "bb" {
		t.Fatalf("good batch: %+v %v", e, err)
	}
	for cut := range len(good) {
		if _, err := decodeMessageBatch(5, good[:cut]); err == nil {
			t.Errorf("a batch cut at %d of %d bytes decoded", cut, len(good))
		}
	}
	huge := bytes.Clone(good)
	huge[1], huge[2] = 0xff, 0xff // count
	if _, err := decodeMessageBatch(5, huge); err == nil {
		t.Error("a batch whose count exceeds its bytes decoded")
	}
	if _, err := decodeMessageBatch(5, append(bytes.Clone(good), 0)); err == nil {
		t.Error("a batch with a trailing byte decoded")
	}
}

// A group of dedup records filed under one expiry entry is pruned whole
// once due, counts each record against the limit, and leaves a record
// stored again since (with a later expiry) in place.
func TestPruneDedupGroups(t *testing.T) {
	s := openTest(t)
	long := string(bytes.Repeat([]byte("L"), maxRawIDKey+1)) // a hashed id
	ids := []string{"a", "b", long, "c"}
	write(t, s, func(tx *Tx) error {
		var es []dedup.Entry
		for i := range ids {
			es = append(es, dedup.Entry{Offset: uint64(10 + i), ExpiresAtMs: 500})
		}
		return tx.PutDedupGroup(3, ids, es)
	})
	write(t, s, func(tx *Tx) error { // "b" stored again, due later
		return tx.PutDedupGroup(3, []string{"b"}, []dedup.Entry{{Offset: 20, ExpiresAtMs: 900}})
	})
	if n := prune(t, s, 499, 100); n != 0 {
		t.Fatalf("pruned %d before anything was due", n)
	}
	if n := prune(t, s, 500, 1); n != 4 {
		t.Fatalf("pruned %d records at 500, want the whole group of 4 (a group is not split)", n)
	}
	err := s.View(func(tx *Tx) error {
		for _, id := range ids {
			e, found, err := tx.Dedup(3, id)
			if err != nil {
				return err
			}
			if want := id == "b"; found != want || found && e.Offset != 20 {
				t.Errorf("id %.5s after the prune: found %v %+v", id, found, e)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := prune(t, s, 900, 100); n != 1 {
		t.Fatalf("pruned %d at 900, want b's second record", n)
	}
	err = s.View(func(tx *Tx) error {
		n, err := tx.KeysByFamily()
		if n[familyDedup]+n[familyDedupLong]+n[familyExpiry] != 0 {
			t.Errorf("left after both prunes: %v", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Deleting a queue removes its batches' dedup records and their groups'
// expiry entries, old-style records and entries too, and nothing else.
func TestQueueDeleteRemovesDedupGroups(t *testing.T) {
	s := openTest(t)
	q := Queue{ID: 3, Name: "q"}
	putQueue(t, s, q, 0, 4)
	putQueue(t, s, Queue{ID: 5, Name: "kept"}, 0, 6)
	for i := range 50 { // 50 push entries of 20 ids each, in 4 and 6
		write(t, s, func(tx *Tx) error {
			for _, pid := range []uint64{4, 6} {
				var ids []string
				var es []dedup.Entry
				for j := range 20 {
					ids = append(ids, fmt.Sprintf("id-%d-%d", i, j))
					es = append(es, dedup.Entry{Offset: uint64(20*i + j), ExpiresAtMs: 9000})
				}
				if err := tx.PutDedupGroup(pid, ids, es); err != nil {
					return err
				}
			}
			return nil
		})
	}
	fileDedup(t, s, 4, "old", 30, 9000) // records with an entry each
	write(t, s, func(tx *Tx) error { return tx.DeleteQueue(q, 50) })
	cleanUpAll(t, s, 100)
	err := s.View(func(tx *Tx) error {
		n, err := tx.KeysByFamily()
		if n[familyDedup] != 1000 || n[familyExpiry] != 50 {
			t.Errorf("after deleting q: %d dedup records and %d expiry entries, want kept's 1000 and 50", n[familyDedup], n[familyExpiry])
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
