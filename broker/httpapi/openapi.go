package httpapi

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the OpenAPI 3 description of this API, served at
// GET /api/v1/openapi.json. Tests hold it to the route table and to the
// answers of a running server; edit it with the handlers it describes.
//
//go:embed openapi.json
var openAPIDocument []byte

// openAPI serves openAPIDocument. It is public, like /health: it says how
// to call the API, nothing about what a node holds.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIDocument)
}
