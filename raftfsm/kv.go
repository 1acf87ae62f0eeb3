package raftfsm

import (
	"encoding/json"
	"strconv"

	"github.com/waggle-mq/waggle/store"
)

// KV operations, evaluated in order inside the state machine. Writes see
// the writes made earlier in the same call (or transaction); getPrefix
// reads the state before the call.
const (
	KVGet         = "get"
	KVGetMany     = "getMany"
	KVGetPrefix   = "getPrefix"
	KVPut         = "put"
	KVPutIfAbsent = "putIfAbsent"
	KVDelete      = "delete"
	KVIncr        = "incr"
	KVCheck       = "check"
)

// KV refusal reasons.
const (
	KVExists  = "exists"
	KVAbsent  = "absent"
	KVVersion = "version"
	KVLimit   = "limit"
)

// KVOp is one KV operation. Writes carry TTLSeconds > 0 or Forever.
type KVOp struct {
	Op         string          `json:"op"`
	NS         string          `json:"ns"`
	Key        string          `json:"key,omitempty"`
	Keys       []string        `json:"keys,omitempty"`
	Prefix     string          `json:"prefix,omitempty"`
	After      string          `json:"after,omitempty"`
	Limit      int             `json:"limit,omitempty"`
	Value      json.RawMessage `json:"value,omitempty"`
	TTLSeconds int64           `json:"ttlSeconds,omitempty"`
	Forever    bool            `json:"forever,omitempty"`
	Expect     *int64          `json:"expect,omitempty"` // version precondition; 0: must be absent
	Max        *int64          `json:"max,omitempty"`    // incr: refuse past this value
	Required   bool            `json:"required,omitempty"`
}

// IsWrite reports whether the op changes state.
func (o KVOp) IsWrite() bool {
	switch o.Op {
	case KVPut, KVPutIfAbsent, KVDelete, KVIncr:
		return true
	}
	return false
}

// KVRowResult is one row as read.
type KVRowResult struct {
	Key         string          `json:"key"`
	Found       bool            `json:"found"`
	Value       json.RawMessage `json:"value,omitempty"`
	Version     int64           `json:"version"`
	ExpiresAtMs int64           `json:"expiresAtMs,omitempty"`
}

// KVResult answers one op: reads fill the row fields (or Rows), writes and
// checks Applied, with Reason and the current Version/Value when refused.
type KVResult struct {
	Op          string          `json:"op"`
	Found       bool            `json:"found"`
	Applied     bool            `json:"applied"`
	Reason      string          `json:"reason,omitempty"`
	Value       json.RawMessage `json:"value,omitempty"`
	Version     int64           `json:"version"`
	ExpiresAtMs int64           `json:"expiresAtMs,omitempty"`
	Rows        []KVRowResult   `json:"rows,omitempty"`
}

// KVAbort says why a call (or transaction) rolled back on a required op.
type KVAbort struct {
	FailedIndex int
	KVReason    string
	Version     int64
	Value       json.RawMessage
}

// kvOverlay evaluates ops against the store plus the call's own earlier
// writes, and writes the outcome at the end (only if the call commits).
type kvOverlay struct {
	tx    *store.Tx
	now   int64
	rows  map[string]*kvEntry
	order []*kvEntry // first-use order, for deterministic writes
}

type kvEntry struct {
	row      store.KVRow
	original store.KVRow // as stored before the call, for the expiry index
	stored   bool        // a row was stored before the call (maybe expired)
	exists   bool        // the row exists (and lives) now
	dirty    bool
}

func newKVOverlay(tx *store.Tx, now int64) *kvOverlay {
	return &kvOverlay{tx: tx, now: now, rows: map[string]*kvEntry{}}
}

func (o *kvOverlay) load(ns, key string) *kvEntry {
	id := strconv.Itoa(len(ns)) + ":" + ns + key
	if e := o.rows[id]; e != nil {
		return e
	}
	r, found, err := o.tx.KV(ns, key)
	must(err)
	e := &kvEntry{row: r, original: r, stored: found, exists: found && r.Live(o.now)}
	if !e.exists {
		e.row = store.KVRow{NS: ns, Key: key}
	}
	o.rows[id] = e
	o.order = append(o.order, e)
	return e
}

func (o *kvOverlay) expiry(op KVOp) int64 {
	if op.Forever {
		return 0
	}
	return o.now + op.TTLSeconds*1000
}

