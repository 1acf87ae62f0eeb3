package fsm

import (
	"errors"
	"testing"
	"time"
)

// lastCheck waits for f's check at index to finish.
func lastCheck(t *testing.T, f *FSM, index uint64) CheckResult {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c := f.StateCheck(); c.Last != nil && c.Last.Index == index {
			return *c.Last
		}
		if time.Now().After(deadline) {
			t.Fatalf("no check at %d finished: %+v", index, f.StateCheck())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Replicas check their state at the same entry however raft batched the
// entries, and agree; a replica that lost a key outside the state machine
// (as a damaged store would) keeps the digest and fails the check.
func TestStateCheckComparesWholeStates(t *testing.T) {
	entries := pushes(1, 600)
	a, b, damaged := newFSM(t), newFSM(t), newFSM(t)
	for _, f := range []*FSM{a, b} {
		if err := f.RequestCheck(300); err != nil {
			t.Fatal(err)
		}
		if c := f.StateCheck(); c.Pending != 300 {
			t.Fatalf("a check asked at 300 is not pending: %+v", c)
		}
	}
	a.ApplyBatch(entries)
	for i := 0; i < len(entries); i += 7 {
		b.ApplyBatch(entries[i:min(i+7, len(entries))])
	}
	ca, cb := lastCheck(t, a, 300), lastCheck(t, b, 300)
	if ca.Err != nil || cb.Err != nil {
		t.Fatalf("checks failed: %v, %v", ca.Err, cb.Err)
	}
	if ca.StateHash != cb.StateHash || ca.Keys == 0 || ca.Bytes == 0 {
		t.Fatalf("replicas batched differently hash %+v and %+v", ca.StateHash, cb.StateHash)
	}

	// Asked at the applied index, a check runs at once; asked below it,
	// the node says it has passed it.
	if err := a.RequestCheck(600); err != nil {
		t.Fatal(err)
	}
	whole := lastCheck(t, a, 600)
	if whole.Err != nil || whole.Hash == ca.Hash {
		t.Fatalf("check at the applied index: %+v", whole)
	}
	if err := a.RequestCheck(599); !errors.Is(err, ErrCheckPassed) {
		t.Fatalf("a check asked below the applied index: %v", err)
	}

	// The last entry pushes to p4: p0's messages lost before it leave the
	// digest as it is.
	damaged.ApplyBatch(entries[:599])
	forgetMessages(t, damaged, "q", "p0")
	if err := damaged.RequestCheck(600); err != nil {
		t.Fatal(err)
	}
	damaged.ApplyBatch(entries[599:])
	if applied(damaged) != applied(a) {
		t.Fatal("the damage changed the digest; this test needs damage the digest cannot see")
	}
	if c := lastCheck(t, damaged, 600); c.Err != nil || c.Hash == whole.Hash {
		t.Fatalf("the damaged replica's check: %+v, the whole one's %+v", c, whole)
	}
}

// A snapshot installed past a pending check gives it up; one that stops
// short leaves it waiting.
func TestStateCheckPassedByARestore(t *testing.T) {
	src := newFSM(t)
	src.ApplyBatch(pushes(1, 40))
	sink := persisted(t, src)
	dst := newFSM(t)
	if err := dst.RequestCheck(30); err != nil {
		t.Fatal(err)
	}
	if err := dst.Restore(sink.reader()); err != nil {
		t.Fatal(err)
	}
	if c := dst.StateCheck(); c.Pending != 0 || c.Last == nil || !errors.Is(c.Last.Err, ErrCheckPassed) {
		t.Fatalf("after a restore to 40, the check at 30: %+v", c)
	}
	if err := dst.RequestCheck(50); err != nil {
		t.Fatal(err)
	}
	if err := dst.Restore(persisted(t, src).reader()); err != nil {
		t.Fatal(err)
	}
	if c := dst.StateCheck(); c.Pending != 50 {
		t.Fatalf("after a restore to 40, the check at 50: %+v", c)
	}
}

// A check asked at an index raft kept to itself (a new leader's no-op)
// hashes after the next entry the state machine sees, and is known by
// the index asked.
func TestStateCheckAtAnEntryRaftKept(t *testing.T) {
	f := newFSM(t)
	f.ApplyBatch(pushes(1, 10))
	if err := f.RequestCheck(11); err != nil {
		t.Fatal(err)
	}
	f.ApplyBatch(pushes(12, 3)) // no entry 11
	if c := lastCheck(t, f, 11); c.Err != nil || c.Applied != 12 {
		t.Fatalf("the check asked at 11: %+v, want it hashed after entry 12", c)
	}
}
