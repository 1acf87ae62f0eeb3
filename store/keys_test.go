package store

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/waggle-mq/waggle/dedup"
)

func TestMessageKeyRoundTrip(t *testing.T) {
	for _, tc := range []struct{ pid, off uint64 }{{0, 0}, {1, 2}, {1 << 40, 1<<64 - 1}} {
		pid, off, err := parseMessageKey(messageKey(tc.pid, tc.off))
		if err != nil || pid != tc.pid || off != tc.off {
			t.Fatalf("parse(messageKey(%d,%d)) = %d,%d,%v", tc.pid, tc.off, pid, off, err)
		}
	}
	if _, _, err := parseMessageKey([]byte{familyMessage, 1}); err == nil {
		t.Fatal("short message key parsed")
	}
}

// Offsets must sort numerically inside a partition, and partitions must not
// interleave, or range reads return the wrong messages.
func TestMessageKeysSortByPartitionThenOffset(t *testing.T) {
	keys := [][]byte{messageKey(1, 0), messageKey(1, 255), messageKey(1, 256), messageKey(1, 1<<32), messageKey(2, 0)}
	for i := 1; i < len(keys); i++ {
		if bytes.Compare(keys[i-1], keys[i]) >= 0 {
			t.Fatalf("key %d does not sort before key %d", i-1, i)
		}
	}
}

func TestExpiryKeyRoundTripAndOrder(t *testing.T) {
	dk, hashed := dedupKey(9, "order-1")
	if hashed {
		t.Fatal("short id was hashed")
	}
	at, key, err := parseExpiryKey(expiryKey(1_700_000_000_000, dk))
	if err != nil || at != 1_700_000_000_000 || !bytes.Equal(key, dk) {
		t.Fatalf("parseExpiryKey = %d,%x,%v", at, key, err)
	}
	late, _ := dedupKey(1, "a")
	early, _ := dedupKey(9, "z")
	if bytes.Compare(expiryKey(999, early), expiryKey(1000, late)) >= 0 {
		t.Fatal("expiry keys do not sort by time first")
	}
	if _, _, err := parseExpiryKey([]byte{familyExpiry}); err == nil {
		t.Fatal("short expiry key parsed")
	}
}

// Regression: a 65,535-byte transactionId made a dedup key over badger's
// 65,000-byte limit, the apply panicked, and replay panicked again.
func TestLongIDsAreHashedUnderBadgerKeyLimit(t *testing.T) {
	long := strings.Repeat("x", 65535)
	k, hashed := dedupKey(1, long)
	if !hashed || len(k) != 1+8+32 {
		t.Fatalf("long id key: %d bytes, hashed %v", len(k), hashed)
	}
	if len(expiryKey(1, k)) > 100 {
		t.Fatal("expiry key of a long id is long")
	}
	edge, hashed := dedupKey(1, strings.Repeat("x", maxRawIDKey))
	if hashed || len(edge) != 9+maxRawIDKey {
		t.Fatal("id of exactly maxRawIDKey bytes was hashed")
	}
}

func TestPartitionKeyRoundTrip(t *testing.T) {
	qid, name, err := parsePartitionKey(partitionKey(42, "customer-7"))
	if err != nil || qid != 42 || name != "customer-7" {
		t.Fatalf("parsePartitionKey = %d,%q,%v", qid, name, err)
	}
	if !bytes.HasPrefix(partitionKey(42, "x"), partitionPrefix(42)) {
		t.Fatal("partition key lacks its queue prefix")
	}
	// Queue 1's prefix must not match queue 256's keys.
	if bytes.HasPrefix(partitionKey(256, "x"), partitionPrefix(1)) {
		t.Fatal("queue prefixes overlap")
	}
}