// apply evaluates one op; refused reports a precondition that did not hold.
func (o *kvOverlay) apply(op KVOp) (res KVResult, refused bool) {
	res.Op = op.Op
	switch op.Op {
	case KVGetMany:
		for _, k := range op.Keys {
			e := o.load(op.NS, k)
			res.Rows = append(res.Rows, rowResult(k, e))
		}
		return res, false
	case KVGetPrefix:
		limit := op.Limit
		if limit <= 0 || limit > 1000 {
			limit = 1000
		}
		rows, err := o.tx.KVPrefix(op.NS, op.Prefix, op.After, limit)
		must(err)
		for _, r := range rows {
			if r.Live(o.now) {
				res.Rows = append(res.Rows, KVRowResult{Key: r.Key, Found: true, Value: r.Value, Version: r.Version, ExpiresAtMs: r.ExpiresAtMs})
			}
		}
		return res, false
	}

	e := o.load(op.NS, op.Key)
	current := func(reason string) (KVResult, bool) {
		res.Reason, res.Found = reason, e.exists
		if e.exists {
			res.Value, res.Version, res.ExpiresAtMs = e.row.Value, e.row.Version, e.row.ExpiresAtMs
		}
		return res, true
	}
	version := int64(0)
	if e.exists {
		version = e.row.Version
	}
	if op.Expect != nil && *op.Expect != version {
		if *op.Expect == 0 {
			return current(KVExists)
		}
		if version == 0 {
			return current(KVAbsent)
		}
		return current(KVVersion)
	}
	switch op.Op {
	case KVGet:
		r := rowResult(op.Key, e)
		res.Found, res.Value, res.Version, res.ExpiresAtMs = r.Found, r.Value, r.Version, r.ExpiresAtMs
		return res, false
	case KVCheck:
		if op.Expect == nil && !e.exists {
			return current(KVAbsent)
		}
		res.Applied, res.Found, res.Version = true, e.exists, version
		return res, false
	case KVPutIfAbsent:
		if e.exists {
			return current(KVExists)
		}
		e.write(op.Value, o.expiry(op))
	case KVPut:
		e.write(op.Value, o.expiry(op))
	case KVDelete:
		if !e.exists {
			return current(KVAbsent)
		}
		e.exists, e.dirty = false, true
		res.Applied, res.Version = true, version
		return res, false
	case KVIncr:
		cur, delta := int64(0), int64(1)
		if e.exists && json.Unmarshal(e.row.Value, &cur) != nil {
			return current(KVLimit) // not a whole number: cannot be incremented
		}
		if len(op.Value) > 0 && json.Unmarshal(op.Value, &delta) != nil {
			return current(KVLimit)
		}
		next := cur + delta
		if op.Max != nil && next > *op.Max {
			return current(KVLimit)
		}
		e.write(json.RawMessage(strconv.FormatInt(next, 10)), o.expiry(op))
	}
	res.Applied, res.Found, res.Value, res.Version, res.ExpiresAtMs = true, true, e.row.Value, e.row.Version, e.row.ExpiresAtMs
	return res, false
}

func (e *kvEntry) write(value json.RawMessage, expiresAtMs int64) {
	version := int64(1)
	if e.exists {
		version = e.row.Version + 1
	} else if e.stored {
		version = e.original.Version + 1 // an expired row's successor still counts up
	}
	if len(value) == 0 {
		value = json.RawMessage("null")
	}
	e.row = store.KVRow{NS: e.row.NS, Key: e.row.Key, Value: value, Version: version, ExpiresAtMs: expiresAtMs}
	e.exists, e.dirty = true, true
}

func rowResult(key string, e *kvEntry) KVRowResult {
	if !e.exists {
		return KVRowResult{Key: key}
	}
	return KVRowResult{Key: key, Found: true, Value: e.row.Value, Version: e.row.Version, ExpiresAtMs: e.row.ExpiresAtMs}
}

// flush writes the call's changes.
func (o *kvOverlay) flush() {
	for _, e := range o.order {
		if !e.dirty {
			continue
		}
		var prev *store.KVRow
		if e.stored {
			prev = &e.original
		}
		switch {
		case e.exists:
			must(o.tx.PutKV(e.row, prev))
		case e.stored:
			must(o.tx.DeleteKV(e.original))
		}
	}
}

// evalKV runs ops in order; a refused required op aborts (nothing written).
func evalKV(o *kvOverlay, ops []KVOp) ([]KVResult, *KVAbort) {
	out := make([]KVResult, len(ops))
	for i, op := range ops {
		res, refused := o.apply(op)
		if refused && op.Required {
			return nil, &KVAbort{FailedIndex: i, KVReason: res.Reason, Version: res.Version, Value: res.Value}
		}
		out[i] = res
	}
	return out, nil
}

// KVCommand is a KV call: ops applied in order, whole or (on a refused
// required op) not at all.
type KVCommand struct {
	NowMs int64  `json:"now"`
	Ops   []KVOp `json:"ops"`
}

// KVCallResult answers a KVCommand.
type KVCallResult struct {
	Results []KVResult
	Abort   *KVAbort
}

func (p *Processor) kvCall(tx *store.Tx, meta *store.Meta, c *KVCommand) KVCallResult {
	o := newKVOverlay(tx, meta.ClockMs)
	results, abort := evalKV(o, c.Ops)
	if abort != nil {
		return KVCallResult{Abort: abort}
	}
	o.flush()
	return KVCallResult{Results: results}
}
