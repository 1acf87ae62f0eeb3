package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/waggle-mq/waggle/command"
)

func keyed(now int64, key string, body byte, inner []byte) []byte {
	c := command.KeyedCommand{NowMs: now, Key: key, BodyHash: [32]byte{body}, WindowMs: 60_000, Inner: inner}
	return c.Encode()
}

// A keyed incr applied twice under its key counts once and answers the
// same both times; the key with another body is refused and changes
// nothing; once the window has passed the key is free again, and a prune
// forgets the outcome.
func TestKeyedCommandAppliesOncePerKey(t *testing.T) {
	f := newFSM(t)
	incr := func(now int64) []byte {
		return kvCmd(now, command.KVOp{Op: command.KVIncr, NS: "n", Key: "c", Forever: true})
	}
	answers := f.ApplyBatch(logs(1,
		keyed(1000, "req-1", 1, incr(1000)),
		keyed(1001, "req-1", 1, incr(1001)), // the retry
		keyed(1002, "req-1", 2, incr(1002)), // the key reused for another request
		kvCmd(1003, command.KVOp{Op: command.KVGet, NS: "n", Key: "c"}),
	))
	first, again, other := answers[0].(command.KeyedResult), answers[1].(command.KeyedResult), answers[2].(command.KeyedResult)
	if first.Replayed || first.Mismatch || !again.Replayed || !other.Mismatch || other.Answer != nil {
		t.Fatalf("first %+v, retry %+v, other body %+v", first, again, other)
	}
	a, b := first.Answer.(command.KVCallResult), again.Answer.(command.KVCallResult)
	if a.Results[0].Version != 1 || !jsonSame(t, a, b) {
		t.Fatalf("the retry answered %+v, the first %+v", b, a)
	}
	if got := answers[3].(command.KVCallResult).Results[0].Value; string(got) != "1" {
		t.Fatalf("counter after an incr, its retry and a refused reuse: %s, want 1", got)
	}
	// Past the window (60 s of replicated time) the key applies again.
	late := f.ApplyBatch(logs(5, keyed(61_001, "req-1", 2, incr(61_001))))[0].(command.KeyedResult)
	if late.Replayed || late.Mismatch || late.Answer.(command.KVCallResult).Results[0].Version != 2 {
		t.Fatalf("after the window: %+v", late)
	}
	if n := f.ApplyBatch(logs(6, (&command.PruneRequestsCommand{NowMs: 200_000, Limit: 10}).Encode()))[0].(int); n != 2 {
		t.Fatalf("prune removed %d index entries, want 2 (the outcome and the one it replaced)", n)
	}
}

// Every command type's answer survives being recorded as a request's
// outcome: encoded as JSON and read back by its type's answer decoder, it
// is the same answer (a keyed retry gives back exactly the first answer).
func TestEveryAnswerSurvivesItsRecord(t *testing.T) {
	f := newFSM(t)
	_, entries := corpusFor(t, command.MaxLogFormat)
	for i, e := range entries {
		answer := f.ApplyBatch([]*raft.Log{{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: e}})[0]
		cmd, err := command.Unseal(e)
		if err != nil {
			t.Fatal(err)
		}
		typ := command.CommandType(cmd[0])
		if typ == command.CmdKeyed {
			continue // never recorded itself: a keyed entry cannot be keyed
		}
		b, err := json.Marshal(answer)
		if err != nil {
			t.Fatalf("entry %d (type %d): %v", i+1, typ, err)
		}
		back, err := answerDecoders[typ](b)
		if err != nil {
			t.Fatalf("entry %d (type %d): the recorded answer %s does not decode: %v", i+1, typ, b, err)
		}
		if again, _ := json.Marshal(back); !bytes.Equal(again, b) {
			t.Errorf("entry %d (type %d): recorded %s, read back as %s", i+1, typ, b, again)
		}
	}
}

func jsonSame(t *testing.T, a, b any) bool {
	t.Helper()
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// An answer too large to keep (a keyed read of 4.5 MB here) is recorded as
// applied without it: a retry under the key is not applied again and
// learns that much (NotKept), instead of incrementing a second time.
func TestKeyedAnswerTooLargeToKeepIsNotAppliedAgain(t *testing.T) {
	f := newFSM(t)
	value := json.RawMessage(`"` + strings.Repeat("v", 64<<10) + `"`)
	var puts []command.KVOp
	var keys []string
	for i := range 70 {
		k := fmt.Sprint("big-", i)
		puts = append(puts, command.KVOp{Op: command.KVPut, NS: "n", Key: k, Value: value, Forever: true})
		keys = append(keys, k)
	}
	f.ApplyBatch(logs(1, kvCmd(1000, puts...)))
	call := kvCmd(1001, command.KVOp{Op: command.KVIncr, NS: "n", Key: "c", Forever: true}, command.KVOp{Op: command.KVGetMany, NS: "n", Keys: keys})
	first := f.ApplyBatch(logs(2, keyed(1001, "big", 1, call)))[0].(command.KeyedResult)
	again := f.ApplyBatch(logs(3, keyed(1002, "big", 1, call)))[0].(command.KeyedResult)
	if first.NotKept || first.Answer == nil || !again.Replayed || !again.NotKept || again.Answer != nil {
		t.Fatalf("first %v/%v, retry %+v", first.Replayed, first.NotKept, again)
	}
	got := f.ApplyBatch(logs(4, kvCmd(1003, command.KVOp{Op: command.KVGet, NS: "n", Key: "c"})))[0].(command.KVCallResult)
	if string(got.Results[0].Value) != "1" {
		t.Fatalf("counter %s after a keyed incr and its retry, want 1", got.Results[0].Value)
	}
}

// Only the writes the HTTP API keys can be wrapped: not housekeeping, not
// a keyed entry.
func TestKeyedEntryRefusesOtherInnerCommands(t *testing.T) {
	for _, inner := range [][]byte{
		(&command.CleanupCommand{MaxWrites: 10}).Encode(),
		(&command.SetLogFormatCommand{Format: command.LogFormat2}).Encode(),
		keyed(1, "k", 1, kvCmd(1, command.KVOp{Op: command.KVGet, NS: "n", Key: "k"})),
	} {
		c := command.KeyedCommand{NowMs: 1, Key: "k", WindowMs: 1000, Inner: inner}
		if _, err := command.DecodeCommand(c.Encode()); err == nil {
			t.Errorf("a keyed entry around type %d decoded", inner[0])
		}
	}
}
