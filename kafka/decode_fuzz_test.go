package kafka

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestBody is a frame body (no size prefix) for a request.
func requestBody(req kmsg.Request) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, 7)
	b = binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

// FuzzDecodeRequest: any frame body either decodes to a registered API at
// a registered version or returns an error; never a panic. Seeds: a valid
// request of every registered API at its lowest and highest version.
func FuzzDecodeRequest(f *testing.F) {
	for _, a := range supportedAPIs() {
		for _, v := range []int16{a.min, a.max} {
			req := kmsg.RequestForKey(a.key)
			req.SetVersion(v)
			f.Add(requestBody(req))
		}
	}
	f.Add([]byte{0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, body []byte) {
		h, req, err := decodeRequest(body)
		if err != nil {
			return
		}
		if req.Key() != h.key || req.GetVersion() != h.version {
			t.Fatalf("decoded key %d v%d from a header saying %d v%d", req.Key(), req.GetVersion(), h.key, h.version)
		}
	})
}

func TestDecodeRequestRoundTripsEveryAPI(t *testing.T) {
	for _, a := range supportedAPIs() {
		for v := a.min; v <= a.max; v++ {
			req := kmsg.RequestForKey(a.key)
			req.SetVersion(v)
			h, got, err := decodeRequest(requestBody(req))
			if err != nil || got.Key() != a.key || h.version != v {
				t.Fatalf("API %d v%d: %v", a.key, v, err)
			}
		}
	}
}
