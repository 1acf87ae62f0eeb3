package fsm

import (
	"encoding/json"
	"testing"

	"github.com/waggle-mq/waggle/command"
)

func kvCmd(now int64, ops ...command.KVOp) []byte {
	c := command.KVCommand{NowMs: now, Ops: ops}
	return c.Encode()
}

func i64(v int64) *int64 { return &v }

func TestKVOperations(t *testing.T) {
	f := newFSM(t)
	v := json.RawMessage(`"v"`)
	answers := f.ApplyBatch(logs(1,
		kvCmd(1000,
			command.KVOp{Op: command.KVPut, NS: "n", Key: "a", Value: v, Forever: true},
			command.KVOp{Op: command.KVPutIfAbsent, NS: "n", Key: "a", Value: v, Forever: true},
			command.KVOp{Op: command.KVPut, NS: "n", Key: "a", Value: v, Forever: true, Expect: i64(5)},
			command.KVOp{Op: command.KVPut, NS: "n", Key: "a", Value: v, Forever: true, Expect: i64(1)},
			command.KVOp{Op: command.KVIncr, NS: "n", Key: "c", TTLSeconds: 10},
			command.KVOp{Op: command.KVIncr, NS: "n", Key: "c", TTLSeconds: 10, Value: json.RawMessage("5"), Max: i64(5)},
			command.KVOp{Op: command.KVDelete, NS: "n", Key: "missing"},
			command.KVOp{Op: command.KVCheck, NS: "n", Key: "missing", Expect: i64(0)},
			command.KVOp{Op: command.KVGetMany, NS: "n", Keys: []string{"a", "c", "missing"}},
		),
		kvCmd(1000+10_000, command.KVOp{Op: command.KVGet, NS: "n", Key: "c"}), // the ttl of c has passed
		kvCmd(1000+10_001,
			command.KVOp{Op: command.KVPut, NS: "n", Key: "b", Value: v, Forever: true},
			command.KVOp{Op: command.KVPutIfAbsent, NS: "n", Key: "a", Value: v, Forever: true, Required: true},
		),
		kvCmd(1000+10_002, command.KVOp{Op: command.KVGetPrefix, NS: "n", Prefix: ""}),
	))
	r := answers[0].(command.KVCallResult).Results
	want := []struct {
		applied bool
		reason  string
		version int64
	}{{true, "", 1}, {false, command.KVExists, 1}, {false, command.KVVersion, 1}, {true, "", 2}, {true, "", 1}, {false, command.KVLimit, 1}, {false, command.KVAbsent, 0}, {true, "", 0}}
	for i, w := range want {
		if r[i].Applied != w.applied || r[i].Reason != w.reason || r[i].Version != w.version {
			t.Fatalf("op %d (%s): %+v, want applied %v reason %q version %d", i, r[i].Op, r[i], w.applied, w.reason, w.version)
		}
	}
	if rows := r[8].Rows; len(rows) != 3 || !rows[0].Found || string(rows[1].Value) != "1" || rows[2].Found {
		t.Fatalf("getMany: %+v", rows)
	}
	if got := answers[1].(command.KVCallResult).Results[0]; got.Found {
		t.Fatalf("a row read after its TTL: %+v", got)
	}
	abort := answers[2].(command.KVCallResult).Abort
	if abort == nil || abort.FailedIndex != 1 || abort.KVReason != command.KVExists || abort.Version != 2 {
		t.Fatalf("required loss: %+v", abort)
	}
	prefix := answers[3].(command.KVCallResult).Results[0].Rows
	if len(prefix) != 1 || prefix[0].Key != "a" {
		t.Fatalf("getPrefix after an aborted call and an expiry: %+v (b must not exist, c expired)", prefix)
	}
	// A tick prunes the expired row.
	if got := f.ApplyBatch(logs(5, (&command.TickCommand{NowMs: 20_000, Limit: 10}).Encode()))[0].(command.TickResult); got.PrunedKV != 1 {
		t.Fatalf("tick pruned %d rows, want 1", got.PrunedKV)
	}
}
