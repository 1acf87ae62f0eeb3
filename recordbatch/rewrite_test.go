package recordbatch

import (
	"bytes"
	"crypto/rand"
	"testing"
)

// Every codec round-trips random records, each batch still parses as a
// producer's (CRC, length), and its producer fields are untouched.
func TestRecompressRoundTripsEveryCodec(t *testing.T) {
	payload := make([]byte, 100<<10) // random: incompressible, several snappy blocks
	rand.Read(payload)
	recs := []Record{{Offset: 0, TimestampMs: 7, Key: []byte("k"), Value: payload}, {Offset: 1, TimestampMs: 3, Value: []byte("small")}}
	plain := build(0, recs, 0, 42, 3)
	for _, tc := range []struct {
		codec Codec
		level int
	}{{CodecGzip, 0}, {CodecGzip, 9}, {CodecSnappy, 0}, {CodecLZ4, 0}, {CodecLZ4, 9}, {CodecZstd, 0}, {CodecZstd, 19}, {CodecZstd, -5}} {
		packed, err := Recompress(plain, tc.codec, tc.level, 1<<20)
		if err != nil {
			t.Fatalf("codec %d level %d: %v", tc.codec, tc.level, err)
		}
		b, err := Parse(packed)
		if err != nil || b.Codec != tc.codec || b.ProducerID != 42 || b.ProducerEpoch != 3 || b.NumRecords != 2 {
			t.Fatalf("codec %d level %d: %+v, %v", tc.codec, tc.level, b, err)
		}
		got, err := Records(packed, 1<<20)
		if err != nil || len(got) != 2 || !bytes.Equal(got[0].Value, payload) || string(got[1].Value) != "small" || got[1].TimestampMs != 3 {
			t.Fatalf("codec %d level %d: records %d, %v", tc.codec, tc.level, len(got), err)
		}
		back, err := Recompress(packed, CodecNone, 0, 1<<20)
		if err != nil || !bytes.Equal(back, plain) {
			t.Fatalf("codec %d back to none: equal %v, %v", tc.codec, bytes.Equal(back, plain), err)
		}
		if same, _ := Recompress(packed, tc.codec, 1, 1<<20); &same[0] != &packed[0] {
			t.Fatalf("codec %d: a batch already in the codec was rewritten", tc.codec)
		}
	}
	if _, err := Recompress(plain, CodecZstd, 0, 1000); err != nil {
		t.Fatalf("an uncompressed batch needs no decompression budget: %v", err)
	}
	gz, _ := Recompress(plain, CodecGzip, 0, 1<<20)
	if _, err := Recompress(gz, CodecZstd, 0, 1000); err == nil {
		t.Fatal("a batch that decompresses past the budget was recompressed")
	}
}

func TestLogAppendTimeAndTimestampRange(t *testing.T) {
	raw := Build(0, []Record{{Offset: 0, TimestampMs: 500}, {Offset: 1, TimestampMs: 200}, {Offset: 2, TimestampMs: 900}})
	oldest, newest, err := TimestampRange(raw, 1<<20)
	if err != nil || oldest != 200 || newest != 900 {
		t.Fatalf("range %d..%d, %v", oldest, newest, err)
	}
	SetLogAppendTime(raw, 12345)
	b, err := Parse(raw)
	if err != nil || b.MaxTimestamp != 12345 || raw[offAttributes+1]&timestampTypeBit == 0 {
		t.Fatalf("after SetLogAppendTime: %+v, %v", b, err)
	}
}

// BenchmarkRecompress is the leader's cost of compression.type: one
// producer batch of 16 records of 1 KiB (half random, half text, as
// JSON-ish payloads are), uncompressed, rewritten in each codec.
func BenchmarkRecompress(b *testing.B) {
	var recs []Record
	for i := range 16 {
		v := make([]byte, 1024)
		if i%2 == 0 {
			rand.Read(v)
		} else {
			copy(v, bytes.Repeat([]byte(`{"user":42,"event":"click","page":"/home"}`), 25))
		}
		recs = append(recs, Record{Offset: int64(i), TimestampMs: 1, Value: v})
	}
	plain := build(0, recs, 0, -1, -1)
	for _, tc := range []struct {
		name  string
		codec Codec
		level int
	}{{"gzip", CodecGzip, 0}, {"snappy", CodecSnappy, 0}, {"lz4-fast", CodecLZ4, 1}, {"lz4-9", CodecLZ4, 9}, {"zstd-3", CodecZstd, 3}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(plain)))
			var out []byte
			for b.Loop() {
				out, _ = Recompress(plain, tc.codec, tc.level, 1<<20)
			}
			b.ReportMetric(float64(len(out))/float64(len(plain)), "ratio")
		})
	}
}
