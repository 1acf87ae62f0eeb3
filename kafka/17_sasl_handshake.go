package kafka

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
)

// SaslHandshake v0 and v1 are listed (librdkafka looks for v0 to know the
// broker speaks SASL at all), but only v1 is served: after v0 the client
// would send raw SASL bytes outside Kafka's framing, and every client this
// listener serves uses v1 with SaslAuthenticate (KIP-152) when offered.
func init() { register(kmsg.SASLHandshake.Int16(), 0, 1, answerNow(handleSASLHandshake)) }

// Kafka error codes of SASL.
const (
	unsupportedSASLMechanism = 33
	illegalSASLState         = 34
	saslAuthenticationFailed = 58
)

// mechanisms are the SASL mechanisms offered: PLAIN only where passwords
// cannot be read off the wire (TLS) or the operator said --insecure.
func (c *conn) mechanisms() []string {
	if !c.s.cfg.Auth.Enabled {
		return []string{}
	}
	m := []string{auth.ScramSHA512, auth.ScramSHA256}
	if c.s.cfg.Auth.AllowPlain {
		m = append(m, auth.Plain)
	}
	return m
}

func handleSASLHandshake(c *conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = c.mechanisms()
	switch {
	case req.Version == 0:
		resp.ErrorCode = illegalSASLState // see above
	case c.principal != nil || c.mechanism != "":
		resp.ErrorCode = illegalSASLState
	case !slices.Contains(resp.SupportedMechanisms, req.Mechanism):
		resp.ErrorCode = unsupportedSASLMechanism
	default:
		c.mechanism = req.Mechanism
	}
	return resp, nil
}
