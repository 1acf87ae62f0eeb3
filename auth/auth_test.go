package auth

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
)

// clientFinal computes a SCRAM client's final message for serverFirst, as
// RFC 5802 §3 says, with nonce as the r it sends back.
func clientFinal(t *testing.T, password, clientFirstBare, serverFirst, nonce string) (msg, serverSig string) {
	attrs, err := scramAttrs(serverFirst)
	if err != nil {
		t.Fatal(err)
	}
	salt, _ := base64.StdEncoding.DecodeString(attrs["s"])
	stored, server, err := derive(sha256.New, password, salt, scramIterations)
	if err != nil {
		t.Fatal(err)
	}
	withoutProof := "c=biws,r=" + nonce
	auth := clientFirstBare + "," + serverFirst + "," + withoutProof
	sig := mac(sha256.New, stored, auth)
	salted, _ := pbkdf2.Key(sha256.New, password, salt, scramIterations, sha256.Size)
	clientKey := mac(sha256.New, salted, "Client Key")
	proof := make([]byte, len(clientKey))
	for i := range proof {
		proof[i] = clientKey[i] ^ sig[i]
	}
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof), "v=" + base64.StdEncoding.EncodeToString(mac(sha256.New, server, auth))
}

func TestScramExchange(t *testing.T) {
	alice, err := NewUser(Principal{Name: "alice", Role: ReadWrite}, "pencil")
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(name string) (User, bool) { return alice, name == "alice" }
	run := func(name, password string, doubleNonce bool) (string, error) {
		c, _ := NewScramConversation(ScramSHA256, lookup)
		bare := "n=" + name + ",r=cnonce123"
		serverFirst, err := c.Step("n,," + bare)
		if err != nil {
			return "", err
		}
		nonce := strings.TrimPrefix(strings.Split(serverFirst, ",")[0], "r=")
		if doubleNonce {
			nonce = "cnonce123" + nonce // what librdkafka sends
		}
		final, wantSig := clientFinal(t, password, bare, serverFirst, nonce)
		got, err := c.Step(final)
		if err == nil && (got != wantSig || !c.Done()) {
			t.Fatalf("server signature %q, want %q", got, wantSig)
		}
		return got, err
	}
	if _, err := run("alice", "pencil", false); err != nil {
		t.Fatalf("right password: %v", err)
	}
	if _, err := run("alice", "pencil", true); err != nil {
		t.Fatalf("librdkafka's doubled nonce: %v", err)
	}
	if _, err := run("alice", "crayon", false); err == nil {
		t.Fatal("wrong password accepted")
	}
	if _, err := run("bob", "pencil", false); err == nil {
		t.Fatal("unknown user accepted")
	}
	if !alice.CheckPassword("pencil") || alice.CheckPassword("crayon") {
		t.Fatal("PLAIN password check wrong")
	}
}

func TestAllows(t *testing.T) {
	orders := Principal{Name: "o", Role: ReadWrite, Queues: []string{"orders.*"}, Groups: []string{"billing"}}
	reader := Principal{Name: "r", Role: ReadOnly}
	writer := Principal{Name: "w", Role: WriteOnly}
	admin := Principal{Name: "a", Role: Admin}
	for _, c := range []struct {
		p      Principal
		action Action
		kind   Kind
		name   string
		want   bool
	}{
		{orders, Write, Queue, "orders.eu", true},
		{orders, Write, Queue, "payroll", false},
		{orders, Read, Group, "billing", true},
		{orders, Read, Group, "other", false},
		{orders, Manage, Queue, "orders.eu", false},
		{reader, Read, Queue, "x", true},
		{reader, Write, Queue, "x", false},
		{writer, Write, Queue, "x", true},
		{writer, Read, Queue, "x", false},
		{writer, Write, Cluster, "", true},
		{reader, Manage, Cluster, "", false},
		{admin, Manage, Cluster, "", true},
	} {
		if got := c.p.Allows(c.action, c.kind, c.name); got != c.want {
			t.Errorf("%s (%s) action %d kind %d on %q: %v, want %v", c.p.Name, c.p.Role, c.action, c.kind, c.name, got, c.want)
		}
	}
}
