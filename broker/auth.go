package broker

import (
	"encoding/json"
	"fmt"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// Users and tokens live in the replicated KV store, in namespaces clients
// cannot touch (reservedNSPrefix): a user under "u/<name>", a token under
// "t/<sha256 of the token>" with its name under "n/<name>" so it can be
// deleted by name. Writes are one KV entry each, so a user or token
// appears or goes whole.
const (
	reservedNSPrefix = "__waggle"
	authNS           = reservedNSPrefix + ".auth"
)

// Token is a stored HTTP token: its principal, never the token itself.
type Token struct {
	auth.Principal
	Hash string `json:"hash"`
}

// PutUser creates or replaces a SASL user. The leader derives the salted
// credentials here; the entry carries them, so every replica stores the
// same bytes.
func (s *Service) PutUser(p auth.Principal, password string) error {
	if err := checkPrincipal(p); err != nil {
		return err
	}
	if password == "" {
		return fmt.Errorf("%w: password is empty", ErrInvalid)
	}
	u, err := auth.NewUser(p, password)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	v, _ := json.Marshal(u)
	_, err = s.applyKV([]command.KVOp{{Op: command.KVPut, NS: authNS, Key: "u/" + p.Name, Value: v, Forever: true}})
	return err
}

// DeleteUser removes a SASL user; false when there was none.
func (s *Service) DeleteUser(name string) (bool, error) {
	res, err := s.applyKV([]command.KVOp{{Op: command.KVDelete, NS: authNS, Key: "u/" + name}})
	if err != nil {
		return false, err
	}
	return res.Results[0].Applied, nil
}

// User reads a SASL user from this node's store.
func (s *Service) User(name string) (auth.User, bool, error) {
	var u auth.User
	found, err := s.authRow("u/"+name, &u)
	return u, found, err
}

// Users lists the SASL users (principals only, no credentials).
func (s *Service) Users() ([]auth.Principal, error) {
	var out []auth.Principal
	err := s.authRows("u/", func(raw []byte) error {
		var u auth.User
		err := json.Unmarshal(raw, &u)
		out = append(out, u.Principal)
		return err
	})
	return out, err
}

// CreateToken makes a bearer token for p and returns it; only its hash is
// stored, so this is the one time it is shown. A token of the same name is
// replaced.
func (s *Service) CreateToken(p auth.Principal) (string, error) {
	if err := checkPrincipal(p); err != nil {
		return "", err
	}
	token := auth.NewToken()
	hash := auth.HashToken(token)
	rec, _ := json.Marshal(Token{Principal: p, Hash: hash})
	ops := []command.KVOp{
		{Op: command.KVPut, NS: authNS, Key: "t/" + hash, Value: rec, Forever: true},
		{Op: command.KVPut, NS: authNS, Key: "n/" + p.Name, Value: rec, Forever: true},
	}
	if old, found, err := s.tokenByName(p.Name); err == nil && found {
		ops = append(ops, command.KVOp{Op: command.KVDelete, NS: authNS, Key: "t/" + old.Hash})
	}
	_, err := s.applyKV(ops)
	return token, err
}

// DeleteToken revokes the token named name; false when there was none.
func (s *Service) DeleteToken(name string) (bool, error) {
	t, found, err := s.tokenByName(name)
	if err != nil || !found {
		return false, err
	}
	_, err = s.applyKV([]command.KVOp{
		{Op: command.KVDelete, NS: authNS, Key: "t/" + t.Hash},
		{Op: command.KVDelete, NS: authNS, Key: "n/" + name},
	})
	return err == nil, err
}

// Tokens lists the tokens' principals.
func (s *Service) Tokens() ([]auth.Principal, error) {
	var out []auth.Principal
	err := s.authRows("n/", func(raw []byte) error {
		var t Token
		err := json.Unmarshal(raw, &t)
		out = append(out, t.Principal)
		return err
	})
	return out, err
}

// TokenPrincipal looks a bearer token up.
func (s *Service) TokenPrincipal(token string) (auth.Principal, bool, error) {
	var t Token
	hash := auth.HashToken(token)
	found, err := s.authRow("t/"+hash, &t)
	if err != nil || !found || !auth.SameHash(t.Hash, hash) {
		return auth.Principal{}, false, err
	}
	return t.Principal, true, nil
}

func (s *Service) tokenByName(name string) (Token, bool, error) {
	var t Token
	found, err := s.authRow("n/"+name, &t)
	return t, found, err
}

func (s *Service) authRow(key string, out any) (bool, error) {
	var found bool
	err := s.store.View(func(tx *store.Tx) error {
		r, ok, err := tx.KV(authNS, key)
		if err != nil || !ok {
			return err
		}
		found = true
		return json.Unmarshal(r.Value, out)
	})
	return found, err
}

func (s *Service) authRows(prefix string, each func(raw []byte) error) error {
	return s.store.View(func(tx *store.Tx) error {
		rows, err := tx.KVPrefix(authNS, prefix, "", 1<<30)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if err := each(r.Value); err != nil {
				return err
			}
		}
		return nil
	})
}

func checkPrincipal(p auth.Principal) error {
	if p.Name == "" || len(p.Name) > 255 {
		return fmt.Errorf("%w: name must be 1 to 255 bytes", ErrInvalid)
	}
	if _, err := auth.ParseRole(string(p.Role)); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := auth.ValidatePatterns(append(append([]string(nil), p.Queues...), p.Groups...)); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}
