package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/waggle-mq/waggle/metrics"
)

// openAPIPath turns a route's path pattern into the document's: the
// dashboard's "/{$}" (the root and nothing below it) is OpenAPI's "/".
func openAPIPath(pattern string) string { return strings.TrimSuffix(pattern, "{$}") }

// The document loads, is a valid OpenAPI 3 document, and describes exactly
// the routes the server registers: each with its method and path.
func TestOpenAPIDocumentMatchesRoutes(t *testing.T) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openAPIDocument)
	if err != nil {
		t.Fatalf("load openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}

	s := New(nil, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{Metrics: metrics.New()})
	served := map[string]bool{}
	for _, route := range s.Routes() {
		method, pattern, _ := strings.Cut(route, " ")
		path := openAPIPath(pattern)
		served[method+" "+path] = true
		item := doc.Paths.Value(path)
		if item == nil || item.GetOperation(method) == nil {
			t.Errorf("route %s is not in openapi.json", route)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if !served[method+" "+path] {
				t.Errorf("openapi.json describes %s %s, which the server does not serve", method, path)
			}
			if op.OperationID == "" {
				t.Errorf("%s %s has no operationId", method, path)
			}
		}
	}
}

// The document is served as JSON without authentication, like /health.
func TestOpenAPIDocumentIsServedPublicly(t *testing.T) {
	s := New(nil, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{Auth: AuthConfig{Enabled: true}})
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/openapi.json", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /api/v1/openapi.json: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("answer is not an OpenAPI 3 document: %q, %v", doc.OpenAPI, err)
	}
}
