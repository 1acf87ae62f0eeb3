package fsm

import (
	"strings"
	"testing"

	"github.com/waggle-mq/waggle/command"
)

// A node whose binary is older than the cluster's format must stop, not
// apply what it may misread: at start (its data directory says so) and at
// the entry that raises the format past it.
func TestNewerLogFormatThanTheBinaryStopsTheNode(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	f, err := NewFSM(st)
	if err != nil {
		t.Fatal(err)
	}
	f.ApplyBatch(logs(1, (&command.SetLogFormatCommand{Format: command.MaxLogFormat}).Encode()))
	if got := f.LogFormat(); got != command.MaxLogFormat {
		t.Fatalf("after SetLogFormat the cluster writes format %d, want %d", got, command.MaxLogFormat)
	}
	// Lowering is ignored.
	f.ApplyBatch(logs(2, (&command.SetLogFormatCommand{Format: command.LogFormat1}).Encode()))
	if got := f.LogFormat(); got != command.MaxLogFormat {
		t.Fatalf("a lower SetLogFormat moved the format to %d", got)
	}

	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(string), "run a newer waggle") {
				t.Fatalf("SetLogFormat past this binary: recovered %v, want a stop naming the cause", r)
			}
		}()
		f.ApplyBatch(logs(3, (&command.SetLogFormatCommand{Format: command.MaxLogFormat + 1}).Encode()))
	}()

	// A store a newer binary left at a newer format is refused at start.
	tx := st.BeginWrite()
	if err := tx.PutLogFormat(uint32(command.MaxLogFormat + 1)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := NewFSM(st); err == nil || !strings.Contains(err.Error(), "run a newer waggle") {
		t.Fatalf("opening a store at format %d with a binary of %d: %v", command.MaxLogFormat+1, command.MaxLogFormat, err)
	}
}

func TestUnknownCommandTypeStopsTheNode(t *testing.T) {
	f := newFSM(t)
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "needs a newer waggle") {
			t.Fatalf("unknown type: recovered %v", r)
		}
	}()
	f.ApplyBatch(logs(1, []byte{250, 1, 2}))
}
