package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/dedup"
	"github.com/waggle-mq/waggle/store"
)

// KV limits.
const (
	MaxKVOps        = 1000
	maxKVKeyBytes   = 512
	maxKVNSBytes    = 255
	maxKVValueBytes = 64 << 10
	maxTTLSeconds   = 10 * 365 * 24 * 3600
)

func validateKVOp(i int, op command.KVOp) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("kv[%d]: %w: %s", i, ErrInvalid, fmt.Sprintf(format, a...))
	}
	switch op.Op {
	case command.KVGet, command.KVGetMany, command.KVGetPrefix, command.KVPut, command.KVPutIfAbsent,
		command.KVDelete, command.KVIncr, command.KVCheck:
	default:
		return bad("op %q is not one of get, getMany, getPrefix, put, putIfAbsent, delete, incr, check", op.Op)
	}
	if op.NS == "" || len(op.NS) > maxKVNSBytes {
		return bad("ns must be 1 to %d bytes", maxKVNSBytes)
	}
	if strings.HasPrefix(op.NS, reservedNSPrefix) {
		return bad("namespaces starting with %q are waggle's own", reservedNSPrefix)
	}
	keys := op.Keys
	if op.Op == command.KVGetMany {
		if len(keys) == 0 || len(keys) > MaxKVOps {
			return bad("getMany takes 1 to %d keys", MaxKVOps)
		}
	} else if op.Op != command.KVGetPrefix {
		keys = []string{op.Key}
	}
	for _, k := range keys {
		if k == "" || len(k) > maxKVKeyBytes {
			return bad("key must be 1 to %d bytes", maxKVKeyBytes)
		}
	}
	if len(op.Value) > maxKVValueBytes {
		return fmt.Errorf("kv[%d]: %w: value larger than %d bytes", i, ErrTooLarge, maxKVValueBytes)
	}
	if op.IsWrite() && op.Op != command.KVDelete {
		if !op.Forever && op.TTLSeconds <= 0 {
			return fmt.Errorf("kv[%d] (%s %s/%s): %w", i, op.Op, op.NS, op.Key, ErrKVExpiry)
		}
		if op.Forever && op.TTLSeconds != 0 {
			return bad("give ttlSeconds or forever, not both")
		}
		if op.TTLSeconds > maxTTLSeconds {
			return bad("ttlSeconds at most %d", maxTTLSeconds)
		}
	}
	if (op.Op == command.KVPut || op.Op == command.KVPutIfAbsent) && len(op.Value) == 0 {
		return bad("%s needs a value", op.Op)
	}
	return nil
}

func validateKVOps(ops []command.KVOp) error {
	if len(ops) > MaxKVOps {
		return fmt.Errorf("%w: at most %d KV operations", ErrInvalid, MaxKVOps)
	}
	for i, op := range ops {
		if err := validateKVOp(i, op); err != nil {
			return err
		}
	}
	return nil
}

// KV applies ops in order in one raft entry; a refused required op aborts
// the call and nothing is written.
func (s *Service) KV(ctx context.Context, ops []command.KVOp) (command.KVCallResult, error) {
	if len(ops) == 0 {
		return command.KVCallResult{}, fmt.Errorf("%w: operations is empty", ErrInvalid)
	}
	if err := validateKVOps(ops); err != nil {
		return command.KVCallResult{}, err
	}
	if addsKV(ops) {
		if err := s.admitGrowth(); err != nil {
			return command.KVCallResult{}, err
		}
	}
	return applyFor(ctx, s, &command.KVCommand{NowMs: s.now().UnixMilli(), Ops: ops})
}

// addsKV reports whether ops may add a row or grow one (a delete or a read
// never does): those are refused while storage is full.
func addsKV(ops []command.KVOp) bool {
	for _, op := range ops {
		switch op.Op {
		case command.KVPut, command.KVPutIfAbsent, command.KVIncr:
			return true
		}
	}
	return false
}

// applyKV applies validated KV ops in one raft entry.
func (s *Service) applyKV(ops []command.KVOp) (command.KVCallResult, error) {
	cmd := command.KVCommand{NowMs: s.now().UnixMilli(), Ops: ops}
	return apply(s, &cmd)
}

