package fsm

import (
	"crypto/sha256"
	"encoding/json"
	"strconv"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

func applyTimer(tx *store.Tx, now int64, op command.TimerOp) command.TimerResult {
	prev, found, err := tx.Timer(op.Queue, op.TimerKey)
	must(err)
	if op.Op == command.TimerCancel {
		if !found {
			return command.TimerResult{OK: true, Status: "absent"}
		}
		must(tx.DeleteTimer(prev))
		return command.TimerResult{OK: true, Status: "cancelled"}
	}
	tm := store.Timer{Queue: op.Queue, Key: op.TimerKey, Partition: op.Partition, DueAtMs: now + op.DelayMs, Txn: op.Txn, Payload: op.Payload}
	status := "scheduled"
	var replaced *store.Timer
	if found {
		status, replaced = "rescheduled", &prev
	}
	must(tx.PutTimer(tm, replaced))
	return command.TimerResult{OK: true, Status: status, DeliverAtMs: tm.DueAtMs}
}

func (p *Processor) tick(tx *store.Tx, meta *store.Meta, c *command.TickCommand) command.TickResult {
	limit := min(max(c.Limit, 1), command.MaxPruneLimit)
	pruned, err := tx.PruneKV(meta.ClockMs, limit)
	must(err)
	due, err := tx.DueTimers(meta.ClockMs, limit)
	must(err)
	fired := withinBytes(due, maxFiredBytes)
	more := len(fired) < len(due)
	due = fired
	if len(due) == 0 {
		return command.TickResult{PrunedKV: pruned}
	}
	items := make([]command.PushItem, len(due))
	for i, tm := range due {
		must(tx.DeleteTimer(tm))
		items[i] = command.PushItem{Queue: tm.Queue, Partition: tm.Partition, TransactionID: tm.Txn, MessageID: timerMessageID(tm), Payload: tm.Payload}
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
	p.push(tx, meta, &command.PushCommand{NowMs: meta.ClockMs, Items: items})
	return command.TickResult{PrunedKV: pruned, Fired: len(due), More: more}
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
