package httpapi

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// bodySeeds are well-formed bodies of each request type, and a few that
// are not, for the mutations below to start from.
var bodySeeds = []string{
	`{"items":[{"queue":"q","partition":"p1","transactionId":"t-1","payload":{"a":[1,2.5e3,"x\u00e9",null,true]}},{"queue":"q","transactionId":"t-2","payload":"deadbeef"}]}`,
	`{"operations":[{"type":"ack","transactionId":"t","partitionId":"2","leaseId":"l"},{"type":"push","items":[{"queue":"q","payload":1}]}],"kv":[{"op":"put","ns":"n","key":"k","value":{"v":1},"forever":true}]}`,
	`{"operations":[{"op":"getMany","ns":"n","keys":["a","b"]}]}`,
	`{"acknowledgments":[{"transactionId":"t","status":"completed"}],"consumerGroup":"g"}`,
	`{"Items":[{"QUEUE":"q","payload":[]}]} `,
	`{"items":[{"queue":"q","transactionId":"a\"b\\c\u0000","payload": { "spaced" : [ 1 , 2 ] } }]}`,
	`{"items":[{"queue":"q","payload":1e999}]}`,
	`{"items":[{"queue":1}]}`, `{"items":[{"queue":"q","bogus":1}]}`, `{"items":[]} {}`, ` `,
	`{"queue":"q","options":{"dedupWindowSeconds":0,"leaseTime":30,"retryLimit":3,"deadLetterQueue":true,"delayedProcessing":5,"partitions":2,"retentionSeconds":-1}}`,
}

// mutate changes a body in a few random places, favouring the bytes that
// matter to JSON's grammar.
func mutate(r *rand.Rand, b []byte) []byte {
	const alphabet = "{}[]\":,\\ 0123456789.eE+-truefalsnlqu\t"
	b = bytes.Clone(b)
	for range 1 + r.IntN(3) {
		i := r.IntN(len(b) + 1)
		c := alphabet[r.IntN(len(alphabet))]
		switch r.IntN(3) {
		case 0:
			b = append(b[:i], append([]byte{c}, b[i:]...)...)
		case 1:
			if i < len(b) {
				b = append(b[:i], b[i+1:]...)
			}
		default:
			if i < len(b) {
				b[i] = c
			}
		}
	}
	return b
}

// parseBody's fast path accepts exactly the bodies encoding/json accepts,
// decoded to the same values (a refusal is encoding/json's own). Bodies
// are random mutations of well-formed ones (fixed seed).
func TestParseBodyKeepsEncodingJSONRules(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	accepted, refused := 0, 0
	// Nesting just within encoding/json's limit and just past it, then
	// the seeds, then their mutations.
	nested := func(depth int) string {
		return `{"items":[{"queue":"q","payload":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}]}`
	}
	bodies := []string{nested(9998), nested(10001)}
	for i := range 40_000 {
		body := []byte(bodySeeds[i%len(bodySeeds)])
		if i < len(bodies) {
			body = []byte(bodies[i])
		} else if i >= len(bodySeeds) {
			body = mutate(r, body)
		}
		for _, target := range bodyTargets {
			got, want := target(), target()
			gerr, werr := parseBody(body, got), strictDecode(body, want)
			if (gerr == nil) != (werr == nil) {
				t.Fatalf("body %q: parseBody says %v, encoding/json %v", body, gerr, werr)
			}
			if werr != nil {
				refused++
				continue
			}
			accepted++
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Fatalf("body %q decoded to %s, encoding/json to %s", body, g, w)
			}
		}
	}
	if accepted < 1000 || refused < 1000 {
		t.Fatalf("the mutations gave %d accepted and %d refused decodes: too few of one kind to compare", accepted, refused)
	}
}
