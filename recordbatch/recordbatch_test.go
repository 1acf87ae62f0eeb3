package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func sample() []Record {
	return []Record{
		{Offset: 10, TimestampMs: 1000, Key: []byte("k"), Value: []byte("v1"), Headers: []kmsg.Header{{Key: "h", Value: []byte("x")}}},
		{Offset: 11, TimestampMs: 1005, Value: []byte(`{"a":1}`)},
	}
}

func TestBuildThenReadRecords(t *testing.T) {
	raw := Build(10, sample())
	got, err := Records(raw, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Offset != 10 || got[1].Offset != 11 || got[1].TimestampMs != 1005 ||
		string(got[0].Key) != "k" || got[1].Key != nil || string(got[0].Headers[0].Value) != "x" || string(got[1].Value) != `{"a":1}` {
		t.Fatalf("records %+v", got)
	}
}

// A built batch is what a producer would send once its base offset is 0.
func TestBuiltBatchParsesAsProduced(t *testing.T) {
	raw := Build(0, []Record{{Offset: 0, Value: []byte("a")}, {Offset: 1, Value: []byte("b")}})
	b, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if b.NumRecords != 2 || b.Codec != CodecNone || b.ProducerID != -1 {
		t.Fatalf("batch %+v", b)
	}
	batches, err := Split(append(append([]byte{}, raw...), raw...))
	if err != nil || len(batches) != 2 {
		t.Fatalf("two concatenated batches: %d, %v", len(batches), err)
	}
}

func TestParseRejects(t *testing.T) {
	good := Build(0, []Record{{Offset: 0, Value: []byte("a")}})
	mutate := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	tests := []struct {
		name string
		raw  []byte
		want error
	}{
		{"short", good[:30], ErrCorrupt},
		{"length field", mutate(func(b []byte) { binary.BigEndian.PutUint32(b[offLength:], 5) }), ErrCorrupt},
		{"magic", mutate(func(b []byte) { b[offMagic] = 1 }), ErrCorrupt},
		{"crc", mutate(func(b []byte) { b[len(b)-1] ^= 1 }), ErrCorrupt},
		{"first offset", mutate(func(b []byte) { b[offFirstOffset+7] = 3 }), ErrCorrupt},
	}
	for _, tt := range tests {
		if _, err := Parse(tt.raw); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	// Fields under the CRC need the CRC recomputed to reach their check.
	resign := func(f func(b []byte)) []byte {
		b := mutate(f)
		binary.BigEndian.PutUint32(b[offCRC:], crc32Checksum(b[offAttributes:]))
		return b
	}
	if _, err := Parse(resign(func(b []byte) { b[offAttributes+1] |= controlBit })); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("control bit: %v", err)
	}
	if _, err := Parse(resign(func(b []byte) { b[offAttributes+1] |= 7 })); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("codec 7: %v", err)
	}
	if _, err := Parse(resign(func(b []byte) { binary.BigEndian.PutUint32(b[offLastDelta:], 4) })); !errors.Is(err, ErrCorrupt) {
		t.Errorf("last offset delta: %v", err)
	}
}

func TestRebaseLeavesTheCRCValid(t *testing.T) {
	raw := Build(0, []Record{{Offset: 0, TimestampMs: 5, Value: []byte("v")}})
	moved := Rebase(raw, 12345, 7)
	if binary.BigEndian.Uint64(moved) != 12345 || !bytes.Equal(moved[offMagic:], raw[offMagic:]) {
		t.Fatal("rebase changed more than the offset and epoch")
	}
	SetBaseOffset(moved, 0)
	binary.BigEndian.PutUint32(moved[offLeaderEpoch:], uint32(0xffffffff))
	if _, err := Parse(moved); err != nil {
		t.Fatalf("rebased batch no longer parses: %v", err)
	}
}

func TestDecompressionIsCapped(t *testing.T) {
	if _, err := unsnappy([]byte{0xff, 0xff, 0xff, 0x7f}, 1000); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("snappy claiming 256 MiB: %v", err)
	}
}

// FuzzSplit: any bytes either split into valid batches or fail; decoding
// the records of a batch that parsed never panics.
func FuzzSplit(f *testing.F) {
	f.Add(Build(0, sample()))
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		batches, err := Split(b)
		if err != nil {
			return
		}
		for _, bt := range batches {
			Records(bt.Raw, 1<<20)
		}
	})
}

// A transaction marker must read back as a control batch of the right kind
// and parse as a well-formed batch for clients (kmsg).
func TestBuildControl(t *testing.T) {
	for _, commit := range []bool{false, true} {
		raw := BuildControl(42, 7, 3, commit, 1000)
		control, gotCommit := ControlInfo(raw)
		if !control || gotCommit != commit {
			t.Fatalf("commit=%v: ControlInfo = %v, %v", commit, control, gotCommit)
		}
		h, ok := ReadHeader(raw)
		if !ok || h.ProducerID != 7 || h.ProducerEpoch != 3 || !h.Transactional || !h.Control {
			t.Fatalf("header %+v", h)
		}
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw); err != nil {
			t.Fatal(err)
		}
		if b.FirstOffset != 42 || b.NumRecords != 1 || b.CRC != int32(crc32Checksum(raw[offAttributes:])) {
			t.Fatalf("batch %+v", b)
		}
	}
	if control, _ := ControlInfo(Build(0, []Record{{Value: []byte("x")}})); control {
		t.Fatal("a data batch reads as a control batch")
	}
}
