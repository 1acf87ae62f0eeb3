// Package recordbatch parses, validates and builds Kafka record batches
// (magic 2, KIP-98): the unit Kafka clients produce and fetch, and the unit
// waggle stores for records that arrive over Kafka. It is a pure codec: no
// I/O beyond decompression.
package recordbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fixed layout of a batch header; every field before Records is fixed width.
const (
	offFirstOffset    = 0  // int64, rewritten by the broker on append
	offLength         = 8  // int32, bytes after this field
	offLeaderEpoch    = 12 // int32, rewritten by the broker
	offMagic          = 16 // int8
	offCRC            = 17 // uint32, CRC-32C of bytes [21:]
	offAttributes     = 21 // int16
	offLastDelta      = 23 // int32
	offFirstTimestamp = 27 // int64
	offMaxTimestamp   = 35 // int64
	offProducerID     = 43 // int64
	offProducerEpoch  = 51 // int16
	offFirstSequence  = 53 // int32
	offNumRecords     = 57 // int32
	// HeaderSize is the size of a batch with no records.
	HeaderSize = 61
)

// Attribute bits.
const (
	codecMask        = 0x07
	timestampTypeBit = 0x08
	transactionalBit = 0x10
	controlBit       = 0x20
)

// Codec is a batch's compression.
type Codec int8

// Compression codecs (attributes bits 0–2).
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Validation errors, for mapping to Kafka error codes.
var (
	// ErrCorrupt is a batch whose framing, CRC or offsets are wrong
	// (Kafka's CORRUPT_MESSAGE).
	ErrCorrupt = errors.New("corrupt record batch")
	// ErrInvalidRecord is a well-formed batch a client may not send: a
	// control batch, or an unknown codec (Kafka's INVALID_RECORD).
	ErrInvalidRecord = errors.New("invalid record batch")
)

// Batch is a validated record batch; Raw aliases the bytes it was parsed from.
type Batch struct {
	Raw            []byte
	Codec          Codec
	NumRecords     int32
	FirstTimestamp int64
	MaxTimestamp   int64
	ProducerID     int64
	ProducerEpoch  int16
	FirstSequence  int32
	Transactional  bool
}

// LastSequence is the sequence number of the batch's last record.
func (b Batch) LastSequence() int32 {
	return int32((int64(b.FirstSequence) + int64(b.NumRecords) - 1) % (1 << 31))
}

// Split cuts a produce request's records field into its batches and
// validates each, in the order Kafka's broker does: framing and length,
// magic, CRC, codec, control bit, offsets.
func Split(records []byte) ([]Batch, error) {
	var out []Batch
	for len(records) > 0 {
		if len(records) < HeaderSize {
			return nil, fmt.Errorf("%w: %d trailing bytes are not a batch", ErrCorrupt, len(records))
		}
		length := int64(int32(binary.BigEndian.Uint32(records[offLength:])))
		if length < HeaderSize-12 || length > int64(len(records)-12) {
			return nil, fmt.Errorf("%w: batch length %d does not fit the %d bytes sent", ErrCorrupt, length, len(records))
		}
		b, err := Parse(records[:12+length])
		if err != nil {
			return nil, err
		}
		out = append(out, b)
		records = records[12+length:]
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no record batch", ErrCorrupt)
	}
	return out, nil
}

