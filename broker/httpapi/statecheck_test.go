package httpapi

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestCompareChecks(t *testing.T) {
	done := func(index uint64, hash string) *checkJSON {
		return &checkJSON{Last: &checkResultJSON{Index: index, Hash: hash}}
	}
	failed := func(index uint64, why string) *checkJSON {
		return &checkJSON{Last: &checkResultJSON{Index: index, Error: why}}
	}
	waiting := func(index uint64, last *checkJSON) *checkJSON {
		c := &checkJSON{Pending: ptr(index)}
		if last != nil {
			c.Last = last.Last
		}
		return c
	}
	member := func(id string, c *checkJSON) memberJSON {
		return memberJSON{ID: json.Number(id), State: "up", StateCheck: c}
	}
	for _, tc := range []struct {
		name    string
		members []memberJSON
		state   string
		index   uint64
		nodes   []json.Number
	}{
		{"same", []memberJSON{member("2", done(90, "aa")), member("1", done(90, "aa")), {ID: "3", State: "unreachable"}},
			"same", 90, []json.Number{"1", "2"}},
		{"diverged", []memberJSON{member("1", done(90, "aa")), member("2", done(90, "aa")), member("3", done(90, "bb"))},
			"diverged", 90, []json.Number{"1", "3"}},
		{"failed outranks diverged", []memberJSON{member("1", done(90, "aa")), member("2", failed(90, "read error")), member("3", done(90, "bb"))},
			"failed", 90, []json.Number{"2"}},
		{"a member holding only an older check: incomplete", []memberJSON{member("1", done(90, "aa")), member("2", waiting(120, done(90, "aa"))), member("3", done(120, "cc"))},
			"incomplete", 120, []json.Number{}},
		{"pending", []memberJSON{member("1", waiting(120, nil)), member("2", done(120, "cc"))},
			"pending", 120, []json.Number{}},
	} {
		got := compareChecks(tc.members)
		if len(got) != 1 || got[0].State != tc.state || got[0].Index != tc.index || !slices.Equal(got[0].Members, tc.nodes) {
			t.Errorf("%s: %+v, want %s at %d by %v", tc.name, got, tc.state, tc.index, tc.nodes)
		}
	}
	// A group no member has checked is not listed; the list is empty,
	// not null.
	if got := compareChecks([]memberJSON{member("1", nil)}); got == nil || len(got) != 0 {
		t.Errorf("nothing checked: %#v", got)
	}
}
