// Package payload makes benchmark payloads. They are random by default,
// each one fresh, so that neither badger's block compression nor a
// client's batch compression flatters a figure (repeated payloads once hid
// a 3x gap and a 9 GB memory peak); compressible ones are there to measure
// compression itself.
package payload

import (
	"encoding/binary"
	"math/rand/v2"
)

// jsonSafe is the printable ASCII a JSON string holds without escapes:
// 93 symbols, so a random JSON payload carries 6.5 bits per byte.
var jsonSafe = func() []byte {
	var out []byte
	for c := byte(' '); c <= '~'; c++ {
		if c != '"' && c != '\\' {
			out = append(out, c)
		}
	}
	return out
}()

// Source makes payloads; it is not safe for concurrent use (give each
// goroutine its own).
type Source struct {
	rng          *rand.ChaCha8
	compressible bool
}

// New returns a source seeded with seed; compressible makes every payload
// the same repeated byte.
func New(seed uint64, compressible bool) *Source {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	return &Source{rng: rand.NewChaCha8(s), compressible: compressible}
}

// Bytes returns n bytes: random, or 'x' repeated.
func (s *Source) Bytes(n int) []byte {
	b := make([]byte, n)
	if s.compressible {
		for i := range b {
			b[i] = 'x'
		}
		return b
	}
	s.rng.Read(b)
	return b
}

// JSON returns a JSON string document of n bytes (at least 2), quotes
// included: random printable characters, or 'x' repeated.
func (s *Source) JSON(n int) []byte {
	b := s.Bytes(max(n, 2))
	if !s.compressible {
		for i := range b {
			b[i] = jsonSafe[int(b[i])%len(jsonSafe)]
		}
	}
	b[0], b[len(b)-1] = '"', '"'
	return b
}