// Parse validates one whole batch as a producer sends it.
func Parse(raw []byte) (Batch, error) {
	if len(raw) < HeaderSize {
		return Batch{}, fmt.Errorf("%w: %d bytes is shorter than a batch header", ErrCorrupt, len(raw))
	}
	if got := int64(int32(binary.BigEndian.Uint32(raw[offLength:]))); got != int64(len(raw)-12) {
		return Batch{}, fmt.Errorf("%w: length field %d, batch has %d bytes after it", ErrCorrupt, got, len(raw)-12)
	}
	if raw[offMagic] != 2 {
		return Batch{}, fmt.Errorf("%w: magic %d, only 2 is supported", ErrCorrupt, int8(raw[offMagic]))
	}
	if want, got := binary.BigEndian.Uint32(raw[offCRC:]), crc32Checksum(raw[offAttributes:]); want != got {
		return Batch{}, fmt.Errorf("%w: CRC %08x, computed %08x", ErrCorrupt, want, got)
	}
	attrs := binary.BigEndian.Uint16(raw[offAttributes:])
	b := Batch{
		Raw:            raw,
		Codec:          Codec(attrs & codecMask),
		NumRecords:     int32(binary.BigEndian.Uint32(raw[offNumRecords:])),
		FirstTimestamp: int64(binary.BigEndian.Uint64(raw[offFirstTimestamp:])),
		MaxTimestamp:   int64(binary.BigEndian.Uint64(raw[offMaxTimestamp:])),
		ProducerID:     int64(binary.BigEndian.Uint64(raw[offProducerID:])),
		ProducerEpoch:  int16(binary.BigEndian.Uint16(raw[offProducerEpoch:])),
		FirstSequence:  int32(binary.BigEndian.Uint32(raw[offFirstSequence:])),
		Transactional:  attrs&transactionalBit != 0,
	}
	if b.Codec > CodecZstd {
		return Batch{}, fmt.Errorf("%w: compression codec %d", ErrInvalidRecord, b.Codec)
	}
	if attrs&controlBit != 0 {
		return Batch{}, fmt.Errorf("%w: clients may not send control batches", ErrInvalidRecord)
	}
	if first := int64(binary.BigEndian.Uint64(raw[offFirstOffset:])); first != 0 {
		return Batch{}, fmt.Errorf("%w: first offset %d, producers send 0", ErrCorrupt, first)
	}
	lastDelta := int32(binary.BigEndian.Uint32(raw[offLastDelta:]))
	if b.NumRecords <= 0 || lastDelta != b.NumRecords-1 {
		return Batch{}, fmt.Errorf("%w: %d records with last offset delta %d", ErrCorrupt, b.NumRecords, lastDelta)
	}
	return b, nil
}

// Rebase returns a copy of raw with its first offset set to base and its
// leader epoch to epoch. Neither field is covered by the CRC.
func Rebase(raw []byte, base int64, epoch int32) []byte {
	out := append([]byte(nil), raw...)
	SetBaseAndEpoch(out, base, epoch)
	return out
}

// SetBaseAndEpoch rewrites a batch's first offset and leader epoch in place.
func SetBaseAndEpoch(raw []byte, base int64, epoch int32) {
	binary.BigEndian.PutUint64(raw[offFirstOffset:], uint64(base))
	binary.BigEndian.PutUint32(raw[offLeaderEpoch:], uint32(epoch))
}

// SetBaseOffset rewrites a stored batch's first offset in place.
func SetBaseOffset(raw []byte, base int64) {
	binary.BigEndian.PutUint64(raw[offFirstOffset:], uint64(base))
}

// Record is one decoded record with absolute offset and timestamp.
type Record struct {
	Offset      int64
	TimestampMs int64
	Key         []byte // nil for a null key
	Value       []byte // nil for a null value
	Headers     []kmsg.Header
}

