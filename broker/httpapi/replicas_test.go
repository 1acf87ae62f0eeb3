package httpapi

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestCompareReplicas(t *testing.T) {
	d := func(since uint64, applied uint64, digest string, recent ...digestPointJSON) *digestJSON {
		return &digestJSON{Since: since, Applied: digestPointJSON{applied, digest}, Recent: recent}
	}
	p := func(index uint64, digest string) digestPointJSON { return digestPointJSON{index, digest} }
	member := func(id string, dg *digestJSON) memberJSON {
		return memberJSON{ID: json.Number(id), State: "up", StateDigest: dg}
	}
	for _, tc := range []struct {
		name    string
		members []memberJSON
		state   string
		index   uint64
		nodes   []json.Number
	}{
		{"same at the highest shared index", []memberJSON{
			member("1", d(0, 900, "c", p(512, "a"), p(768, "b"))),
			member("2", d(0, 800, "x", p(512, "a"), p(768, "b"))),
			member("3", d(0, 768, "b")),
		}, "same", 768, []json.Number{"1", "2", "3"}},
		{"diverged at the lowest index two differ", []memberJSON{
			member("1", d(0, 900, "c", p(512, "a"), p(768, "b"))),
			member("2", d(0, 900, "z", p(512, "y"), p(768, "w"))),
		}, "diverged", 512, []json.Number{"1", "2"}},
		{"an unreachable member is left out", []memberJSON{
			member("1", d(0, 900, "c")),
			member("2", d(0, 900, "c")),
			{ID: "3", State: "unreachable"},
		}, "same", 900, []json.Number{"1", "2"}},
		{"no shared index yet", []memberJSON{
			member("1", d(0, 900, "c")),
			member("2", d(0, 901, "e")),
		}, "unknown", 0, nil},
		{"two chains (a rolling upgrade) are not compared", []memberJSON{
			member("1", d(0, 900, "c")),
			member("2", d(650, 900, "e")),
		}, "unknown", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := compareReplicas(tc.members)
			if len(got) != 1 || got[0].Group != 0 || got[0].State != tc.state {
				t.Fatalf("got %+v, want group 0 %s", got, tc.state)
			}
			if tc.index != 0 && (got[0].Index == nil || *got[0].Index != tc.index) || tc.index == 0 && got[0].Index != nil {
				t.Fatalf("index %v, want %d", got[0].Index, tc.index)
			}
			if !slices.Equal(got[0].Members, tc.nodes) && len(tc.nodes)+len(got[0].Members) > 0 {
				t.Fatalf("members %v, want %v", got[0].Members, tc.nodes)
			}
		})
	}
}
