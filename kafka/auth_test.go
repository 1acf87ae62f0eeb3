package kafka

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
)

func authConfig(allowPlain bool) Config {
	cfg := DefaultConfig()
	cfg.Auth = AuthConfig{Enabled: true, AllowPlain: allowPlain}
	return cfg
}

// TestUnauthenticatedRequestsAreRefused: on a listener with SASL, only
// ApiVersions, SaslHandshake and SaslAuthenticate are served before
// authentication; anything else closes the connection (conn.handle
// returns an error) without reaching the broker.
func TestUnauthenticatedRequestsAreRefused(t *testing.T) {
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group = "g"
	join := joinRequest("g", "")
	for _, tc := range []struct {
		req    kmsg.Request
		served bool
	}{
		{&kmsg.ApiVersionsRequest{Version: 3, ClientSoftwareName: "t", ClientSoftwareVersion: "1"}, true},
		{&kmsg.SASLHandshakeRequest{Version: 1, Mechanism: auth.ScramSHA256}, true},
		{metadataRequest(true, "orders"), false},
		{produceRequest(9, 1, "orders", 0, batch("k")), false},
		{fetchRequest("orders", 0, 0, -1), false},
		{listOffsetsRequest(7, "orders", latestTimestamp, -1, 0), false},
		{commit, false},
		{join, false},
	} {
		name := kmsg.NameForKey(tc.req.Key())
		fb := newFakeBroker()
		c := newTestConn(t, newTestServer(t, fb, authConfig(false)), nil)
		_, err := c.handle(requestBody(tc.req))
		if served := err == nil; served != tc.served {
			t.Errorf("%s: served %v (%v), want %v", name, served, err, tc.served)
		}
		if !tc.served && (err == nil || !strings.Contains(err.Error(), "before SASL authentication")) {
			t.Errorf("%s: error %v", name, err)
		}
		if len(fb.produced) > 0 || len(fb.reads) > 0 {
			t.Errorf("%s reached the broker before authentication", name)
		}
	}
}

// pipeConn serves a connection of s over net.Pipe and returns the
// client's end and the serve loop's result.
func pipeConn(t *testing.T, s *Server) (net.Conn, <-chan error) {
	t.Helper()
	client, server := net.Pipe()
	done := make(chan error, 1)
	go func() {
		c := &conn{s: s, nc: server}
		err := c.serve()
		server.Close() // as Serve does once a connection's loop ends
		done <- err
	}()
	t.Cleanup(func() { client.Close() })
	client.SetDeadline(time.Now().Add(10 * time.Second)) // a hung test fails instead of hanging
	return client, done
}

func writeFrame(c net.Conn, body []byte) error {
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	_, err := c.Write(append(frame, body...))
	return err
}

// readFrame reads one response frame and returns its correlation id.
func readFrame(c net.Conn) (int32, []byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(body)), body[4:], nil
}

// TestAuthenticatedListenerOverAPipe: the connection loop answers
// ApiVersions before authentication, and closes the connection without an
// answer on any other request or on a frame over the pre-authentication
// cap (64 KiB), as docs/KAFKA.md and AuthConfig say.
func TestAuthenticatedListenerOverAPipe(t *testing.T) {
	t.Run("ApiVersions, then Metadata", func(t *testing.T) {
		client, done := pipeConn(t, newTestServer(t, newFakeBroker(), authConfig(false)))
		if err := writeFrame(client, requestBody(&kmsg.ApiVersionsRequest{Version: 0})); err != nil {
			t.Fatal(err)
		}
		corr, body, err := readFrame(client)
		if err != nil || corr != 7 {
			t.Fatalf("ApiVersions answer: correlation %d, %v", corr, err)
		}
		resp := kmsg.ApiVersionsResponse{Version: 0}
		if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != 0 || len(resp.ApiKeys) != len(apis) {
			t.Fatalf("ApiVersions: %v, error %d, %d APIs", err, resp.ErrorCode, len(resp.ApiKeys))
		}
		if err := writeFrame(client, requestBody(metadataRequest(false, "orders"))); err != nil {
			t.Fatal(err)
		}
		if _, _, err := readFrame(client); !errors.Is(err, io.EOF) {
			t.Fatalf("after Metadata before authentication: %v, want the connection closed", err)
		}
		if err := <-done; err == nil || !strings.Contains(err.Error(), "before SASL authentication") {
			t.Fatalf("serve ended with %v", err)
		}
	})
	t.Run("frame over the pre-authentication cap", func(t *testing.T) {
		client, done := pipeConn(t, newTestServer(t, newFakeBroker(), authConfig(false)))
		writeFrame(client, make([]byte, preAuthMaxFrame+1)) // fails once the server hangs up
		if _, _, err := readFrame(client); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("after an oversized frame: %v, want the connection closed", err)
		}
		if err := <-done; !errors.Is(err, errBadFrame) {
			t.Fatalf("serve ended with %v, want %v", err, errBadFrame)
		}
	})
}

