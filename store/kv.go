package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
)

// Key families of the KV store and timers (see keys.go for the others):
//
//	familyKV        [0x10] len(ns)(2) ns key                -> KV row (JSON, versioned)
//	familyKVExpiry  [0x11] expiresAtMs(8) kvKey             -> empty
//	familyTimer     [0x12] len(queue)(2) queue timerKey     -> timer (JSON, versioned)
//	familyTimerDue  [0x13] dueAtMs(8) timerKey              -> empty
//
// The two index families are ordered by time first, so expiry and firing
// are prefix scans from the start, in the same order on every replica.
const (
	familyKV       byte = 0x10
	familyKVExpiry byte = 0x11
	familyTimer    byte = 0x12
	familyTimerDue byte = 0x13
)

// KVRow is one KV value. ExpiresAtMs 0 means forever.
type KVRow struct {
	NS          string          `json:"-"`
	Key         string          `json:"-"`
	Value       json.RawMessage `json:"value"`
	Version     int64           `json:"version"`
	ExpiresAtMs int64           `json:"expiresAtMs,omitempty"`
}

// Live reports whether the row still exists at replicated time nowMs.
func (r KVRow) Live(nowMs int64) bool { return r.ExpiresAtMs == 0 || r.ExpiresAtMs > nowMs }

func nsKey(family byte, ns, key string) []byte {
	k := make([]byte, 0, 3+len(ns)+len(key))
	k = append(k, family)
	k = binary.BigEndian.AppendUint16(k, uint16(len(ns)))
	k = append(k, ns...)
	return append(k, key...)
}

func parseNSKey(k []byte) (ns, key string, err error) {
	if len(k) < 3 {
		return "", "", errBadKey
	}
	n := int(binary.BigEndian.Uint16(k[1:]))
	if len(k) < 3+n {
		return "", "", errBadKey
	}
	return string(k[3 : 3+n]), string(k[3+n:]), nil
}

func timeIndexKey(family byte, atMs int64, target []byte) []byte {
	k := make([]byte, 0, 9+len(target))
	k = append(k, family)
	k = binary.BigEndian.AppendUint64(k, uint64(atMs))
	return append(k, target...)
}

// KV returns a row, expired or not (callers judge with Live); found is false
// when there is none.
func (t *Tx) KV(ns, key string) (r KVRow, found bool, err error) {
	b, err := t.get(nsKey(familyKV, ns, key))
	if errors.Is(err, ErrNotFound) {
		return KVRow{NS: ns, Key: key}, false, nil
	}
	if err != nil {
		return r, false, err
	}
	r, err = decodeJSONRecord[KVRow](b)
	r.NS, r.Key = ns, key
	return r, err == nil, err
}

// PutKV writes a row, replacing prev (the row read before, or nil) and
// keeping the expiry index in step.
func (t *Tx) PutKV(r KVRow, prev *KVRow) error {
	k := nsKey(familyKV, r.NS, r.Key)
	if prev != nil && prev.ExpiresAtMs > 0 {
		if err := t.del(timeIndexKey(familyKVExpiry, prev.ExpiresAtMs, k)); err != nil {
			return err
		}
	}
	if r.ExpiresAtMs > 0 {
		if err := t.set(timeIndexKey(familyKVExpiry, r.ExpiresAtMs, k), nil); err != nil {
			return err
		}
	}
	return t.set(k, encodeJSONRecord(r))
}

// DeleteKV removes a row and its expiry index entry.
func (t *Tx) DeleteKV(r KVRow) error {
	k := nsKey(familyKV, r.NS, r.Key)
	if r.ExpiresAtMs > 0 {
		if err := t.del(timeIndexKey(familyKVExpiry, r.ExpiresAtMs, k)); err != nil {
			return err
		}
	}
	return t.del(k)
}

// KVPrefix lists up to limit rows of a namespace whose key starts with
// prefix and sorts after after, in key order (expired ones included).
func (t *Tx) KVPrefix(ns, prefix, after string, limit int) ([]KVRow, error) {
	var out []KVRow
	p := nsKey(familyKV, ns, prefix)
	seek := p
	if after != "" && after >= prefix {
		seek = append(nsKey(familyKV, ns, after), 0)
	}
	err := t.scan(p, seek, func(k, v []byte) (bool, error) {
		ns, key, err := parseNSKey(k)
		if err != nil {
			return false, err
		}
		r, err := decodeJSONRecord[KVRow](v)
		r.NS, r.Key = ns, key
		out = append(out, r)
		return err == nil && len(out) < limit, err
	})
	return out, err
}

