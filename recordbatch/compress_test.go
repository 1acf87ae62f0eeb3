package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/klauspost/compress/s2"
)

// packed compresses body as a producer would; snappy as one raw block
// (franz-go's way), the framing compress does not write.
func packed(t testing.TB, codec Codec, body []byte) []byte {
	if codec == CodecSnappy {
		return s2.EncodeSnappy(nil, body)
	}
	out, err := compress(codec, 0, body)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// compressedBatch re-packs a built batch's records with a codec, fixing
// attributes, length and CRC, as a producer would send it.
func compressedBatch(t testing.TB, codec Codec, recs []Record) []byte {
	plain := Build(0, recs)
	raw := append([]byte(nil), plain[:HeaderSize]...)
	raw = append(raw, packed(t, codec, plain[HeaderSize:])...)
	binary.BigEndian.PutUint16(raw[offAttributes:], uint16(codec))
	binary.BigEndian.PutUint32(raw[offLength:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[offCRC:], crc32Checksum(raw[offAttributes:]))
	return raw
}

func TestEveryCodecDecodes(t *testing.T) {
	recs := []Record{{Offset: 0, Value: bytes.Repeat([]byte("v"), 500)}, {Offset: 1, Key: []byte("k"), Value: []byte("w")}}
	for _, codec := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		raw := compressedBatch(t, codec, recs)
		if _, err := Parse(raw); err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		got, err := Records(raw, 1<<20)
		if err != nil || len(got) != 2 || len(got[0].Value) != 500 || string(got[1].Key) != "k" {
			t.Fatalf("codec %d: %d records, %v", codec, len(got), err)
		}
	}
}

// A zip bomb: a tiny batch that would expand to 64 MiB is refused at the
// cap, not expanded.
func TestDecompressionBombIsRefused(t *testing.T) {
	for _, codec := range []Codec{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		bomb := packed(t, codec, make([]byte, 64<<20))
		if len(bomb) > 4<<20 {
			t.Fatalf("codec %d: the bomb is %d bytes, not tiny", codec, len(bomb))
		}
		if _, err := decompress(codec, bomb, 1<<20); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("codec %d: a 64 MiB expansion under a 1 MiB cap: %v", codec, err)
		}
	}
}

// FuzzRecords: decoding the records of any batch that parses never panics
// and never returns more bytes than the cap. Seeds: a batch per codec.
func FuzzRecords(f *testing.F) {
	for _, codec := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		f.Add(compressedBatch(f, codec, []Record{{Offset: 0, Value: []byte("hello")}, {Offset: 1, Value: []byte("world")}}))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if _, err := Parse(raw); err != nil {
			return
		}
		recs, err := Records(raw, 1<<16)
		if err != nil {
			return
		}
		total := 0
		for _, r := range recs {
			total += len(r.Key) + len(r.Value)
		}
		if total > 1<<16 {
			t.Fatalf("decoded %d bytes past a %d cap", total, 1<<16)
		}
	})
}
