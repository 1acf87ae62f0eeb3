package command

import (
	"encoding/json"
)

// Timer operations.
const (
	TimerSchedule = "schedule"
	TimerCancel   = "cancel"
)

// TimerOp schedules (upserts by queue and key) or cancels a timer. When due,
// the payload is pushed to the queue through the log with Txn as its
// transactionId, so the queue's dedup window makes a timer fire at most once.
type TimerOp struct {
	Op        string          `json:"op"`
	Queue     string          `json:"queue"`
	TimerKey  string          `json:"timerKey"`
	Partition string          `json:"partition,omitempty"`
	DelayMs   int64           `json:"delayMs,omitempty"`
	Txn       string          `json:"txn,omitempty"`
	Payload   json.RawMessage `json:"payload,omitempty"`
}

// TimerResult answers one TimerOp.
type TimerResult struct {
	OK          bool   `json:"ok"`
	Status      string `json:"status"` // scheduled, rescheduled, cancelled or absent
	DeliverAtMs int64  `json:"deliverAtMs,omitempty"`
}

// TimersCommand applies timer ops.
type TimersCommand struct {
	NowMs int64     `json:"now"`
	Ops   []TimerOp `json:"ops"`
}

// TickCommand is the leader's periodic housekeeping that needs the
// replicated clock: it forgets expired KV rows and fires due timers, up to
// Limit of each.
type TickCommand struct {
	NowMs int64 `json:"now"`
	Limit int   `json:"limit"`
}

// TickResult says how much a tick did; Limit means there may be more.
type TickResult struct {
	PrunedKV int
	Fired    int
	More     bool // due timers were left for the byte bound
}