// KVGet reads one row from this node's store, judged by the replicated
// clock (never this node's).
func (s *Service) KVGet(ns, key string) (command.KVResult, error) {
	if err := validateKVOp(0, command.KVOp{Op: command.KVGet, NS: ns, Key: key}); err != nil {
		return command.KVResult{}, err
	}
	var out command.KVResult
	err := s.store.View(func(tx *store.Tx) error {
		meta, err := tx.Meta()
		if err != nil {
			return err
		}
		r, found, err := tx.KV(ns, key)
		if err == nil && found && r.Live(meta.ClockMs) {
			out = command.KVResult{Op: command.KVGet, Found: true, Value: r.Value, Version: r.Version, ExpiresAtMs: r.ExpiresAtMs}
		}
		return err
	})
	out.Op = command.KVGet
	return out, err
}

// Once claims a marker: true for the one caller that created it while no
// live marker existed.
func (s *Service) Once(ctx context.Context, ns, key string, ttlSeconds int64, forever bool) (bool, error) {
	res, err := s.KV(ctx, []command.KVOp{{Op: command.KVPutIfAbsent, NS: ns, Key: key, Value: json.RawMessage("true"), TTLSeconds: ttlSeconds, Forever: forever}})
	if err != nil {
		return false, err
	}
	return res.Results[0].Applied, nil
}

// Timers applies timer ops in one raft entry.
func (s *Service) Timers(ctx context.Context, ops []command.TimerOp) ([]command.TimerResult, error) {
	if len(ops) == 0 || len(ops) > MaxKVOps {
		return nil, fmt.Errorf("%w: 1 to %d timer operations", ErrInvalid, MaxKVOps)
	}
	for i := range ops {
		if err := validateTimerOp(i, &ops[i]); err != nil {
			return nil, err
		}
	}
	cmd := command.TimersCommand{NowMs: s.now().UnixMilli(), Ops: ops}
	return applyFor(ctx, s, &cmd)
}

func validateTimerOp(i int, op *command.TimerOp) error {
	bad := func(msg string) error { return fmt.Errorf("timers[%d]: %w: %s", i, ErrInvalid, msg) }
	if err := validateQueueName(op.Queue); err != nil {
		return fmt.Errorf("timers[%d]: %w", i, err)
	}
	if op.TimerKey == "" || len(op.TimerKey) > maxKVKeyBytes {
		return bad(fmt.Sprintf("timerKey must be 1 to %d bytes", maxKVKeyBytes))
	}
	switch op.Op {
	case command.TimerCancel:
		return nil
	case command.TimerSchedule:
	default:
		return bad("op must be schedule or cancel")
	}
	if op.DelayMs < 0 || op.DelayMs > maxTTLSeconds*1000 {
		return bad("delayMs out of range")
	}
	if len(op.Txn) > dedup.MaxIDBytes {
		return bad("txn longer than 65535 bytes")
	}
	part, err := partitionName(op.Partition)
	if err != nil {
		return fmt.Errorf("timers[%d]: %w", i, err)
	}
	op.Partition = part
	if len(op.Payload) > maxKVValueBytes {
		return fmt.Errorf("timers[%d]: %w: payload larger than %d bytes", i, ErrTooLarge, maxKVValueBytes)
	}
	return nil
}

// ListTimers lists a queue's pending timers.
func (s *Service) ListTimers(queue string) ([]store.Timer, error) {
	var out []store.Timer
	err := s.store.View(func(tx *store.Tx) error {
		var err error
		out, err = tx.Timers(queue, 10_000)
		return err
	})
	return out, err
}

// pushOps counts the push operations of a transaction.
func pushOps(ops []command.TxnOp) int {
	n := 0
	for _, op := range ops {
		if op.Type == "push" {
			n++
		}
	}
	return n
}

// TxnOp is one "operations" entry of a transaction: an ack or a push.
type TxnOp struct {
	Type  string // "ack" or "push"
	Group string // for an ack
	Ack   AckRequest
	Items []PushItem
}

// TransactionRequest is a whole transaction.
type TransactionRequest struct {
	Ops    []TxnOp
	KV     []command.KVOp
	Timers []command.TimerOp
}

// TransactionResult answers a transaction, with the minted id.
type TransactionResult struct {
	command.TransactionResult
	TransactionID string
	// Pushed lists, per push op, the results with message ids as text.
	Pushed [][]PushResult
}

