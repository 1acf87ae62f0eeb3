package payload

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"testing"
)

func compressedRatio(t *testing.T, b []byte) float64 {
	t.Helper()
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestCompression)
	w.Write(b)
	w.Close()
	return float64(buf.Len()) / float64(len(b))
}

// Random payloads do not compress (raw bytes not at all, JSON strings no
// better than their 6.5 bits per byte); compressible ones do, to almost
// nothing; every JSON payload is a valid JSON string of the asked size.
func TestPayloadsAreRandomUnlessAskedOtherwise(t *testing.T) {
	s := New(1, false)
	var raw, doc []byte
	for range 1000 {
		raw = append(raw, s.Bytes(256)...)
		p := s.JSON(256)
		var v string
		if len(p) != 256 || json.Unmarshal(p, &v) != nil {
			t.Fatalf("JSON payload %q is not a 256-byte JSON string", p)
		}
		doc = append(doc, p...)
	}
	if r := compressedRatio(t, raw); r < 0.99 {
		t.Errorf("random bytes compress to %.2f of their size", r)
	}
	if r := compressedRatio(t, doc); r < 0.8 {
		t.Errorf("random JSON payloads compress to %.2f of their size", r)
	}
	if bytes.Equal(s.Bytes(64), s.Bytes(64)) {
		t.Error("two random payloads are equal")
	}
	c := New(1, true)
	if r := compressedRatio(t, bytes.Repeat(c.JSON(256), 1000)); r > 0.05 {
		t.Errorf("compressible payloads compress only to %.2f", r)
	}
}
