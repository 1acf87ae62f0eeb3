package recordbatch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// xerialHeader starts snappy data framed the way the Java client (and
// librdkafka, for compatibility) writes it: a magic, two version ints,
// then length-prefixed raw snappy blocks.
var xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

var zstdDecoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		panic(err) // only fails on bad options
	}
	return d
}}

// decompress returns the records section of a batch uncompressed, refusing
// output larger than limit so a tiny compressed batch cannot make the
// broker allocate without bound.
func decompress(codec Codec, src []byte, limit int) ([]byte, error) {
	switch codec {
	case CodecNone:
		return src, nil
	case CodecGzip:
		zr, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrCorrupt, err)
		}
		return readCapped(zr, limit, "gzip")
	case CodecSnappy:
		if bytes.HasPrefix(src, xerialHeader) {
			return unxerial(src, limit)
		}
		return unsnappy(src, limit)
	case CodecLZ4:
		return readCapped(lz4.NewReader(bytes.NewReader(src)), limit, "lz4")
	case CodecZstd:
		d := zstdDecoders.Get().(*zstd.Decoder)
		defer zstdDecoders.Put(d)
		if err := d.Reset(bytes.NewReader(src)); err != nil {
			return nil, fmt.Errorf("%w: zstd: %v", ErrCorrupt, err)
		}
		return readCapped(d, limit, "zstd")
	default:
		return nil, fmt.Errorf("%w: compression codec %d", ErrInvalidRecord, codec)
	}
}

func readCapped(r io.Reader, limit int, name string) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, name, err)
	}
	if len(out) > limit {
		return nil, fmt.Errorf("%w: %s batch decompresses to more than %d bytes", ErrCorrupt, name, limit)
	}
	return out, nil
}

func unsnappy(src []byte, limit int) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrCorrupt, err)
	}
	if n > limit {
		return nil, fmt.Errorf("%w: snappy batch decompresses to %d bytes, more than %d", ErrCorrupt, n, limit)
	}
	out, err := s2.Decode(nil, src)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrCorrupt, err)
	}
	return out, nil
}

func unxerial(src []byte, limit int) ([]byte, error) {
	src = src[len(xerialHeader)+8:] // skip the two version ints
	var out []byte
	for len(src) > 0 {
		if len(src) < 4 {
			return nil, fmt.Errorf("%w: xerial snappy chunk length", ErrCorrupt)
		}
		n := binary.BigEndian.Uint32(src)
		if uint64(n) > uint64(len(src)-4) {
			return nil, fmt.Errorf("%w: xerial snappy chunk of %d bytes", ErrCorrupt, n)
		}
		chunk, err := unsnappy(src[4:4+n], limit-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, chunk...)
		src = src[4+n:]
	}
	return out, nil
}
