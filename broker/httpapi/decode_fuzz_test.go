package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzDecodeBodies: any body decodes into each request type or is answered
// with a 4xx carrying a code; never a panic, never a 5xx.
func FuzzDecodeBodies(f *testing.F) {
	for _, seed := range []string{
		`{"items":[{"queue":"q","transactionId":"t","payload":{"a":1}}]}`,
		`{"operations":[{"type":"ack","transactionId":"t","partitionId":"2","leaseId":"l"},{"type":"push","items":[]}],"kv":[{"op":"put","ns":"n","key":"k","value":1,"forever":true}]}`,
		`{"operations":[{"op":"getMany","ns":"n","keys":["a","b"]}]}`,
		`{"acknowledgments":[{"transactionId":"t","status":"completed"}],"consumerGroup":"g"}`,
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`, `{"items":[{"queue":1e999}]}`, "{\"items\":\"\xff\xfe\"}", ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, target := range bodyTargets {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			if decodeBody(w, r, target()) {
				continue
			}
			if w.Code < 400 || w.Code >= 500 || !bytes.Contains(w.Body.Bytes(), []byte(`"code"`)) {
				t.Fatalf("refused body answered %d %s", w.Code, w.Body.Bytes())
			}
		}
	})
}

// bodyTargets are the request types the body tests decode into.
var bodyTargets = []func() any{
	func() any { return &pushRequest{} },
	func() any {
		return &struct {
			Operations []txnOpJSON   `json:"operations"`
			KV         []kvOpJSON    `json:"kv"`
			Timers     []timerOpJSON `json:"timers"`
		}{}
	},
	func() any {
		return &struct {
			Operations []kvOpJSON `json:"operations"`
		}{}
	},
	func() any {
		return &struct {
			Acknowledgments []ackJSON `json:"acknowledgments"`
			ConsumerGroup   string    `json:"consumerGroup"`
		}{}
	},
	func() any { return &fetchRequest{} },
	func() any { return &configureRequest{} },
}
