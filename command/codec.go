package command

import (
	"encoding/binary"
	"errors"
)

// errTruncated reports an entry shorter than its fields claim.
var errTruncated = errors.New("command: truncated command")

// encoder appends the primitive fields commands are made of.
type encoder struct{ b []byte }

func (e *encoder) byte(v byte)        { e.b = append(e.b, v) }
func (e *encoder) uvarint(v uint64)   { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)     { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) bytes(p []byte)     { e.uvarint(uint64(len(p))); e.b = append(e.b, p...) }
func (e *encoder) string(s string)    { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) fixed16(p [16]byte) { e.b = append(e.b, p[:]...) }

// bool writes v as a byte, 1 or 0.
func (e *encoder) bool(v bool) {
	if v {
		e.byte(1)
	} else {
		e.byte(0)
	}
}
func (e *encoder) fixed32(p [32]byte) { e.b = append(e.b, p[:]...) }

// decoder reads what encoder wrote. The first error sticks and later reads
// return zero values, so a command is decoded straight through and checked
// once at the end.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() { d.err, d.b = errTruncated, nil }

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes returns a slice of the entry itself, not a copy.
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// optionalBytes is bytes that reads an empty field as nil, as JSON's
// omitempty did for the same field in log format 1.
func (d *decoder) optionalBytes() []byte {
	if v := d.bytes(); len(v) > 0 {
		return v
	}
	return nil
}

func (d *decoder) string() string { return string(d.bytes()) }

// fixed reads n bytes (nil, failing, when fewer are left).
func (d *decoder) fixed(n int) []byte {
	if len(d.b) < n {
		d.fail()
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) fixed16() (v [16]byte) { copy(v[:], d.fixed(16)); return v }
func (d *decoder) fixed32() (v [32]byte) { copy(v[:], d.fixed(32)); return v }

// count reads a length prefix for a list whose elements take at least
// minSize bytes each, refusing one larger than the bytes left could hold.
func (d *decoder) count(minSize int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/minSize) {
		d.fail()
		return 0
	}
	return int(n)
}

// finish reports a decoding error, or trailing bytes nothing read.
// more reports whether bytes are left: fields appended to a command after
// its first release are read only when present.
func (d *decoder) more() bool { return d.err == nil && len(d.b) > 0 }

func (d *decoder) finish() error {
	if d.err == nil && len(d.b) != 0 {
		return errors.New("command: trailing bytes after command")
	}
	return d.err
}
