package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/waggle-mq/waggle/auth"
)

// AuthConfig turns authentication on for every route but /health, the
// dashboard's page and the API's description (/api/v1/openapi.json).
// Callers present "Authorization: Bearer <token>": a token made by `waggle
// token create`, a JWT when JWT is set, or the bootstrap token. A client
// certificate the cluster's CA signed (other nodes present theirs) is an
// admin.
type AuthConfig struct {
	Enabled bool
	// BootstrapToken, when set, is an admin token given in the node's
	// configuration: the way to create the first users and tokens.
	BootstrapToken string
	// JWT, when set, accepts JSON Web Tokens it verifies.
	JWT *auth.JWTVerifier
}

// permission is what a route needs: an action on a resource, named by a
// path value (param) or, when param is empty, by the request body, which
// the handler checks item by item with s.allow.
type permission struct {
	public bool
	action auth.Action
	kind   auth.Kind
	param  string
}

var public = permission{public: true}

func need(action auth.Action, kind auth.Kind, param string) permission {
	return permission{action: action, kind: kind, param: param}
}

type principalKey struct{}

// authorize answers 401 or 403 for a request perm does not let through,
// and reports whether it may go on; the principal rides in the context.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, perm permission) (*http.Request, bool) {
	if !s.auth.Enabled || perm.public {
		return r, true
	}
	p, err := s.authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="waggle"`)
		writeError(w, http.StatusUnauthorized, "unauthenticated", err.Error())
		return r, false
	}
	name := ""
	if perm.param != "" {
		name = r.PathValue(perm.param)
	}
	acls, host := s.svc.ACLSet(), remoteHost(r)
	if !acls.Allows(&p, host, perm.action, perm.kind, name) && !(perm.param == "" && acls.AllowsSome(&p, host, perm.action, perm.kind)) {
		writeError(w, http.StatusForbidden, "forbidden", "principal "+p.Name+" ("+string(p.Role)+") may not do this")
		return r, false
	}
	return r.WithContext(context.WithValue(r.Context(), principalKey{}, p)), true
}

// remoteHost is the client's IP address, which ACL bindings may name (of
// the connection: a follower forwarding a client's request is the host).
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.String() // as bindings are stored
	}
	return host
}

// allow checks one body-named resource against the request's principal
// and answers 403 when it may not; true means go on.
func (s *Server) allow(w http.ResponseWriter, r *http.Request, action auth.Action, kind auth.Kind, name string) bool {
	p, ok := r.Context().Value(principalKey{}).(auth.Principal)
	if !s.auth.Enabled || !ok || s.svc.ACLSet().Allows(&p, remoteHost(r), action, kind, name) {
		return true
	}
	writeError(w, http.StatusForbidden, "forbidden", "principal "+p.Name+" ("+string(p.Role)+") may not do this on "+name)
	return false
}

// authenticate finds the request's principal.
func (s *Server) authenticate(r *http.Request) (auth.Principal, error) {
	header := r.Header.Get("Authorization")
	// A bearer token wins over a client certificate: a follower forwards a
	// client's request with the client's token over its own connection,
	// and the leader must judge the client, not the follower.
	if header == "" && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		return auth.Principal{Name: "cert:" + r.TLS.VerifiedChains[0][0].Subject.CommonName, Role: auth.Admin}, nil
	}
	scheme, token, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return auth.Principal{}, errors.New("an Authorization: Bearer token is needed")
	}
	if b := s.auth.BootstrapToken; b != "" && subtle.ConstantTimeCompare([]byte(token), []byte(b)) == 1 {
		return auth.Principal{Name: "bootstrap", Role: auth.Admin}, nil
	}
	if strings.Count(token, ".") == 2 {
		if s.auth.JWT == nil {
			return auth.Principal{}, errors.New("JWTs are not accepted here")
		}
		return s.auth.JWT.Verify(token)
	}
	p, found, err := s.svc.TokenPrincipal(token)
	if err != nil || !found {
		return auth.Principal{}, errors.New("unknown token")
	}
	return p, nil
}
