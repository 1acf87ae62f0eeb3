package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// SASL mechanisms the Kafka listener offers.
const (
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	Plain       = "PLAIN"
)

// scramIterations is the PBKDF2 iteration count of new credentials (RFC
// 7677 asks for at least 4,096).
const scramIterations = 8192

// Credential is what is stored for one mechanism: salt, iterations and
// the two derived keys (RFC 5802 §3). The password itself is never stored.
type Credential struct {
	Salt      []byte `json:"salt"`
	Iters     int    `json:"iters"`
	StoredKey []byte `json:"storedKey"`
	ServerKey []byte `json:"serverKey"`
}

// User is a SASL user as stored in the replicated state.
type User struct {
	Principal
	Credentials map[string]Credential `json:"credentials"` // by SCRAM mechanism
}

// hashes maps SCRAM mechanisms to their hash.
var hashes = map[string]func() hash.Hash{ScramSHA256: sha256.New, ScramSHA512: sha512.New}

// derive computes a credential's keys. Like Kafka, the password's UTF-8
// bytes are used as they are (no SASLprep), so credentials made by Kafka's
// tools and by waggle agree.
func derive(h func() hash.Hash, password string, salt []byte, iters int) (storedKey, serverKey []byte, err error) {
	salted, err := pbkdf2.Key(h, password, salt, iters, h().Size())
	if err != nil {
		return nil, nil, err
	}
	clientKey := mac(h, salted, "Client Key")
	sum := h()
	sum.Write(clientKey)
	return sum.Sum(nil), mac(h, salted, "Server Key"), nil
}

