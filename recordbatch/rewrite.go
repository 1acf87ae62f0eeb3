package recordbatch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Rewrites a leader makes to a producer's batch before proposing it, as
// a topic's configs ask (compression.type, message.timestamp.type). The
// producer fields (id, epoch, sequence) and the offsets are kept, so
// idempotence and transactions see the batch the producer sent.

// Recompress returns raw with its records in codec at level (0: the
// codec's default); raw itself when it is already in codec. The records
// are decompressed at most maxDecompressed bytes.
func Recompress(raw []byte, codec Codec, level int, maxDecompressed int) ([]byte, error) {
	if len(raw) < HeaderSize {
		return nil, ErrCorrupt
	}
	attrs := binary.BigEndian.Uint16(raw[offAttributes:])
	from := Codec(attrs & codecMask)
	if from == codec {
		return raw, nil
	}
	body, err := decompress(from, raw[HeaderSize:], maxDecompressed)
	if err != nil {
		return nil, err
	}
	packed, err := compress(codec, level, body)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, HeaderSize+len(packed))
	out = append(out, raw[:HeaderSize]...)
	out = append(out, packed...)
	binary.BigEndian.PutUint16(out[offAttributes:], attrs&^codecMask|uint16(codec))
	binary.BigEndian.PutUint32(out[offLength:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[offCRC:], crc32Checksum(out[offAttributes:]))
	return out, nil
}

// SetLogAppendTime marks raw's timestamps as the broker's (attributes
// bit 3) and sets its max timestamp to ms, in place: consumers read ms as
// every record's timestamp (KIP-32).
func SetLogAppendTime(raw []byte, ms int64) {
	attrs := binary.BigEndian.Uint16(raw[offAttributes:])
	binary.BigEndian.PutUint16(raw[offAttributes:], attrs|timestampTypeBit)
	binary.BigEndian.PutUint64(raw[offMaxTimestamp:], uint64(ms))
	binary.BigEndian.PutUint32(raw[offCRC:], crc32Checksum(raw[offAttributes:]))
}

// TimestampRange is the oldest and newest record timestamp in raw,
// decoding its records (at most maxDecompressed bytes).
func TimestampRange(raw []byte, maxDecompressed int) (oldest, newest int64, err error) {
	recs, err := Records(raw, maxDecompressed)
	if err != nil {
		return 0, 0, err
	}
	if len(recs) == 0 {
		return 0, 0, fmt.Errorf("%w: no records", ErrCorrupt)
	}
	oldest, newest = recs[0].TimestampMs, recs[0].TimestampMs
	for _, r := range recs[1:] {
		oldest, newest = min(oldest, r.TimestampMs), max(newest, r.TimestampMs)
	}
	return oldest, newest, nil
}

// xerialBlock is the size of the snappy blocks written in xerial framing,
// as the Java client writes them.
const xerialBlock = 32 << 10

var zstdEncoders sync.Map // zstd.EncoderLevel -> *sync.Pool of *zstd.Encoder

// compress writes body in codec. Snappy is written in xerial framing,
// which every client reads.
func compress(codec Codec, level int, body []byte) ([]byte, error) {
	switch codec {
	case CodecNone:
		return body, nil
	case CodecGzip:
		if level == 0 {
			level = gzip.DefaultCompression
		}
		var buf bytes.Buffer
		w, err := gzip.NewWriterLevel(&buf, level)
		if err != nil {
			return nil, err
		}
		w.Write(body) // a bytes.Buffer does not fail
		w.Close()
		return buf.Bytes(), nil
	case CodecSnappy:
		out := append([]byte(nil), xerialHeader...)
		out = binary.BigEndian.AppendUint32(out, 1) // version
		out = binary.BigEndian.AppendUint32(out, 1) // compatible version
		for len(body) > 0 {
			n := min(len(body), xerialBlock)
			block := s2.EncodeSnappy(nil, body[:n])
			out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
			out = append(out, block...)
			body = body[n:]
		}
		return out, nil
	case CodecLZ4:
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		if err := w.Apply(lz4.CompressionLevelOption(lz4Level(level))); err != nil {
			return nil, err
		}
		w.Write(body)
		w.Close()
		return buf.Bytes(), nil
	case CodecZstd:
		lvl := zstd.SpeedDefault
		if level != 0 {
			lvl = zstd.EncoderLevelFromZstd(level)
		}
		pool, _ := zstdEncoders.LoadOrStore(lvl, &sync.Pool{New: func() any {
			e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(lvl), zstd.WithEncoderConcurrency(1))
			if err != nil {
				panic(err) // only fails on bad options
			}
			return e
		}})
		e := pool.(*sync.Pool).Get().(*zstd.Encoder)
		defer pool.(*sync.Pool).Put(e)
		return e.EncodeAll(body, nil), nil
	default:
		return nil, fmt.Errorf("%w: compression codec %d", ErrInvalidRecord, codec)
	}
}

// lz4Level maps Kafka's compression.lz4.level (1-17, LZ4HC's scale) onto
// pierrec/lz4's: 1 the fast compressor, higher the HC levels up to 9.
func lz4Level(level int) lz4.CompressionLevel {
	if level <= 1 {
		return lz4.Fast
	}
	return lz4.CompressionLevel(1 << (8 + min(level, 9)))
}
