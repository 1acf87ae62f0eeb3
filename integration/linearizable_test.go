package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The KV register check: clients put, read and compare-and-set a few KV
// keys through random nodes (POST /api/v1/kv, so reads go through raft
// too) while the nemesis works, and porcupine decides whether some order
// of the operations, each taking effect between its call and its answer,
// explains every answer.

// regState is one key's value and version (0: never written).
type regState struct {
	value   int
	version int64
}

type regInput struct {
	kind   string // get, put, cas
	key    string
	value  int
	expect int64 // cas: the version the key must have
}

type regOutput struct {
	unknown bool // timed out or dropped: it may or may not have happened
	applied bool // put, cas
	found   bool // get
	value   int
	version int64
}

// registerModel is a versioned register per key, the way the KV store
// versions rows: every applied write counts the version up by one.
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(regInput).key
			if byKey[k] == nil {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return regState{} },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(regState), input.(regInput), output.(regOutput)
		next := regState{value: in.value, version: st.version + 1}
		switch in.kind {
		case "get":
			return out.found == (st.version > 0) && out.value == st.value && out.version == st.version, st
		case "put":
			return out.unknown || (out.applied && out.version == next.version), next
		default: // cas
			if st.version != in.expect {
				return out.unknown || (!out.applied && out.version == st.version), st
			}
			return out.unknown || (out.applied && out.version == next.version), next
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		return fmt.Sprintf("%s %s %d/%d -> %+v", in.kind, in.key, in.value, in.expect, out)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%+v", state.(regState)) },
}

// registerHistory records register operations with monotonic times.
type registerHistory struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
	infos int
}

func (h *registerHistory) now() int64 { return int64(time.Since(h.start)) }

// registerClient is one client of the register check. It moves to a
// fresh key every second: linearizability is checked per key, and an
// unknown write stays open until the end of its key's history, so short
// histories keep porcupine's search small without weakening the check.
type registerClient struct {
	id          int
	h           *registerHistory
	key         string
	lastVersion int64 // the newest version this client saw on key
	// lost: a write of this client on key has an unknown outcome. Like a
	// crashed client in Jepsen, it leaves the key to the others until the
	// next one: each unknown write may take effect at any later point, so
	// a client piling them up on one key (a tight loop of broken
	// connections while nodes die) made porcupine's search run out of time.
	lost bool
}

// step runs one operation through c and records it; a get whose answer
// was lost, or a write the broker certainly refused, changed nothing and
// is left out; an unknown write stays open until the end of the history.
func (rc *registerClient) step(c *cluster, i int) {
	h := rc.h
	key := fmt.Sprintf("reg-%d-%d", rc.id%2, time.Since(h.start)/time.Second)
	if key != rc.key {
		rc.key, rc.lastVersion, rc.lost = key, 0, false
	}
	if rc.lost {
		// Wait for the next key (a fresh one every second).
		time.Sleep(time.Until(h.start.Add((time.Since(h.start)/time.Second + 1) * time.Second)))
		return
	}
	in := regInput{key: key, value: rc.id*1_000_000 + i}
	op := map[string]any{"op": "put", "ns": "lin", "key": key, "value": in.value, "forever": true}
	switch i % 3 {
	case 0:
		in.kind = "get"
		op = map[string]any{"op": "get", "ns": "lin", "key": key}
	case 1:
		in.kind = "put"
	case 2:
		in.kind = "cas"
		in.expect = rc.lastVersion
		op["expect"] = in.expect
	}
	var out struct {
		OK      bool
		Reason  string
		Version int64
		Results []struct {
			Found   *bool
			Applied *bool
			Value   json.RawMessage
			Version int64
		}
	}
	call := h.now()
	status, err := chaosPost(c, "/api/v1/kv", map[string]any{"operations": []any{op}}, &out)
	ret := h.now()
	var res regOutput
	switch {
	case err != nil || status != http.StatusOK:
		if in.kind == "get" || notApplied(err) {
			return // it changed nothing: leave it out
		}
		res.unknown, ret = true, 1<<62
	case !out.OK: // a refused cas
		res.version = out.Version
	default:
		r := out.Results[0]
		res.applied = r.Applied != nil && *r.Applied
		res.found = r.Found != nil && *r.Found
		res.version = r.Version
		if len(r.Value) > 0 {
			res.value, _ = strconv.Atoi(string(r.Value))
		}
	}
	if !res.unknown {
		rc.lastVersion = res.version
	}
	rc.lost = res.unknown
	h.mu.Lock()
	defer h.mu.Unlock()
	if res.unknown {
		h.infos++
	}
	h.ops = append(h.ops, porcupine.Operation{ClientId: rc.id, Input: in, Call: call, Output: res, Return: ret})
}

