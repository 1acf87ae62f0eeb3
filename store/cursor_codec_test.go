package store

import (
	"bytes"
	"reflect"
	"testing"
)

func TestCursorCodecRoundTrip(t *testing.T) {
	for _, c := range []Cursor{
		{Offset: 7},
		{Offset: 100, LeaderEpoch: 3, Metadata: "m", UpdatedMs: 99,
			Lease:    &Lease{ID: "L", ExpiresAtMs: 5000, Offsets: []int64{100, 102}, TxHashes: []uint64{1, 2}, Acks: map[int64]string{102: "failed"}},
			Done:     []int64{101},
			Attempts: map[int64]int32{100: 1, 102: 3},
			Failures: map[int64]int32{102: 2},
			Expired:  12},
	} {
		got, err := decodeCursor(encodeCursor(c))
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip of %+v: %+v, %v", c, got, err)
		}
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
	b := encodeCursor(Cursor{Offset: 1, Lease: &Lease{ID: "x", Offsets: []int64{1}, TxHashes: []uint64{9}}})
	for n := 1; n < len(b); n++ {
		if _, err := decodeCursor(b[:n]); err == nil {
			t.Fatalf("a cursor cut to %d of %d bytes decoded", n, len(b))
		}
	}
	if _, err := decodeCursor([]byte{cursorV2, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}); err == nil {
		t.Fatal("a cursor with a huge metadata length decoded")
	}
}