// Records decompresses (at most maxDecompressed bytes) and decodes the
// records of a stored batch whose first offset is base.
func Records(raw []byte, maxDecompressed int) ([]Record, error) {
	if len(raw) < HeaderSize {
		return nil, ErrCorrupt
	}
	attrs := binary.BigEndian.Uint16(raw[offAttributes:])
	base := int64(binary.BigEndian.Uint64(raw[offFirstOffset:]))
	firstTS := int64(binary.BigEndian.Uint64(raw[offFirstTimestamp:]))
	n := int32(binary.BigEndian.Uint32(raw[offNumRecords:]))
	body, err := decompress(Codec(attrs&codecMask), raw[HeaderSize:], maxDecompressed)
	if err != nil {
		return nil, err
	}
	if n < 0 || int(n) > len(body) { // every record takes at least one byte
		return nil, fmt.Errorf("%w: %d records in %d bytes", ErrCorrupt, n, len(body))
	}
	out := make([]Record, 0, n)
	for i := int32(0); i < n; i++ {
		length, w := binary.Varint(body)
		if w <= 0 || length < 0 || length > int64(len(body)-w) {
			return nil, fmt.Errorf("%w: record %d length", ErrCorrupt, i)
		}
		var r kmsg.Record
		if err := r.ReadFrom(body[:w+int(length)]); err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", ErrCorrupt, i, err)
		}
		body = body[w+int(length):]
		out = append(out, Record{
			Offset:      base + int64(r.OffsetDelta),
			TimestampMs: firstTS + r.TimestampDelta64,
			Key:         r.Key,
			Value:       r.Value,
			Headers:     r.Headers,
		})
	}
	return out, nil
}

// Build encodes records as one uncompressed batch at base offset base,
// with timestamps and offsets taken from the records.
func Build(base int64, recs []Record) []byte {
	if len(recs) == 0 {
		return nil
	}
	return build(base, recs, 0, -1, -1)
}

// BuildControl encodes the marker that ends a producer's transaction on a
// partition (KIP-98): a transactional control batch of one record whose
// key is version 0 and type 0 (abort) or 1 (commit) and whose value is
// version 0 and the coordinator epoch (0: waggle has one coordinator).
func BuildControl(base int64, producerID int64, epoch int16, commit bool, timestampMs int64) []byte {
	key := []byte{0, 0, 0, 0}
	if commit {
		key[3] = 1
	}
	value := []byte{0, 0, 0, 0, 0, 0}
	return build(base, []Record{{Offset: base, TimestampMs: timestampMs, Key: key, Value: value}},
		transactionalBit|controlBit, producerID, epoch)
}

// ControlInfo reports whether a stored batch is a transaction marker, and
// which.
func ControlInfo(raw []byte) (control, commit bool) {
	if len(raw) < HeaderSize || binary.BigEndian.Uint16(raw[offAttributes:])&controlBit == 0 {
		return false, false
	}
	recs, err := Records(raw, 1<<10)
	if err != nil || len(recs) != 1 || len(recs[0].Key) < 4 {
		return true, false
	}
	return true, binary.BigEndian.Uint16(recs[0].Key[2:]) == 1
}

// Header is what a stored batch's header says about its producer.
type Header struct {
	ProducerID    int64
	ProducerEpoch int16
	Transactional bool
	Control       bool
}

// ReadHeader reads a stored batch's producer fields; ok is false for bytes
// too short to be a batch.
func ReadHeader(raw []byte) (h Header, ok bool) {
	if len(raw) < HeaderSize {
		return h, false
	}
	attrs := binary.BigEndian.Uint16(raw[offAttributes:])
	return Header{
		ProducerID:    int64(binary.BigEndian.Uint64(raw[offProducerID:])),
		ProducerEpoch: int16(binary.BigEndian.Uint16(raw[offProducerEpoch:])),
		Transactional: attrs&transactionalBit != 0,
		Control:       attrs&controlBit != 0,
	}, true
}

