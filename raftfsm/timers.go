package raftfsm

import (
	"crypto/sha256"
	"encoding/json"
	"strconv"

	"github.com/waggle-mq/waggle/store"
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

func applyTimer(tx *store.Tx, now int64, op TimerOp) TimerResult {
	prev, found, err := tx.Timer(op.Queue, op.TimerKey)
	must(err)
	if op.Op == TimerCancel {
		if !found {
			return TimerResult{OK: true, Status: "absent"}
		}
		must(tx.DeleteTimer(prev))
		return TimerResult{OK: true, Status: "cancelled"}
	}
	tm := store.Timer{Queue: op.Queue, Key: op.TimerKey, Partition: op.Partition, DueAtMs: now + op.DelayMs, Txn: op.Txn, Payload: op.Payload}
	status := "scheduled"
	var replaced *store.Timer
	if found {
		status, replaced = "rescheduled", &prev
	}
	must(tx.PutTimer(tm, replaced))
	return TimerResult{OK: true, Status: status, DeliverAtMs: tm.DueAtMs}
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

func (p *Processor) tick(tx *store.Tx, meta *store.Meta, c *TickCommand) TickResult {
	limit := min(max(c.Limit, 1), MaxPruneLimit)
	pruned, err := tx.PruneKV(meta.ClockMs, limit)
	must(err)
	due, err := tx.DueTimers(meta.ClockMs, limit)
	must(err)
	fired := withinBytes(due, maxFiredBytes)
	more := len(fired) < len(due)
	due = fired
	if len(due) == 0 {
		return TickResult{PrunedKV: pruned}
	}
	items := make([]PushItem, len(due))
	for i, tm := range due {
		must(tx.DeleteTimer(tm))
		items[i] = PushItem{Queue: tm.Queue, Partition: tm.Partition, TransactionID: tm.Txn, MessageID: timerMessageID(tm), Payload: tm.Payload}
		if items[i].Partition == "" {
			items[i].Partition = "Default"
		}
		if items[i].TransactionID == "" {
			items[i].TransactionID = "timer:" + tm.Queue + ":" + tm.Key
		}
		if len(items[i].Payload) == 0 {
			items[i].Payload = json.RawMessage("null")
		}
	}
	p.push(tx, meta, &PushCommand{NowMs: meta.ClockMs, Items: items})
	return TickResult{PrunedKV: pruned, Fired: len(due), More: more}
}

// timerMessageID derives a fired timer's message id from the timer, the
// same on every replica (the state machine mints nothing random).
func timerMessageID(tm store.Timer) [16]byte {
	var id [16]byte
	sum := sha256.Sum256([]byte(tm.Queue + "\x00" + tm.Key + "\x00" + tm.Txn + "\x00" + strconv.FormatInt(tm.DueAtMs, 10)))
	copy(id[:], sum[:16])
	id[6] = id[6]&0x0f | 0x80 // UUID version 8 (custom), RFC 9562
	id[8] = id[8]&0x3f | 0x80
	return id
}

// maxFiredBytes bounds what one tick pushes of due timers' payloads and
// ids; the rest fire in the next tick.
const maxFiredBytes = 2 << 20

// withinBytes is the longest prefix of due (at least one) whose pushed
// messages, with their dedup records, stay within max bytes.
func withinBytes(due []store.Timer, max int) []store.Timer {
	total := 0
	for i, tm := range due {
		total += len(tm.Payload) + 3*len(tm.Txn) + len(tm.Queue) + len(tm.Key) + 2*len(tm.Partition) + 256
		if i > 0 && total > max {
			return due[:i]
		}
	}
	return due
}
