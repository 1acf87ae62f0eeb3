// Package fsmtest builds raft entries and stores for the tests of the
// state machine and the raft runtime, without raft running. It imports
// no package above command and store, so package fsm's own tests can
// use it.
package fsmtest

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// OpenStore opens a store in dir, closed when the test ends.
func OpenStore(t testing.TB, dir string) *store.Store {
	t.Helper()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Logs numbers encoded commands as consecutive sealed raft entries of
// term 1 from index first.
func Logs(first uint64, cmds ...[]byte) []*raft.Log {
	out := make([]*raft.Log, len(cmds))
	for i, c := range cmds {
		out[i] = &raft.Log{Index: first + uint64(i), Term: 1, Type: raft.LogCommand, Data: command.Seal(c)}
	}
	return out
}

// Push encodes a push of items stamped at nowMs.
func Push(nowMs int64, items ...command.PushItem) []byte {
	c := command.PushCommand{NowMs: nowMs, Items: items}
	return c.Encode()
}

// Item makes a push item whose message id is derived from the tag, as a
// leader would stamp a fresh one.
func Item(queue, partition, txID string, tag byte) command.PushItem {
	return command.PushItem{Queue: queue, Partition: partition, TransactionID: txID, MessageID: [16]byte{tag}, Payload: []byte(`{"n":1}`)}
}

// PushResults is a push entry's answer, or fails the test.
func PushResults(t testing.TB, answer any) []command.PushResult {
	t.Helper()
	r, ok := answer.([]command.PushResult)
	if !ok {
		t.Fatalf("answer is %T, want []PushResult", answer)
	}
	return r
}
