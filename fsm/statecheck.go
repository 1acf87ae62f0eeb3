package fsm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/waggle-mq/waggle/store"
)

// A state check hashes a replica's whole state at one raft index
// (store.StateHash), so replicas can be compared by what they hold, not
// only by the writes that made it (the state digest). Every member is
// asked to check at the same index T; each hashes its state right after
// applying the first entry at or past T, the same entry on all of them,
// in the background while it goes on applying. Asked again before a check
// finishes, a node drops it for the new one: one hash runs at a time.
//
// A check reads the whole state: a few seconds a gigabyte of it. It runs
// only when asked (waggle cluster check).

// ErrCheckPassed answers a check asked at an index this node has applied
// past: it can no longer see the state there.
var ErrCheckPassed = errors.New("fsm: applied past the index to check at")

// CheckResult is a finished state check.
type CheckResult struct {
	// Index is the index the check was asked at, Applied the index of the
	// entry the state was hashed after: the first at or past Index that
	// reached the state machine (raft keeps some entries, such as a new
	// leader's no-op, to itself).
	Index, Applied uint64
	store.StateHash
	Took time.Duration
	Err  error // it could not hash (and Hash means nothing)
}

// StateCheck is what a node tells of its state checks.
type StateCheck struct {
	// Pending is the index a check waits for the log to reach, Running
	// the index of the one hashing now; 0 when none.
	Pending, Running uint64
	// Last is the newest finished check, nil before the first.
	Last *CheckResult
}

// checks holds a node's state checks, with a lock of its own so health
// checks never wait for a batch.
type checks struct {
	mu      sync.Mutex
	pending uint64
	running uint64
	last    *CheckResult
	cancel  context.CancelFunc
	done    chan struct{} // closed when the running hash returns
}

// RequestCheck asks for a state check at index: at once when the state is
// there, when the log reaches it otherwise; ErrCheckPassed when the
// state is past it.
func (f *FSM) RequestCheck(index uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch applied := f.meta.AppliedIndex; {
	case applied > index:
		return fmt.Errorf("%w: applied %d, asked %d", ErrCheckPassed, applied, index)
	case applied == index:
		f.startCheck(index, applied)
	default:
		f.checks.mu.Lock()
		f.checks.pending = index
		f.checks.mu.Unlock()
	}
	return nil
}

// StateCheck reports the node's state checks.
func (f *FSM) StateCheck() StateCheck {
	c := &f.checks
	c.mu.Lock()
	defer c.mu.Unlock()
	return StateCheck{Pending: c.pending, Running: c.running, Last: c.last}
}

// checkDue returns the index of the check that waits for the entry at
// index, 0 when none does (f.mu held): ApplyBatch then commits and calls
// startCheck.
func (f *FSM) checkDue(index uint64) uint64 {
	c := &f.checks
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending != 0 && index >= c.pending {
		return c.pending
	}
	return 0
}

// startCheck hashes the state as committed, after the entry at applied,
// for the check asked at index (f.mu held, no write transaction open): a
// snapshot of it is taken now and hashed in the background.
func (f *FSM) startCheck(index, applied uint64) {
	f.StopCheck()
	c := &f.checks
	var sn *store.Snapshot
	err := f.Damaged()
	if err == nil {
		sn, err = f.store.Snapshot()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = 0
	if err != nil {
		c.last = &CheckResult{Index: index, Applied: applied, Err: err}
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c.running, c.cancel, c.done = index, cancel, done
	go func() {
		defer close(done)
		start := time.Now()
		h, err := sn.Hash(ctx)
		sn.Release() // before StopCheck can see it finished
		r := &CheckResult{Index: index, Applied: applied, StateHash: h, Took: time.Since(start), Err: err}
		c.mu.Lock()
		c.last, c.running, c.cancel = r, 0, nil
		c.mu.Unlock()
	}()
}

// StopCheck stops a running hash and waits for it to let go of the store:
// before the state is replaced and before the store closes.
func (f *FSM) StopCheck() {
	c := &f.checks
	c.mu.Lock()
	cancel, done := c.cancel, c.done
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// checkPassedBy gives up a check waiting for an index the restored state
// is already past (f.mu held).
func (f *FSM) checkPassedBy(applied uint64) {
	c := &f.checks
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending != 0 && c.pending <= applied {
		c.last = &CheckResult{Index: c.pending, Err: fmt.Errorf("%w: a snapshot installed moved the state to index %d", ErrCheckPassed, applied)}
		c.pending = 0
	}
}