func mac(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// NewUser derives salted credentials for both SCRAM mechanisms from a
// password, each with its own random salt.
func NewUser(p Principal, password string) (User, error) {
	u := User{Principal: p, Credentials: map[string]Credential{}}
	for mech, h := range hashes {
		salt := make([]byte, 16)
		if _, err := rand.Read(salt); err != nil {
			return User{}, err
		}
		stored, server, err := derive(h, password, salt, scramIterations)
		if err != nil {
			return User{}, err
		}
		u.Credentials[mech] = Credential{Salt: salt, Iters: scramIterations, StoredKey: stored, ServerKey: server}
	}
	return u, nil
}

// CheckPassword checks a PLAIN password against the stored SCRAM-SHA-256
// credential, in constant time.
func (u User) CheckPassword(password string) bool {
	c, ok := u.Credentials[ScramSHA256]
	if !ok {
		return false
	}
	stored, _, err := derive(sha256.New, password, c.Salt, c.Iters)
	return err == nil && subtle.ConstantTimeCompare(stored, c.StoredKey) == 1
}

// ScramConversation is the server side of one SCRAM exchange (RFC 5802):
// Step takes client-first and answers server-first, then takes
// client-final and answers server-final.
type ScramConversation struct {
	h      func() hash.Hash
	mech   string
	lookup func(name string) (User, bool)

	user            User
	known           bool
	cred            Credential
	gs2Header       string
	clientFirstBare string
	serverFirst     string
	nonce           string
	done            bool
}

// NewScramConversation starts an exchange for mechanism, finding users with
// lookup.
func NewScramConversation(mechanism string, lookup func(name string) (User, bool)) (*ScramConversation, error) {
	h, ok := hashes[mechanism]
	if !ok {
		return nil, fmt.Errorf("mechanism %q is not SCRAM", mechanism)
	}
	return &ScramConversation{h: h, mech: mechanism, lookup: lookup}, nil
}

// Done reports whether the exchange succeeded.
func (c *ScramConversation) Done() bool { return c.done }

// User is the authenticated user once Done.
func (c *ScramConversation) User() User { return c.user }

// Step answers one client message.
func (c *ScramConversation) Step(msg string) (string, error) {
	if c.serverFirst == "" {
		return c.first(msg)
	}
	if c.done {
		return "", errors.New("the SCRAM exchange is over")
	}
	return c.final(msg)
}

func (c *ScramConversation) first(msg string) (string, error) {
	// gs2-header: "n," or "y," (no channel binding), then an optional
	// authzid, then ","; the rest is client-first-message-bare.
	if !strings.HasPrefix(msg, "n,") && !strings.HasPrefix(msg, "y,") {
		return "", errors.New("channel binding is not supported")
	}
	i := strings.IndexByte(msg[2:], ',')
	if i < 0 {
		return "", errors.New("malformed client-first-message")
	}
	authzid := msg[2 : 2+i]
	c.gs2Header, c.clientFirstBare = msg[:3+i], msg[3+i:]
	attrs, err := scramAttrs(c.clientFirstBare)
	if err != nil {
		return "", err
	}
	if _, ok := attrs["m"]; ok {
		return "", errors.New("mandatory SCRAM extensions are not supported")
	}
	name, ok := decodeSASLName(attrs["n"])
	cnonce := attrs["r"]
	if !ok || name == "" || cnonce == "" {
		return "", errors.New("client-first-message lacks a user name or nonce")
	}
	if authzid != "" && authzid != "a="+attrs["n"] {
		return "", errors.New("authorization identity differs from the user")
	}
	c.user, c.known = c.lookup(name)
	c.cred, ok = c.user.Credentials[c.mech]
	c.known = c.known && ok
	if !c.known {
		// Go on with a made-up salt so an unknown user looks like a wrong
		// password: the answer does not tell which names exist.
		c.cred = Credential{Salt: randomBytes(16), Iters: scramIterations}
	}
	c.nonce = cnonce + base64.RawStdEncoding.EncodeToString(randomBytes(18))
	c.serverFirst = "r=" + c.nonce + ",s=" + base64.StdEncoding.EncodeToString(c.cred.Salt) + ",i=" + strconv.Itoa(c.cred.Iters)
	return c.serverFirst, nil
}

func (c *ScramConversation) final(msg string) (string, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return "", errors.New("client-final-message has no proof")
	}
	withoutProof := msg[:i]
	attrs, err := scramAttrs(withoutProof)
	if err != nil {
		return "", err
	}
	if attrs["c"] != base64.StdEncoding.EncodeToString([]byte(c.gs2Header)) {
		return "", errors.New("channel binding data differs from the gs2 header")
	}
	// librdkafka sends its client nonce once more in front of the full
	// nonce; Kafka accepts a nonce that ends with the one it sent, and so
	// do we (the proof below covers the message as it was sent).
	if r := attrs["r"]; !strings.HasSuffix(r, c.nonce) {
		return "", errors.New("nonce differs from the one sent")
	}
	proof, err := base64.StdEncoding.DecodeString(msg[i+3:])
	if err != nil || len(proof) != c.h().Size() {
		return "", errors.New("malformed proof")
	}
	authMessage := c.clientFirstBare + "," + c.serverFirst + "," + withoutProof
	signature := mac(c.h, c.cred.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	for j := range proof {
		clientKey[j] = proof[j] ^ signature[j]
	}
	sum := c.h()
	sum.Write(clientKey)
	if subtle.ConstantTimeCompare(sum.Sum(nil), c.cred.StoredKey) != 1 || !c.known {
		return "", errors.New("unknown user or wrong password")
	}
	c.done = true
	return "v=" + base64.StdEncoding.EncodeToString(mac(c.h, c.cred.ServerKey, authMessage)), nil
}

// scramAttrs splits "a=x,b=y" into its attributes.
func scramAttrs(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || len(k) != 1 {
			return nil, fmt.Errorf("malformed SCRAM attribute %q", part)
		}
		out[k] = v
	}
	return out, nil
}

// decodeSASLName undoes RFC 5802's escaping of ',' and '=' in names.
func decodeSASLName(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("auth: no randomness: %v", err))
	}
	return b
}
