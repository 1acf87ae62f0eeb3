package httpapi

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/waggle-mq/waggle/metrics"
)

// docs/HTTP-API.md gives every route a heading "### `METHOD /path`", and
// names no route the server does not have.
func TestEveryRouteIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/HTTP-API.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "### `") && strings.HasSuffix(line, "`") {
			documented[strings.Trim(strings.TrimPrefix(line, "### "), "`")] = true
		}
	}
	s := New(nil, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{Metrics: metrics.New()})
	served := map[string]bool{}
	for _, r := range s.Routes() {
		served[r] = true
		if !documented[r] {
			t.Errorf("route %s is not in docs/HTTP-API.md", r)
		}
	}
	for r := range documented {
		if !served[r] {
			t.Errorf("docs/HTTP-API.md documents %s, which the server does not serve", r)
		}
	}
}
