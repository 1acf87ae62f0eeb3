package kafka

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// docs/KAFKA.md's table of APIs (its section "APIs served") names every registered API with the
// versions ApiVersions offers, and nothing else.
func TestKafkaDocsListTheRegisteredAPIs(t *testing.T) {
	doc, err := os.ReadFile("../docs/KAFKA.md")
	if err != nil {
		t.Fatal(err)
	}
	norm := func(s string) string {
		return strings.Map(func(r rune) rune {
			if unicode.IsLetter(r) {
				return unicode.ToLower(r)
			}
			return -1
		}, s)
	}
	documented := map[string]string{} // normalized name -> "min–max"
	_, section, _ := strings.Cut(string(doc), "\n## APIs served")
	section, _, _ = strings.Cut(section, "\n## ")
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(line, "| ") || strings.TrimSpace(cells[1]) == "API" || strings.HasPrefix(cells[1], "---") {
			continue
		}
		names := strings.Split(strings.TrimSpace(cells[1]), ", ")
		versions := strings.Split(strings.TrimSuffix(strings.TrimSpace(cells[2]), " each"), ", ")
		for i, n := range names {
			v := versions[0]
			if len(versions) == len(names) {
				v = versions[i]
			}
			documented[norm(n)] = v
		}
	}
	for _, a := range supportedAPIs() {
		want := fmt.Sprintf("%d–%d", a.min, a.max)
		if a.min == a.max {
			want = fmt.Sprint(a.min)
		}
		name := kmsg.NameForKey(a.key)
		if got, ok := documented[norm(name)]; !ok {
			t.Errorf("%s (key %d) is served but not in docs/KAFKA.md", name, a.key)
		} else if got != want {
			t.Errorf("docs/KAFKA.md gives %s versions %s, ApiVersions offers %s", name, got, want)
		}
		delete(documented, norm(name))
	}
	for n := range documented {
		t.Errorf("docs/KAFKA.md lists %q, which is not served", n)
	}
}
