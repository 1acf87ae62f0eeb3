package raftnode

import (
	"bytes"
	"testing"

	"github.com/waggle-mq/waggle/fsm"
	"github.com/waggle-mq/waggle/fsm/fsmtest"
)

// The raft runtime's tests need state to snapshot, back up and restore;
// these build it through the state machine's exported API.

var (
	openStore   = fsmtest.OpenStore
	logs        = fsmtest.Logs
	push        = fsmtest.Push
	item        = fsmtest.Item
	pushResults = fsmtest.PushResults
)

func newFSM(t *testing.T) *fsm.FSM {
	t.Helper()
	f, err := fsm.NewFSM(openStore(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// snapshotBytes is the whole state of f's store as one stream.
func snapshotBytes(t *testing.T, f *fsm.FSM) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := writeWhole(f, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
