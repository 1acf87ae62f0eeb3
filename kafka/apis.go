package kafka

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handler serves one decoded request. It returns a function that yields
// the response: handlers that answer at once return it ready, Produce
// returns one that waits for raft. A nil response with a nil error sends
// nothing back (acks=0 produce); an error closes the connection.
type handler func(c *conn, req kmsg.Request) (reply, error)

// reply waits for and returns a response.
type reply func() (kmsg.Response, error)

// ready wraps a synchronous handler's result.
func ready(resp kmsg.Response, err error) (reply, error) {
	return func() (kmsg.Response, error) { return resp, nil }, err
}

// answerNow adapts a handler that answers at once.
func answerNow(h func(c *conn, req kmsg.Request) (kmsg.Response, error)) handler {
	return func(c *conn, req kmsg.Request) (reply, error) { return ready(h(c, req)) }
}

type api struct {
	key      int16
	min, max int16
	handle   handler
}

// apis is every API the listener serves, filled by register calls in the
// files named after each API. ApiVersions answers from it.
var apis = map[int16]api{}

// register adds an API; each file registers its own, once.
func register(key, minVersion, maxVersion int16, h handler) {
	if _, dup := apis[key]; dup {
		panic(fmt.Sprintf("kafka: API key %d registered twice", key))
	}
	if req := kmsg.RequestForKey(key); req == nil || req.MaxVersion() < maxVersion {
		panic(fmt.Sprintf("kafka: kmsg cannot encode API key %d at version %d", key, maxVersion))
	}
	apis[key] = api{key: key, min: minVersion, max: maxVersion, handle: h}
}

// supportedAPIs lists the registered APIs in key order.
func supportedAPIs() []api {
	out := make([]api, 0, len(apis))
	for _, a := range apis {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}
