package auth

import (
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/golang-jwt/jwt/v5"
)

// JWTVerifier accepts JSON Web Tokens signed with one configured key:
// HS256 with a shared secret, or RS256 / EdDSA with a public key. Only
// that key's algorithm is accepted (never "none", never an HMAC made with
// a public key); exp and nbf are checked, and aud when an audience is set.
// The principal is the sub claim, with the role, queues and groups claims.
type JWTVerifier struct {
	key      any
	method   string
	audience string
}

// jwtClaims are the claims waggle reads.
type jwtClaims struct {
	jwt.RegisteredClaims
	Role   string   `json:"role"`
	Queues []string `json:"queues,omitempty"`
	Groups []string `json:"groups,omitempty"`
}

// NewHS256Verifier verifies HS256 tokens made with secret.
func NewHS256Verifier(secret []byte, audience string) (*JWTVerifier, error) {
	if len(secret) < 32 {
		return nil, errors.New("an HS256 secret must be at least 32 bytes")
	}
	return &JWTVerifier{key: secret, method: "HS256", audience: audience}, nil
}

// NewPublicKeyVerifier verifies RS256 or EdDSA tokens with the PEM public
// key in path (the key's type picks the algorithm).
func NewPublicKeyVerifier(path, audience string) (*JWTVerifier, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		return nil, fmt.Errorf("%s holds no PEM block", path)
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch key.(type) {
	case *rsa.PublicKey:
		return &JWTVerifier{key: key, method: "RS256", audience: audience}, nil
	case ed25519.PublicKey:
		return &JWTVerifier{key: key, method: "EdDSA", audience: audience}, nil
	}
	return nil, fmt.Errorf("%s: a %T key is neither RSA nor Ed25519", path, key)
}

// Verify checks a token and returns its principal.
func (v *JWTVerifier) Verify(token string) (Principal, error) {
	opts := []jwt.ParserOption{jwt.WithValidMethods([]string{v.method}), jwt.WithExpirationRequired()}
	if v.audience != "" {
		opts = append(opts, jwt.WithAudience(v.audience))
	}
	var c jwtClaims
	if _, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return v.key, nil }, opts...); err != nil {
		return Principal{}, fmt.Errorf("JWT refused: %w", err)
	}
	role, err := ParseRole(c.Role)
	if err != nil {
		return Principal{}, fmt.Errorf("JWT refused: %w", err)
	}
	if c.Subject == "" {
		return Principal{}, errors.New("JWT refused: no sub claim")
	}
	if err := ValidatePatterns(append(append([]string(nil), c.Queues...), c.Groups...)); err != nil {
		return Principal{}, fmt.Errorf("JWT refused: %w", err)
	}
	return Principal{Name: "jwt:" + c.Subject, Role: role, Queues: c.Queues, Groups: c.Groups}, nil
}
