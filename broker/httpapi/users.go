package httpapi

import (
	"net/http"

	"github.com/waggle-mq/waggle/auth"
)

// principalJSON is a user or token as the API shows it: never a secret.
type principalJSON struct {
	Name   string   `json:"name"`
	Role   string   `json:"role"`
	Queues []string `json:"queues"`
	Groups []string `json:"groups"`
}

func toPrincipalJSON(p auth.Principal) principalJSON {
	return principalJSON{Name: p.Name, Role: string(p.Role), Queues: emptyIfNil(p.Queues), Groups: emptyIfNil(p.Groups)}
}

func emptyIfNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// principalBody is a request naming a principal's grants.
type principalBody struct {
	Name     string   `json:"name"`
	Password string   `json:"password"`
	Role     string   `json:"role"`
	Queues   []string `json:"queues"`
	Groups   []string `json:"groups"`
}

func (b principalBody) principal() auth.Principal {
	return auth.Principal{Name: b.Name, Role: auth.Role(b.Role), Queues: b.Queues, Groups: b.Groups}
}

func (s *Server) putUser(w http.ResponseWriter, r *http.Request) {
	var req principalBody
	if !decodeBody(w, r, &req) {
		return
	}
	if err := s.svc.PutUser(req.principal(), req.Password); err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toPrincipalJSON(req.principal()))
}

func (s *Server) deleteUser(w http.ResponseWriter, r *http.Request) {
	s.writeDeleted(w, r.PathValue("name"))(s.svc.DeleteUser(r.PathValue("name")))
}

func (s *Server) listUsers(w http.ResponseWriter, _ *http.Request) {
	s.writePrincipals(w, "users")(s.svc.Users())
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	var req principalBody
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Password != "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "a token has no password")
		return
	}
	token, err := s.svc.CreateToken(req.principal())
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		principalJSON
		Token string `json:"token"`
	}{toPrincipalJSON(req.principal()), token})
}

func (s *Server) deleteToken(w http.ResponseWriter, r *http.Request) {
	s.writeDeleted(w, r.PathValue("name"))(s.svc.DeleteToken(r.PathValue("name")))
}

func (s *Server) listTokens(w http.ResponseWriter, _ *http.Request) {
	s.writePrincipals(w, "tokens")(s.svc.Tokens())
}

// whoami answers the caller's principal (anonymous admin with auth off).
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	p, ok := r.Context().Value(principalKey{}).(auth.Principal)
	if !ok {
		p = auth.Principal{Name: "anonymous", Role: auth.Admin}
	}
	writeJSON(w, http.StatusOK, toPrincipalJSON(p))
}

func (s *Server) writeDeleted(w http.ResponseWriter, name string) func(bool, error) {
	return func(deleted bool, err error) {
		switch {
		case err != nil:
			s.writeBrokerError(w, err)
		case !deleted:
			writeError(w, http.StatusNotFound, "not_found", name+" does not exist")
		default:
			writeJSON(w, http.StatusOK, struct {
				Deleted bool `json:"deleted"`
			}{true})
		}
	}
}

func (s *Server) writePrincipals(w http.ResponseWriter, field string) func([]auth.Principal, error) {
	return func(ps []auth.Principal, err error) {
		if err != nil {
			s.writeBrokerError(w, err)
			return
		}
		out := make([]principalJSON, len(ps))
		for i, p := range ps {
			out[i] = toPrincipalJSON(p)
		}
		writeJSON(w, http.StatusOK, map[string][]principalJSON{field: out})
	}
}
