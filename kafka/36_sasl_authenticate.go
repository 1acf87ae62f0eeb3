package kafka

import (
	"bytes"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
)

func init() { register(kmsg.SASLAuthenticate.Int16(), 0, 2, answerNow(handleSASLAuthenticate)) }

// failedAuthDelay slows password guessing: a failed attempt is answered
// only after it, and the connection is closed.
const failedAuthDelay = time.Second

func handleSASLAuthenticate(c *conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if c.mechanism == "" || c.principal != nil {
		resp.ErrorCode = illegalSASLState
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate must follow SaslHandshake, once")
		c.closing = true
		return resp, nil
	}
	out, err := c.saslStep(req.SASLAuthBytes)
	if err != nil {
		time.Sleep(failedAuthDelay)
		resp.ErrorCode = saslAuthenticationFailed
		resp.ErrorMessage = kmsg.StringPtr("authentication failed") // which part was wrong is not told
		c.s.log.Info("kafka authentication failed", "remote", c.nc.RemoteAddr().String(), "mechanism", c.mechanism, "err", err)
		c.closing = true
		return resp, nil
	}
	resp.SASLAuthBytes = out
	return resp, nil
}

// saslStep takes one client message of the chosen mechanism and returns
// the server's answer; c.principal is set once the exchange succeeds.
func (c *conn) saslStep(msg []byte) ([]byte, error) {
	lookup := func(name string) (auth.User, bool) {
		u, found, err := c.s.svc.User(name)
		return u, found && err == nil
	}
	if c.mechanism == auth.Plain {
		// authzid NUL authcid NUL password (RFC 4616); authzid must be
		// empty or the user itself.
		parts := bytes.Split(msg, []byte{0})
		if len(parts) != 3 || (len(parts[0]) > 0 && !bytes.Equal(parts[0], parts[1])) {
			return nil, errors.New("malformed PLAIN message")
		}
		u, found := lookup(string(parts[1]))
		if !u.CheckPassword(string(parts[2])) || !found {
			return nil, errors.New("unknown user or wrong password")
		}
		c.principal = &u.Principal
		return nil, nil
	}
	if c.scram == nil {
		conv, err := auth.NewScramConversation(c.mechanism, lookup)
		if err != nil {
			return nil, err
		}
		c.scram = conv
	}
	out, err := c.scram.Step(string(msg))
	if err != nil {
		return nil, err
	}
	if c.scram.Done() {
		u := c.scram.User()
		c.principal = &u.Principal
	}
	return []byte(out), nil
}
