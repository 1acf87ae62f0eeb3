package fsm

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/store"
)

// pushes returns n single-message push entries from index first, to
// partitions p0-p6 of queue q, ids unique.
func pushes(first uint64, n int) []*raft.Log {
	var data [][]byte
	for i := range n {
		data = append(data, push(int64(1000+i), item("q", fmt.Sprint("p", i%7), fmt.Sprint("id-", first, "-", i), byte(i))))
	}
	return logs(first, data...)
}

func applied(f *FSM) DigestPoint { return f.StateDigest().Applied }

// Replicas that apply the same entries to the same state agree at every
// index, however raft batched the entries (TestBatchingDoesNotChangeState
// checks that with transactions split too), and across a restart.
func TestStateDigestAgreesAcrossBatchingAndRestart(t *testing.T) {
	entries := pushes(1, 600)
	dir := t.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := NewFSM(st)
	a.ApplyBatch(entries)
	b := newFSM(t)
	for i := 0; i < len(entries); i += 7 {
		b.ApplyBatch(entries[i:min(i+7, len(entries))])
	}
	da, db := a.StateDigest(), b.StateDigest()
	if da.Applied != db.Applied || da.Applied.Index != 600 || da.Applied.Digest == 0 || da.Since != 0 {
		t.Fatalf("digests differ or are unset: %+v and %+v", da.Applied, db.Applied)
	}
	want := []DigestPoint{{256, 0}, {512, 0}}
	if len(da.Recent) != 2 || len(db.Recent) != 2 {
		t.Fatalf("recent digests %+v and %+v, want at 256 and 512", da.Recent, db.Recent)
	}
	for i := range want {
		if da.Recent[i] != db.Recent[i] || da.Recent[i].Index != want[i].Index {
			t.Fatalf("recent digests %+v and %+v, want equal at 256 and 512", da.Recent, db.Recent)
		}
	}

	st.Close()
	a2, err := NewFSM(openStore(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if applied(a2) != da.Applied {
		t.Fatalf("after a restart the digest is %+v, was %+v", applied(a2), da.Applied)
	}
	next := pushes(601, 1)
	a2.ApplyBatch(next)
	b.ApplyBatch(next)
	if applied(a2) != applied(b) || applied(a2) == da.Applied {
		t.Fatalf("after the next entry: %+v and %+v", applied(a2), applied(b))
	}
}

// A snapshot carries the digest: the restored replica goes on agreeing.
func TestStateDigestComesWithASnapshot(t *testing.T) {
	src := newFSM(t)
	src.ApplyBatch(pushes(1, 40))
	sink := persisted(t, src)
	dst := newFSM(t)
	dst.ApplyBatch(pushes(1, 3))
	if err := dst.Restore(sink.reader()); err != nil {
		t.Fatal(err)
	}
	if applied(dst) != applied(src) {
		t.Fatalf("restored digest %+v, the snapshot's source has %+v", applied(dst), applied(src))
	}
	next := pushes(41, 2)
	src.ApplyBatch(next)
	dst.ApplyBatch(next)
	if applied(dst) != applied(src) {
		t.Fatalf("after the next entries: %+v and %+v", applied(dst), applied(src))
	}
}

// The divergences the digest is for: a replica that skipped an entry, and
// one whose state lacked a write, so that it answered an entry
// differently. Each disagrees from there on.
func TestStateDigestShowsADivergedReplica(t *testing.T) {
	entries := pushes(1, 20)
	t.Run("entry skipped", func(t *testing.T) {
		a, b := newFSM(t), newFSM(t)
		a.ApplyBatch(entries)
		b.ApplyBatch(entries[:9])
		b.ApplyBatch(entries[10:])
		if applied(a).Index != 20 || applied(b).Index != 20 || applied(a) == applied(b) {
			t.Fatalf("a replica that skipped entry 10 has digest %+v, the other %+v", applied(b), applied(a))
		}
		a.ApplyBatch(pushes(21, 1))
		b.ApplyBatch(pushes(21, 1))
		if applied(a) == applied(b) {
			t.Fatal("the replicas agree again after one more entry")
		}
	})
	t.Run("entry answered differently", func(t *testing.T) {
		a, b := newFSM(t), newFSM(t)
		a.ApplyBatch(entries)
		b.ApplyBatch(entries)
		// b's partition p0 forgets its messages, outside the state machine
		// (as a damaged store would), then both apply the next push to it:
		// b stores it at another offset.
		forgetMessages(t, b, "q", "p0")
		if applied(a) != applied(b) {
			t.Fatal("a write outside the state machine changed the digest")
		}
		next := logs(21, push(1000, item("q", "p0", "new", 0)))
		ra := pushResults(t, a.ApplyBatch(next)[0])[0]
		rb := pushResults(t, b.ApplyBatch(next)[0])[0]
		if ra.Offset != 3 || rb.Offset != 0 {
			t.Fatalf("the push went to offsets %d and %d, want 3 on the whole replica, 0 on the damaged one", ra.Offset, rb.Offset)
		}
		if applied(a) == applied(b) {
			t.Fatalf("replicas that answered entry 21 differently agree: %+v", applied(a))
		}
	})
}

// The Digested hook hears of the digest at every multiple of
// DigestLogEvery, the same one StateDigest reports there.
func TestDigestedHookHearsEachLogPoint(t *testing.T) {
	f := newFSM(t)
	var heard []DigestPoint
	f.Digested = func(p DigestPoint) { heard = append(heard, p) }
	entries := pushes(1, DigestLogEvery+10)
	for i := 0; i < len(entries); i += 100 {
		f.ApplyBatch(entries[i:min(i+100, len(entries))])
	}
	recent := f.StateDigest().Recent
	var at DigestPoint
	for _, p := range recent {
		if p.Index == DigestLogEvery {
			at = p
		}
	}
	if len(heard) != 1 || heard[0].Index != DigestLogEvery || heard[0] != at {
		t.Fatalf("heard %+v, want the digest at %d (%+v)", heard, DigestLogEvery, at)
	}
}
