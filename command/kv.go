package command

import (
	"encoding/json"
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