// casWins counts the compare-and-sets that were answered applied.
func (h *registerHistory) casWins() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, op := range h.ops {
		if op.Input.(regInput).kind == "cas" && op.Output.(regOutput).applied {
			n++
		}
	}
	return n
}

// check runs porcupine; on a violation it writes the visualisation next to
// the test's temp files and names it.
func (h *registerHistory) check(t *testing.T) porcupine.CheckResult {
	h.mu.Lock()
	defer h.mu.Unlock()
	result, info := porcupine.CheckOperationsVerbose(registerModel, h.ops, time.Minute)
	if result != porcupine.Ok {
		path := filepath.Join(os.TempDir(), fmt.Sprintf("waggle-register-%d.html", time.Now().UnixNano()))
		if err := porcupine.VisualizePath(registerModel, info, path); err == nil {
			t.Logf("register history visualised in %s", path)
		}
	}
	return result
}

// The model must catch what the chaos run is meant to find: a stale read
// after an acknowledged write, a lost write, a cas that won twice.
func TestRegisterModelRefusesNonLinearizableHistories(t *testing.T) {
	put := func(client int, v int, call, ret int64, version int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: regInput{kind: "put", key: "k", value: v}, Call: call, Output: regOutput{applied: true, version: version}, Return: ret}
	}
	get := func(client int, v int, call, ret int64, version int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: regInput{kind: "get", key: "k"}, Call: call, Output: regOutput{found: version > 0, value: v, version: version}, Return: ret}
	}
	cas := func(client int, v int, expect int64, call, ret int64, applied bool, version int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: regInput{kind: "cas", key: "k", value: v, expect: expect}, Call: call, Output: regOutput{applied: applied, version: version}, Return: ret}
	}
	for name, tc := range map[string]struct {
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		"write then read":          {[]porcupine.Operation{put(0, 1, 0, 10, 1), get(1, 1, 20, 30, 1)}, porcupine.Ok},
		"stale read":               {[]porcupine.Operation{put(0, 1, 0, 10, 1), get(1, 0, 20, 30, 0)}, porcupine.Illegal},
		"concurrent read":          {[]porcupine.Operation{put(0, 1, 0, 30, 1), get(1, 0, 10, 20, 0)}, porcupine.Ok},
		"lost write":               {[]porcupine.Operation{put(0, 1, 0, 10, 1), put(0, 2, 20, 30, 2), get(1, 1, 40, 50, 1)}, porcupine.Illegal},
		"cas won twice":            {[]porcupine.Operation{put(0, 1, 0, 10, 1), cas(1, 2, 1, 20, 40, true, 2), cas(2, 3, 1, 20, 40, true, 2)}, porcupine.Illegal},
		"one cas wins":             {[]porcupine.Operation{put(0, 1, 0, 10, 1), cas(1, 2, 1, 20, 40, true, 2), cas(2, 3, 1, 20, 40, false, 2)}, porcupine.Ok},
		"unknown write may land":   {[]porcupine.Operation{{ClientId: 0, Input: regInput{kind: "put", key: "k", value: 7}, Call: 0, Output: regOutput{unknown: true}, Return: 1 << 62}, get(1, 7, 20, 30, 1)}, porcupine.Ok},
		"unknown write may not":    {[]porcupine.Operation{{ClientId: 0, Input: regInput{kind: "put", key: "k", value: 7}, Call: 0, Output: regOutput{unknown: true}, Return: 1 << 62}, get(1, 0, 20, 30, 0)}, porcupine.Ok},
		"version counted up twice": {[]porcupine.Operation{put(0, 1, 0, 10, 1), put(0, 2, 20, 30, 3)}, porcupine.Illegal},
	} {
		if got := porcupine.CheckOperationsTimeout(registerModel, tc.ops, 10*time.Second); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
}