// TestProduceAuthorization: with auth on, Produce to a topic the principal
// may not write answers TOPIC_AUTHORIZATION_FAILED, checked before
// leadership, and the broker is never asked.
func TestProduceAuthorization(t *testing.T) {
	for _, tc := range []struct {
		name      string
		principal *auth.Principal
		leaderID  string
		want      int16
	}{
		{"read-only", &auth.Principal{Name: "r", Role: auth.ReadOnly}, "1", kerr.TopicAuthorizationFailed.Code},
		{"read-only on a follower", &auth.Principal{Name: "r", Role: auth.ReadOnly}, "2", kerr.TopicAuthorizationFailed.Code},
		{"write-only", &auth.Principal{Name: "w", Role: auth.WriteOnly}, "1", 0},
		{"read-write, other queues", &auth.Principal{Name: "rw", Role: auth.ReadWrite, Queues: []string{"orders-*"}}, "1", kerr.TopicAuthorizationFailed.Code},
		{"read-write, this queue", &auth.Principal{Name: "rw", Role: auth.ReadWrite, Queues: []string{"ord*"}}, "1", 0},
		{"read-write on a follower", &auth.Principal{Name: "rw", Role: auth.ReadWrite}, "2", kerr.NotLeaderForPartition.Code},
		{"admin", &auth.Principal{Name: "a", Role: auth.Admin}, "1", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := newFakeBroker()
			fb.leaderID = tc.leaderID
			c := newTestConn(t, newTestServer(t, fb, authConfig(false)), tc.principal)
			p := produceOne(t, c, -1, "orders", batch("k"))
			if p.ErrorCode != tc.want {
				t.Fatalf("error %s, want %s", codeName(p.ErrorCode), codeName(tc.want))
			}
			if asked := len(fb.produced) > 0; asked != (tc.want == 0) {
				t.Fatalf("broker asked: %v", asked)
			}
		})
	}
}

// TestReadAuthorization: a principal that may not read a topic gets
// TOPIC_AUTHORIZATION_FAILED from Fetch and ListOffsets without a read, and
// Metadata leaves out the topics it may neither read nor write.
func TestReadAuthorization(t *testing.T) {
	fb := newFakeBroker()
	fb.topics["secret"] = broker.TopicInfo{ID: 9, Name: "secret", Partitions: 1}
	writer := &auth.Principal{Name: "w", Role: auth.WriteOnly, Queues: []string{"orders"}}
	c := newTestConn(t, newTestServer(t, fb, authConfig(false)), writer)

	p := roundTrip(t, c, fetchRequest("orders", 0, 0, -1)).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if p.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(fb.reads) > 0 {
		t.Fatalf("Fetch by a writer: %s, %d reads", codeName(p.ErrorCode), len(fb.reads))
	}
	lp := roundTrip(t, c, listOffsetsRequest(7, "orders", latestTimestamp, -1, 0)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if lp.ErrorCode != kerr.TopicAuthorizationFailed.Code || lp.Offset != -1 {
		t.Fatalf("ListOffsets by a writer: %s at %d", codeName(lp.ErrorCode), lp.Offset)
	}
	all := roundTrip(t, c, &kmsg.MetadataRequest{Version: 12}).(*kmsg.MetadataResponse)
	var names []string
	for _, mt := range all.Topics {
		names = append(names, *mt.Topic)
	}
	if !slices.Equal(names, []string{"orders"}) {
		t.Fatalf("Metadata shows %v to a writer of orders only", names)
	}
	mt := roundTrip(t, c, metadataRequest(true, "secret")).(*kmsg.MetadataResponse).Topics[0]
	if mt.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("Metadata of secret: %s", codeName(mt.ErrorCode))
	}
}

// TestSASLPlain: PLAIN is offered only when allowed; a handshake and a
// correct password authenticate the connection as the user, whose role
// then governs Produce.
func TestSASLPlain(t *testing.T) {
	reader, err := auth.NewUser(auth.Principal{Name: "reader", Role: auth.ReadOnly}, "secret-pw")
	if err != nil {
		t.Fatal(err)
	}
	handshake := func(c *conn, version int16, mechanism string) int16 {
		return roundTrip(t, c, &kmsg.SASLHandshakeRequest{Version: version, Mechanism: mechanism}).(*kmsg.SASLHandshakeResponse).ErrorCode
	}

	fb := newFakeBroker()
	fb.users = map[string]auth.User{"reader": reader}
	if code := handshake(newTestConn(t, newTestServer(t, fb, authConfig(false)), nil), 1, auth.Plain); code != unsupportedSASLMechanism {
		t.Fatalf("PLAIN without TLS or --insecure: code %d, want %d", code, unsupportedSASLMechanism)
	}
	c := newTestConn(t, newTestServer(t, fb, authConfig(true)), nil)
	if code := handshake(c, 0, auth.Plain); code != illegalSASLState {
		t.Fatalf("SaslHandshake v0: code %d, want %d", code, illegalSASLState)
	}
	if code := handshake(c, 1, auth.Plain); code != 0 {
		t.Fatalf("SaslHandshake PLAIN: code %d", code)
	}
	ar := roundTrip(t, c, &kmsg.SASLAuthenticateRequest{Version: 2, SASLAuthBytes: []byte("\x00reader\x00secret-pw")}).(*kmsg.SASLAuthenticateResponse)
	if ar.ErrorCode != 0 || c.principal == nil || c.principal.Name != "reader" || c.closing {
		t.Fatalf("SaslAuthenticate: code %d, principal %+v, closing %v", ar.ErrorCode, c.principal, c.closing)
	}
	if p := produceOne(t, c, 1, "orders", batch("k")); p.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("Produce by a reader: %s", codeName(p.ErrorCode))
	}
	if ar := roundTrip(t, c, &kmsg.SASLAuthenticateRequest{Version: 2}).(*kmsg.SASLAuthenticateResponse); ar.ErrorCode != illegalSASLState || !c.closing {
		t.Fatalf("a second SaslAuthenticate: code %d, closing %v", ar.ErrorCode, c.closing)
	}
}
