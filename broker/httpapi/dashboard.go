package httpapi

import (
	_ "embed"
	"net/http"
)

// dashboardPage is the built-in dashboard: plain HTML and JavaScript that
// polls the API, served from the binary with no build step.
//
//go:embed web/index.html
var dashboardPage []byte

func (s *Server) dashboard(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(dashboardPage)
}
