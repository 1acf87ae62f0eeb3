package node

import (
	"crypto/tls"
	"net/http"
	"time"
)

// nodeClient is how a node calls the HTTP API itself (to register its
// addresses) and the other nodes' (their /health, forwarded writes): over
// TLS with its certificate when it has one, else with the bootstrap token
// when auth is on.
func nodeClient(tlsConf *tls.Config, token string) *http.Client {
	var rt http.RoundTripper = &http.Transport{TLSClientConfig: tlsConf}
	if tlsConf == nil && token != "" {
		rt = bearer{token: token, next: rt}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: rt}
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
