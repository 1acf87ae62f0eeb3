package broker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// A keyed write is refused until the cluster's log format carries keyed
// writes; then it is applied once per key (the same key and request again
// answer the first outcome, minted ids included), and the key with another
// request is refused.
func TestKeyedWritesApplyOncePerKey(t *testing.T) {
	s := startService(t)
	incr := []command.KVOp{{Op: command.KVIncr, NS: "n", Key: "c", Forever: true}}
	keyed := WithRequestKey(context.Background(), RequestKey{Key: "k-1", BodyHash: [32]byte{1}})
	if s.KeyedWrites() {
		t.Fatal("a new node at log format 1 says it carries keyed writes")
	}
	if _, err := s.KV(keyed, incr); !errors.Is(err, ErrUpgradeInProgress) {
		t.Fatalf("a keyed write at log format 1: %v, want ErrUpgradeInProgress", err)
	}
	if err := s.RaiseLogFormat(command.LogFormat2); err != nil || !s.KeyedWrites() {
		t.Fatalf("raise the log format: %v", err)
	}
	first, err := s.KV(keyed, incr)
	if err != nil || first.Results[0].Version != 1 {
		t.Fatalf("keyed incr: %+v, %v", first, err)
	}
	again, err := s.KV(keyed, incr)
	if err != nil || again.Results[0].Version != 1 {
		t.Fatalf("the keyed incr again: %+v, %v; want the first answer (version 1)", again, err)
	}
	other := WithRequestKey(context.Background(), RequestKey{Key: "k-1", BodyHash: [32]byte{2}})
	if _, err := s.KV(other, incr); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("the key with another request: %v, want ErrKeyReused", err)
	}
	if got, err := s.KV(context.Background(), []command.KVOp{{Op: command.KVGet, NS: "n", Key: "c"}}); err != nil || string(got.Results[0].Value) != "1" {
		t.Fatalf("counter %+v, %v; want 1", got, err)
	}

	// A keyed transaction answers the same minted transaction id again.
	txn := TransactionRequest{KV: []command.KVOp{{Op: command.KVPut, NS: "n", Key: "t", Value: []byte(`1`), Forever: true}}}
	tk := WithRequestKey(context.Background(), RequestKey{Key: "t-1"})
	a, err1 := s.Transaction(tk, txn)
	b, err2 := s.Transaction(tk, txn)
	if err1 != nil || err2 != nil || !a.Success || a.TransactionID != b.TransactionID || !b.Success {
		t.Fatalf("keyed transaction twice: %+v (%v), %+v (%v)", a, err1, b, err2)
	}
}

// The leader's housekeeping prunes outcomes whose window has passed.
func TestMaintenancePrunesRequestOutcomes(t *testing.T) {
	s := startService(t)
	if err := s.RaiseLogFormat(command.LogFormat2); err != nil {
		t.Fatal(err)
	}
	s.RequestWindow = time.Millisecond
	ctx := WithRequestKey(context.Background(), RequestKey{Key: "short"})
	if _, err := s.KV(ctx, []command.KVOp{{Op: command.KVIncr, NS: "n", Key: "c", Forever: true}}); err != nil {
		t.Fatal(err)
	}
	kept := func() bool {
		var found bool
		if err := s.store.View(func(tx *store.Tx) (err error) {
			_, found, err = tx.RequestOutcome("short")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return found
	}
	if !kept() {
		t.Fatal("the keyed write's outcome was not recorded")
	}
	time.Sleep(5 * time.Millisecond) // past the 1 ms window on the leader's clock
	s.pruneRequests(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if kept() {
		t.Fatal("the outcome outlived its window and a prune")
	}
}

// Regression: a cluster below log format 6 refused a classic group's
// record with ErrUpgradeInProgress wrapping ErrLogFormatTooOld as text, so
// the coordinator took the refusal for an unknown outcome and started a
// new generation after every SyncGroup of a rolling upgrade. Both must
// match.
func TestClassicGroupRecordWaitsForLogFormat6(t *testing.T) {
	s := startService(t)
	g := store.ClassicGroup{Name: "g", Generation: 2, Leader: "m", Members: []store.ClassicMember{{ID: "m", Assignment: []byte("a")}}}
	if err := s.SaveClassicGroup(g); !errors.Is(err, command.ErrLogFormatTooOld) || !errors.Is(err, ErrUpgradeInProgress) {
		t.Fatalf("a record at log format 1: %v, want ErrLogFormatTooOld and ErrUpgradeInProgress", err)
	}
	if err := s.RaiseLogFormat(command.LogFormat6); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveClassicGroup(g); err != nil {
		t.Fatal(err)
	}
	if got, found, err := s.ClassicGroup("g"); err != nil || !found || got.Generation != 2 || string(got.Members[0].Assignment) != "a" {
		t.Fatalf("read back %+v, %v, %v", got, found, err)
	}
}