// dueIndexKeys returns, oldest first, up to limit keys of a time index
// family (the family byte, a big-endian time, then the indexed key) whose
// time is at or before nowMs.
func (t *Tx) dueIndexKeys(family byte, nowMs int64, limit int) ([][]byte, error) {
	var due [][]byte
	err := t.scan([]byte{family}, nil, func(k, _ []byte) (bool, error) {
		if len(k) < 9 || int64(binary.BigEndian.Uint64(k[1:9])) > nowMs {
			return false, nil
		}
		due = append(due, append([]byte(nil), k...))
		return len(due) < limit, nil
	})
	return due, err
}

// PruneKV removes up to limit rows whose expiry is at or before nowMs,
// oldest first, and reports how many it removed.
func (t *Tx) PruneKV(nowMs int64, limit int) (int, error) {
	due, err := t.dueIndexKeys(familyKVExpiry, nowMs, limit)
	if err != nil {
		return 0, err
	}
	for _, k := range due {
		if err := t.del(k[9:]); err != nil {
			return 0, err
		}
		if err := t.del(k); err != nil {
			return 0, err
		}
	}
	return len(due), nil
}

// Timer is a scheduled push.
type Timer struct {
	Queue     string          `json:"-"`
	Key       string          `json:"-"`
	Partition string          `json:"partition"`
	DueAtMs   int64           `json:"dueAtMs"`
	Txn       string          `json:"txn"`
	Payload   json.RawMessage `json:"payload"`
}

// Timer returns a timer; found is false when there is none.
func (t *Tx) Timer(queue, key string) (tm Timer, found bool, err error) {
	b, err := t.get(nsKey(familyTimer, queue, key))
	if errors.Is(err, ErrNotFound) {
		return Timer{Queue: queue, Key: key}, false, nil
	}
	if err != nil {
		return tm, false, err
	}
	tm, err = decodeJSONRecord[Timer](b)
	tm.Queue, tm.Key = queue, key
	return tm, err == nil, err
}

// PutTimer schedules a timer, replacing prev (or nil) in the due index.
func (t *Tx) PutTimer(tm Timer, prev *Timer) error {
	k := nsKey(familyTimer, tm.Queue, tm.Key)
	if prev != nil {
		if err := t.del(timeIndexKey(familyTimerDue, prev.DueAtMs, k)); err != nil {
			return err
		}
	}
	if err := t.set(timeIndexKey(familyTimerDue, tm.DueAtMs, k), nil); err != nil {
		return err
	}
	return t.set(k, encodeJSONRecord(tm))
}

// DeleteTimer removes a timer and its due index entry.
func (t *Tx) DeleteTimer(tm Timer) error {
	k := nsKey(familyTimer, tm.Queue, tm.Key)
	if err := t.del(timeIndexKey(familyTimerDue, tm.DueAtMs, k)); err != nil {
		return err
	}
	return t.del(k)
}

// Timers lists a queue's timers in key order.
func (t *Tx) Timers(queue string, limit int) ([]Timer, error) {
	var out []Timer
	err := t.scan(nsKey(familyTimer, queue, ""), nil, func(k, v []byte) (bool, error) {
		q, key, err := parseNSKey(k)
		if err != nil {
			return false, err
		}
		tm, err := decodeJSONRecord[Timer](v)
		tm.Queue, tm.Key = q, key
		out = append(out, tm)
		return err == nil && len(out) < limit, err
	})
	return out, err
}

// DueTimers lists up to limit timers due at or before nowMs, earliest first.
func (t *Tx) DueTimers(nowMs int64, limit int) ([]Timer, error) {
	var keys [][]byte
	err := t.scan([]byte{familyTimerDue}, nil, func(k, _ []byte) (bool, error) {
		if len(k) < 9 || int64(binary.BigEndian.Uint64(k[1:9])) > nowMs {
			return false, nil
		}
		keys = append(keys, append([]byte(nil), k[9:]...))
		return len(keys) < limit, nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]Timer, 0, len(keys))
	for _, k := range keys {
		q, key, err := parseNSKey(k)
		if err != nil {
			return nil, err
		}
		tm, found, err := t.Timer(q, key)
		if err != nil {
			return nil, err
		}
		if found {
			out = append(out, tm)
		}
	}
	return out, nil
}
