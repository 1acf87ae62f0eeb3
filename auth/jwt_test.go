package auth

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func writePublicKey(t *testing.T, pub crypto.PublicKey) (path string, der []byte) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "key.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	if err := os.WriteFile(path, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, pemBytes
}

// RS256 and EdDSA tokens verify with their public key; a token signed
// with HS256 using the public key as the secret (the classic algorithm
// confusion) and an unsigned one are refused.
func TestPublicKeyJWTs(t *testing.T) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	edPub, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	claims := jwt.MapClaims{"sub": "svc", "role": "read-only", "exp": time.Now().Add(time.Hour).Unix()}
	for name, c := range map[string]struct {
		pub    crypto.PublicKey
		method jwt.SigningMethod
		priv   any
	}{
		"RS256": {&rsaKey.PublicKey, jwt.SigningMethodRS256, rsaKey},
		"EdDSA": {edPub, jwt.SigningMethodEdDSA, edPriv},
	} {
		path, pemBytes := writePublicKey(t, c.pub)
		v, err := NewPublicKeyVerifier(path, "")
		if err != nil {
			t.Fatal(err)
		}
		good, _ := jwt.NewWithClaims(c.method, claims).SignedString(c.priv)
		if p, err := v.Verify(good); err != nil || p.Role != ReadOnly || p.Name != "jwt:svc" {
			t.Errorf("%s: a good token: %+v %v", name, p, err)
		}
		confused, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(pemBytes)
		if _, err := v.Verify(confused); err == nil {
			t.Errorf("%s: an HS256 token keyed with the public key was accepted", name)
		}
		none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, claims).SignedString(jwt.UnsafeAllowNoneSignatureType)
		if _, err := v.Verify(none); err == nil {
			t.Errorf("%s: an unsigned token was accepted", name)
		}
		noExp, _ := jwt.NewWithClaims(c.method, jwt.MapClaims{"sub": "svc", "role": "read-only"}).SignedString(c.priv)
		if _, err := v.Verify(noExp); err == nil {
			t.Errorf("%s: a token without exp was accepted", name)
		}
	}
}