func TestRecordRoundTrips(t *testing.T) {
	meta := Meta{AppliedIndex: 10, AppliedTerm: 3, ClockMs: 1234, NextID: 7}
	if got, err := decodeMeta(meta.encode()); err != nil || got != meta {
		t.Fatalf("meta: %+v, %v", got, err)
	}
	q := Queue{ID: 5, Name: "payments", DedupWindowSeconds: 60, CreatedAtMs: 99, Configs: map[string]int64{"min.insync.replicas": 2}}
	if got, err := decodeQueue(q.encode()); err != nil || !reflect.DeepEqual(got, q) {
		t.Fatalf("queue: %+v, %v", got, err)
	}
	p := Partition{ID: 8, QueueID: 5, Name: "eu", NextOffset: 100, StartOffset: 3}
	if got, err := decodePartitionMeta(8, p.encodeMeta()); err != nil || got != p {
		t.Fatalf("partition: %+v, %v", got, err)
	}
	m := Message{Offset: 4, ID: [16]byte{1, 2, 3}, TimestampMs: 77, TransactionID: "tx", Payload: []byte(`{"a":1}`)}
	got, err := decodeMessage(4, m.appendTo(nil))
	if err != nil || got.ID != m.ID || got.TimestampMs != 77 || got.TransactionID != "tx" || string(got.Payload) != `{"a":1}` {
		t.Fatalf("message: %+v, %v", got, err)
	}
	d := dedup.Entry{Offset: 4, MessageID: [16]byte{9}, StoredAtMs: 10, ExpiresAtMs: 20}
	for _, id := range []string{"", "a-long-id"} {
		for _, g := range []*dedupGroup{nil, {offset: 3, count: 7}} {
			got, gotID, gotGroup, err := decodeDedup(encodeDedup(d, id, g))
			if err != nil || got != d || gotID != id || (gotGroup == nil) != (g == nil) || g != nil && *gotGroup != *g {
				t.Fatalf("dedup (group %v): %+v %q %v, %v", g, got, gotID, gotGroup, err)
			}
		}
	}
	if _, _, _, err := decodeDedup(encodeDedup(d, "", &dedupGroup{})[:45]); err == nil {
		t.Fatal("a version 2 dedup record cut inside its group decoded")
	}
}

func TestProducerRecordRoundTrip(t *testing.T) {
	st := dedup.ProducerState{Epoch: -2, LastUpdateMs: 99, Batches: []dedup.ProducerBatch{{FirstSeq: 1, LastSeq: 5, BaseOffset: 1 << 40}, {FirstSeq: 6, LastSeq: 6, BaseOffset: 7}}}
	got, err := decodeProducer(encodeProducer(st))
	if err != nil || got.Epoch != st.Epoch || got.LastUpdateMs != 99 || len(got.Batches) != 2 || got.Batches[0] != st.Batches[0] || got.Batches[1] != st.Batches[1] {
		t.Fatalf("producer state: %+v, %v", got, err)
	}
	if _, err := decodeProducer(encodeProducer(st)[:20]); err == nil {
		t.Fatal("truncated producer state decoded")
	}
}

func TestDecodeRejectsCorruptRecords(t *testing.T) {
	if _, err := decodeMeta([]byte{recordV1, 1}); err == nil {
		t.Error("short meta decoded")
	}
	if _, err := decodeQueue([]byte{2, '{', '}'}); err == nil {
		t.Error("queue with unknown version decoded")
	}
	// A transactionId length running past the end of the record.
	bad := Message{TransactionID: "abc"}.appendTo(nil)
	bad[1+8+16+8] = 200
	if _, err := decodeMessage(0, bad); err == nil {
		t.Error("message with overlong transactionId length decoded")
	}
	if _, _, _, err := decodeDedup([]byte{recordV1}); err == nil {
		t.Error("short dedup record decoded")
	}
}

func TestCursorKeyRoundTrip(t *testing.T) {
	g, q, p, err := parseCursorKey(cursorKey("workers", 42, "customer-7"))
	if err != nil || g != "workers" || q != 42 || p != "customer-7" {
		t.Fatalf("parseCursorKey = %q,%d,%q,%v", g, q, p, err)
	}
	// One group's prefix must not cover another group whose name extends it.
	if bytes.HasPrefix(cursorKey("workers-2", 1, "0"), cursorPrefix("workers")) {
		t.Fatal("group prefixes overlap")
	}
}
