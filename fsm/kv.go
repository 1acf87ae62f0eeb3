package fsm

import (
	"encoding/json"
	"strconv"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

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

func (o *kvOverlay) expiry(op command.KVOp) int64 {
	if op.Forever {
		return 0
	}
	return o.now + op.TTLSeconds*1000
}

// apply evaluates one op; refused reports a precondition that did not hold.
func (o *kvOverlay) apply(op command.KVOp) (res command.KVResult, refused bool) {
	res.Op = op.Op
	switch op.Op {
	case command.KVGetMany:
		for _, k := range op.Keys {
			e := o.load(op.NS, k)
			res.Rows = append(res.Rows, rowResult(k, e))
		}
		return res, false
	case command.KVGetPrefix:
		limit := op.Limit
		if limit <= 0 || limit > 1000 {
			limit = 1000
		}
		rows, err := o.tx.KVPrefix(op.NS, op.Prefix, op.After, limit)
		must(err)
		for _, r := range rows {
			if r.Live(o.now) {
				res.Rows = append(res.Rows, command.KVRowResult{Key: r.Key, Found: true, Value: r.Value, Version: r.Version, ExpiresAtMs: r.ExpiresAtMs})
			}
		}
		return res, false
	}

	e := o.load(op.NS, op.Key)
	current := func(reason string) (command.KVResult, bool) {
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
			return current(command.KVExists)
		}
		if version == 0 {
			return current(command.KVAbsent)
		}
		return current(command.KVVersion)
	}
	switch op.Op {
	case command.KVGet:
		r := rowResult(op.Key, e)
		res.Found, res.Value, res.Version, res.ExpiresAtMs = r.Found, r.Value, r.Version, r.ExpiresAtMs
		return res, false
	case command.KVCheck:
		if op.Expect == nil && !e.exists {
			return current(command.KVAbsent)
		}
		res.Applied, res.Found, res.Version = true, e.exists, version
		return res, false
	case command.KVPutIfAbsent:
		if e.exists {
			return current(command.KVExists)
		}
		e.write(op.Value, o.expiry(op))
	case command.KVPut:
		e.write(op.Value, o.expiry(op))
	case command.KVDelete:
		if !e.exists {
			return current(command.KVAbsent)
		}
		e.exists, e.dirty = false, true
		res.Applied, res.Version = true, version
		return res, false
	case command.KVIncr:
		cur, delta := int64(0), int64(1)
		if e.exists && json.Unmarshal(e.row.Value, &cur) != nil {
			return current(command.KVLimit) // not a whole number: cannot be incremented
		}
		if len(op.Value) > 0 && json.Unmarshal(op.Value, &delta) != nil {
			return current(command.KVLimit)
		}
		next := cur + delta
		if op.Max != nil && next > *op.Max {
			return current(command.KVLimit)
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

func rowResult(key string, e *kvEntry) command.KVRowResult {
	if !e.exists {
		return command.KVRowResult{Key: key}
	}
	return command.KVRowResult{Key: key, Found: true, Value: e.row.Value, Version: e.row.Version, ExpiresAtMs: e.row.ExpiresAtMs}
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
func evalKV(o *kvOverlay, ops []command.KVOp) ([]command.KVResult, *command.KVAbort) {
	out := make([]command.KVResult, len(ops))
	for i, op := range ops {
		res, refused := o.apply(op)
		if refused && op.Required {
			return nil, &command.KVAbort{FailedIndex: i, KVReason: res.Reason, Version: res.Version, Value: res.Value}
		}
		out[i] = res
	}
	return out, nil
}

func (p *Processor) kvCall(tx *store.Tx, meta *store.Meta, c *command.KVCommand) command.KVCallResult {
	o := newKVOverlay(tx, meta.ClockMs)
	results, abort := evalKV(o, c.Ops)
	if abort != nil {
		return command.KVCallResult{Abort: abort}
	}
	o.flush()
	return command.KVCallResult{Results: results}
}