// Transaction commits acks, pushes, KV ops and timers in one raft entry,
// whole or not at all.
func (s *Service) Transaction(ctx context.Context, r TransactionRequest) (TransactionResult, error) {
	if len(r.Ops)+len(r.KV)+len(r.Timers) == 0 {
		return TransactionResult{}, fmt.Errorf("%w: an empty transaction", ErrInvalid)
	}
	cmd := command.TransactionCommand{NowMs: s.now().UnixMilli(), TxnID: mintID(ctx, "transaction").String(), KV: r.KV, Timers: r.Timers}
	pushMeta := make([][]PushResult, len(r.Ops))
	items := 0
	for i, op := range r.Ops {
		switch op.Type {
		case "ack":
			group := op.Group
			if group == "" {
				group = DefaultGroup
			}
			if err := validateGroupName(group); err != nil {
				return TransactionResult{}, fmt.Errorf("operations[%d]: %w", i, err)
			}
			pid, err := parsePartitionID(op.Ack.PartitionID)
			if err != nil {
				return TransactionResult{}, fmt.Errorf("operations[%d]: %w", i, err)
			}
			switch op.Ack.Status {
			case "":
				op.Ack.Status = command.AckCompleted
			case command.AckCompleted, command.AckFailed, command.AckRetry, command.AckDLQ:
			default:
				return TransactionResult{}, fmt.Errorf("operations[%d]: %w: status must be completed, failed, retry or dlq", i, ErrInvalid)
			}
			cmd.Ops = append(cmd.Ops, command.TxnOp{Type: "ack", Group: group, Ack: &command.Ack{PartitionID: pid, LeaseID: op.Ack.LeaseID,
				TransactionID: op.Ack.TransactionID, Status: op.Ack.Status, Error: op.Ack.Error}})
		case "push":
			if len(op.Items) == 0 {
				return TransactionResult{}, fmt.Errorf("operations[%d]: %w: a push needs items", i, ErrInvalid)
			}
			stamped, results, err := s.stampItems(ctx, fmt.Sprintf("operations/%d", i), op.Items)
			if err != nil {
				return TransactionResult{}, fmt.Errorf("operations[%d]: %w", i, err)
			}
			for _, res := range results {
				if res.Status == StatusError {
					return TransactionResult{}, fmt.Errorf("operations[%d].items[%d]: %w: %s", i, res.Index, ErrInvalid, res.Error)
				}
			}
			items += len(stamped)
			pushMeta[i] = results
			cmd.Ops = append(cmd.Ops, command.TxnOp{Type: "push", Items: stamped})
		default:
			return TransactionResult{}, fmt.Errorf("operations[%d]: %w: type must be ack or push", i, ErrInvalid)
		}
	}
	if acks := len(cmd.Ops) - pushOps(cmd.Ops); items+acks > MaxPushItems {
		return TransactionResult{}, fmt.Errorf("%w: at most %d pushed items and acks", ErrInvalid, MaxPushItems)
	}
	var all []command.PushItem
	for _, op := range cmd.Ops {
		all = append(all, op.Items...)
	}
	if err := s.checkTargets(all); err != nil {
		return TransactionResult{}, err
	}
	if err := validateKVOps(r.KV); err != nil {
		return TransactionResult{}, err
	}
	if len(cmd.Timers) > MaxKVOps {
		return TransactionResult{}, fmt.Errorf("%w: at most %d timer operations", ErrInvalid, MaxKVOps)
	}
	for i := range cmd.Timers {
		if err := validateTimerOp(i, &cmd.Timers[i]); err != nil {
			return TransactionResult{}, err
		}
	}
	if items > 0 || addsKV(r.KV) {
		if err := s.admitGrowth(); err != nil {
			return TransactionResult{}, err
		}
	}
	answer, err := applyFor(ctx, s, &cmd)
	if err != nil {
		return TransactionResult{}, err
	}
	out := TransactionResult{TransactionResult: answer, TransactionID: cmd.TxnID}
	if out.Success {
		out.Pushed = make([][]PushResult, len(r.Ops))
		for i, op := range out.Ops {
			if op.Push != nil {
				out.Pushed[i] = fillPushResults(pushMeta[i], op.Push)
			}
		}
	}
	return out, nil
}
