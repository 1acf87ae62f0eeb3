package store

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
)

func TestCursorCodecRoundTrip(t *testing.T) {
	for _, c := range []Cursor{
		{Offset: 7},
		{Offset: 100, LeaderEpoch: 3, Metadata: "m", UpdatedMs: 99,
			Leases:   []*Lease{{ID: "L", ExpiresAtMs: 5000, Offsets: []int64{100, 102}, TxHashes: []uint64{1, 2}, Acks: map[int64]string{102: "failed"}}},
			Done:     []int64{101},
			Attempts: map[int64]int32{100: 1, 102: 3},
			Failures: map[int64]int32{102: 2},
			Expired:  12},
		{Offset: 5, Leases: []*Lease{
			{ID: "share:a:1", ExpiresAtMs: 10, Offsets: []int64{5, 6}, TxHashes: []uint64{3, 4}},
			{ID: "share:b:2", ExpiresAtMs: 20, Offsets: []int64{8}, TxHashes: []uint64{5}, Acks: map[int64]string{8: "completed"}},
		}},
	} {
		got, err := decodeCursor(encodeCursor(c))
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip of %+v: %+v, %v", c, got, err)
		}
	}
}

// A cursor with one lease is the bytes it was before cursors could hold
// several (the lease flag became a count), and a version 1 (JSON) cursor's
// lease is read as its one lease.
func TestCursorWithOneLeaseKeepsItsEncoding(t *testing.T) {
	c := Cursor{Gen: 9, Offset: 100, LeaderEpoch: 3, Metadata: "m", UpdatedMs: 99,
		Leases: []*Lease{{ID: "L", ExpiresAtMs: 5000, Offsets: []int64{100, 102}, TxHashes: []uint64{1, 2}, Acks: map[int64]string{102: "failed"}}},
		Done:   []int64{101}, Attempts: map[int64]int32{100: 1, 102: 3}, Failures: map[int64]int32{102: 2}, Expired: 12}
	const before = "0309c80106016dc60101014c904e02c801cc010000000000000001000000000000000201cc010201ca0102c80102cc010601cc010418"
	if got := fmt.Sprintf("%x", encodeCursor(c)); got != before {
		t.Fatalf("a one-lease cursor encodes to\n%s, was\n%s", got, before)
	}
	js := append([]byte{recordV1}, `{"offset":100,"leaderEpoch":3,"metadata":"m","updatedMs":99,"lease":{"id":"L","expiresAtMs":5000,"offsets":[100,102],"txHashes":[1,2],"acks":{"102":"failed"}},"done":[101],"attempts":{"100":1,"102":3},"failures":{"102":2},"expired":12}`...)
	got, err := decodeCursor(js)
	c.Gen = 0 // not in JSON cursors
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("JSON cursor read as %+v, %v", got, err)
	}
}

// Equal cursors must be equal bytes (maps are written in key order), or
// replicas would diverge in their snapshots.
func TestCursorEncodingIsDeterministic(t *testing.T) {
	c := Cursor{Attempts: map[int64]int32{}}
	for i := int64(0); i < 100; i++ {
		c.Attempts[i*7%100] = int32(i)
	}
	first := encodeCursor(c)
	for range 20 {
		if !bytes.Equal(encodeCursor(c), first) {
			t.Fatal("the same cursor encoded to different bytes")
		}
	}
}

func TestCursorDecodeRejectsCorruption(t *testing.T) {
	b := encodeCursor(Cursor{Offset: 1, Leases: []*Lease{{ID: "x", Offsets: []int64{1}, TxHashes: []uint64{9}}}})
	for n := 1; n < len(b); n++ {
		if _, err := decodeCursor(b[:n]); err == nil {
			t.Fatalf("a cursor cut to %d of %d bytes decoded", n, len(b))
		}
	}
	if _, err := decodeCursor([]byte{cursorV2, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}); err == nil {
		t.Fatal("a cursor with a huge metadata length decoded")
	}
}