func build(base int64, recs []Record, attrs int16, producerID int64, epoch int16) []byte {
	firstTS, maxTS := recs[0].TimestampMs, recs[0].TimestampMs
	for _, r := range recs {
		maxTS = max(maxTS, r.TimestampMs)
	}
	var body []byte
	for _, r := range recs {
		kr := kmsg.Record{
			TimestampDelta64: r.TimestampMs - firstTS,
			OffsetDelta:      int32(r.Offset - base),
			Key:              r.Key,
			Value:            r.Value,
			Headers:          r.Headers,
		}
		enc := kr.AppendTo(nil) // length 0 varint is one byte
		kr.Length = int32(len(enc) - 1)
		body = kr.AppendTo(body)
	}
	b := kmsg.RecordBatch{
		FirstOffset:          base,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(recs[len(recs)-1].Offset - base),
		FirstTimestamp:       firstTS,
		MaxTimestamp:         maxTS,
		ProducerID:           producerID,
		ProducerEpoch:        epoch,
		FirstSequence:        -1,
		NumRecords:           int32(len(recs)),
		Records:              body,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[offLength:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[offCRC:], crc32Checksum(raw[offAttributes:]))
	return raw
}

func crc32Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// IsControl reports whether a stored batch is a control batch (attributes
// bit 5: transaction markers), which compaction keeps as it is.
func IsControl(raw []byte) bool {
	return len(raw) >= HeaderSize && binary.BigEndian.Uint16(raw[offAttributes:])&controlBit != 0
}

// LastOffsetDelta is a stored batch's last offset delta.
func LastOffsetDelta(raw []byte) int32 {
	return int32(binary.BigEndian.Uint32(raw[offLastDelta:]))
}

// KeyedRecord is what compaction needs of one record: its offset, its key
// (nil for a null key) and whether its value is null (a tombstone).
type KeyedRecord struct {
	Offset    int64
	Key       []byte
	Tombstone bool
}

// Filter decodes a stored batch's records (decompressing at most
// maxDecompressed bytes), asks keep about each in order, and returns the
// batch with only the records kept. The header keeps its first offset,
// last offset delta, timestamps and producer fields, so offsets stay
// where they were (gaps are normal in a compacted log); the records kept
// are copied byte for byte (their deltas are relative to the unchanged
// header), written uncompressed, and the CRC is computed again. When keep
// accepts every record, raw itself is returned with changed false. A batch
// left with no records is returned with a count of 0 (the caller decides
// whether to keep it).
func Filter(raw []byte, maxDecompressed int, keep func(KeyedRecord) bool) (out []byte, kept int, changed bool, err error) {
	if len(raw) < HeaderSize {
		return nil, 0, false, ErrCorrupt
	}
	attrs := binary.BigEndian.Uint16(raw[offAttributes:])
	base := int64(binary.BigEndian.Uint64(raw[offFirstOffset:]))
	n := int32(binary.BigEndian.Uint32(raw[offNumRecords:]))
	body, err := decompress(Codec(attrs&codecMask), raw[HeaderSize:], maxDecompressed)
	if err != nil {
		return nil, 0, false, err
	}
	if n < 0 || int(n) > len(body) {
		return nil, 0, false, fmt.Errorf("%w: %d records in %d bytes", ErrCorrupt, n, len(body))
	}
	var recs []byte
	for i := int32(0); i < n; i++ {
		length, w := binary.Varint(body)
		if w <= 0 || length < 0 || length > int64(len(body)-w) {
			return nil, 0, false, fmt.Errorf("%w: record %d length", ErrCorrupt, i)
		}
		one := body[:w+int(length)]
		body = body[w+int(length):]
		var r kmsg.Record
		if err := r.ReadFrom(one); err != nil {
			return nil, 0, false, fmt.Errorf("%w: record %d: %v", ErrCorrupt, i, err)
		}
		if keep(KeyedRecord{Offset: base + int64(r.OffsetDelta), Key: r.Key, Tombstone: r.Value == nil}) {
			kept++
			recs = append(recs, one...)
		} else {
			changed = true
		}
	}
	if !changed {
		return raw, kept, false, nil
	}
	out = make([]byte, 0, HeaderSize+len(recs))
	out = append(out, raw[:HeaderSize]...)
	out = append(out, recs...)
	binary.BigEndian.PutUint16(out[offAttributes:], attrs&^codecMask)
	binary.BigEndian.PutUint32(out[offNumRecords:], uint32(kept))
	binary.BigEndian.PutUint32(out[offLength:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[offCRC:], crc32Checksum(out[offAttributes:]))
	return out, kept, true, nil
}

// NumRecords is a stored batch's record count.
func NumRecords(raw []byte) int32 {
	return int32(binary.BigEndian.Uint32(raw[offNumRecords:]))
}
