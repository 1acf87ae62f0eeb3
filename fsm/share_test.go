package fsm

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// sideBySide is a format 11 acquisition by member of group g in q/p.
func sideBySide(now int64, member string, batch int, maxLocks int32) *command.ShareAcquireCommand {
	return &command.ShareAcquireCommand{NowMs: now, Group: "g", Queue: "q", Partitions: []string{"p"},
		LeaseIDs: []string{command.SharedLeaseID(member, fmt.Sprint(now))}, Batch: batch, LeaseMs: 30_000, MaxDeliveries: 5, MaxLocks: maxLocks}
}

func requireAcquired(t *testing.T, r command.ShareAcquireResult, offsets []int64, attempts []int32) {
	t.Helper()
	var got []int64
	var counts []int32
	for _, l := range r.Leases {
		got, counts = append(got, l.Offsets...), append(counts, l.Attempts...)
	}
	if !slices.Equal(got, offsets) || attempts != nil && !slices.Equal(counts, attempts) {
		t.Fatalf("acquired %v (deliveries %v), want %v (%v)", got, counts, offsets, attempts)
	}
}

// shareFSM is a state machine with n messages pushed to q/p.
func shareFSM(t *testing.T, n int) *cmdFSM {
	h := newCmdFSM(t)
	var items []command.PushItem
	for i := range n {
		items = append(items, item("q", "p", fmt.Sprint("m", i), byte(i)))
	}
	h.one(push(1000, items...))
	return h
}

func shareAck(now int64, acks ...command.ShareAck) *command.ShareAckCommand {
	for i := range acks {
		acks[i].Queue, acks[i].Partition = "q", "p"
	}
	return &command.ShareAckCommand{NowMs: now, Group: "g", Acks: acks}
}

// Members of a share group hold one partition's records side by side
// (log format 11): each acquisition takes records no lease holds, within
// the window of MaxLocks from the group's position; acks reach only the
// member's own leases; what a member releases or lets expire goes to the
// next acquisition with its delivery count raised; and an HTTP pop waits
// until the partition is free of leases.
func TestShareMembersHoldOnePartitionSideBySide(t *testing.T) {
	h := shareFSM(t, 10)

	requireAcquired(t, run(h, sideBySide(1001, "a", 3, 6)), []int64{0, 1, 2}, []int32{1, 1, 1})
	requireAcquired(t, run(h, sideBySide(1002, "b", 10, 6)), []int64{3, 4, 5}, nil) // the window ends at 6
	requireAcquired(t, run(h, sideBySide(1003, "c", 10, 6)), nil, nil)
	if r := run(h, &command.PopCommand{NowMs: 1004, Group: "g", Queue: "q", Batch: 10, LeaseMs: 1000, LeaseID: "http"}); len(r.Offsets) != 0 {
		t.Fatalf("an HTTP pop took %v while share members hold the partition", r.Offsets)
	}

	got := run(h, shareAck(1005,
		command.ShareAck{Holder: "b", First: 0, Last: 0, Kind: command.ShareAccept},        // a's record
		command.ShareAck{Holder: "a", First: 0, Last: 1, Kind: command.ShareAccept},        // its own
		command.ShareAck{Holder: "a", First: 2, Last: 2, Kind: command.ShareRelease},       // back for another delivery
		command.ShareAck{Holder: "b", First: 4, Last: 4, Kind: command.ShareReject},        // archived
		command.ShareAck{Holder: "b", First: 2, Last: 5, Kind: command.ShareAccept},        // 2 is not b's: nothing changes
		command.ShareAck{Holder: "c", Kind: command.ShareRelease, Rest: true},              // holds nothing
		command.ShareAck{Holder: "b", Kind: command.ShareRenew, RenewMs: 100_000, Last: 5}, // keeps b's lease past the others'
	))
	for i, wantErr := range []bool{true, false, false, false, true, true, false} {
		if (got[i].Error != "") != wantErr {
			t.Fatalf("ack %d answered %q", i, got[i].Error)
		}
	}
	if c, _ := h.cursor("g", "q", "p"); c.Offset != 2 || len(c.Leases) != 1 || !command.HeldBy(c.Leases[0].ID, "b") {
		t.Fatalf("after the acks the cursor is at %d with leases %+v, want 2 and b's", c.Offset, c.Leases)
	}

	// The window now runs from 2 to 7: 2 comes back, 6 and 7 are new.
	requireAcquired(t, run(h, sideBySide(1006, "c", 10, 6)), []int64{2, 6, 7}, []int32{2, 1, 1})
	requireAcquired(t, run(h, sideBySide(1007, "d", 10, 6)), nil, nil) // all of 2 to 7 is held

	// a range over two leases of one member acks both.
	requireAcquired(t, run(h, sideBySide(1008, "c", 1, 10)), []int64{8}, nil)
	if r := run(h, shareAck(1009, command.ShareAck{Holder: "c", First: 6, Last: 8, Kind: command.ShareAccept})); r[0].Error != "" {
		t.Fatalf("acking c's offsets 6 to 8 over two leases: %s", r[0].Error)
	}

	// c's lease on 2 expires: the next acquisition settles it and takes 2
	// again (b's renewed lease still holds 3 and 5).
	requireAcquired(t, run(h, sideBySide(40_000, "a", 10, 10)), []int64{2, 9}, []int32{3, 1})
	c, _ := h.cursor("g", "q", "p")
	if len(c.Leases) != 2 {
		t.Fatalf("leases after the expiry: %+v, want b's and a's", c.Leases)
	}
	for _, l := range c.Leases {
		h.view(func(tx *store.Tx) error {
			if _, _, err := tx.LeaseCursor(l.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("shared lease %s is in the lease index (%v)", l.ID, err)
			}
			return nil
		})
	}

	// Once every lease has expired an HTTP pop takes the partition again,
	// in order from the group's position.
	r := run(h, &command.PopCommand{NowMs: 200_000, Group: "g", Queue: "q", Batch: 10, LeaseMs: 1000, LeaseID: "http-2"})
	if !slices.Equal(r.Offsets, []int64{2, 3, 5, 9}) {
		t.Fatalf("an HTTP pop after the leases expired took %v, want 2 3 5 9", r.Offsets)
	}
}

// Read uncommitted (share.isolation.level) takes an open transaction's
// records, which a committed acquisition stops before.
func TestShareAcquireReadUncommitted(t *testing.T) {
	h := newCmdFSM(t)
	h.one((&command.CreateTopicCommand{NowMs: 1000, Name: "t", Partitions: 1}).Encode())
	pid := run(h, &command.InitTxnProducerCommand{NowMs: 1001, TransactionalID: "x", TimeoutMs: 60_000, ProducerID: -1, Epoch: -1}).ProducerID
	h.one((&command.AddToTxnCommand{NowMs: 1002, TransactionalID: "x", ProducerID: pid, Partitions: []store.TxnPartition{{Topic: "t", Partition: 0}}}).Encode())
	h.one((&command.ProduceCommand{NowMs: 1003, Topic: "t", Partition: 0, Batches: []command.ProduceBatch{txnBatch(pid, 0, 0, 3)}}).Encode())
	acquire := func(now int64, uncommitted bool) command.ShareAcquireResult {
		return run(h, &command.ShareAcquireCommand{NowMs: now, Group: "g", Queue: "t", Partitions: []string{"0"},
			LeaseIDs: []string{command.SharedLeaseID("m", fmt.Sprint(now))}, Batch: 10, LeaseMs: 30_000, MaxLocks: 100, ReadUncommitted: uncommitted})
	}
	requireAcquired(t, acquire(1004, false), nil, nil)
	requireAcquired(t, acquire(1005, true), []int64{0, 1, 2}, nil)
}

// A record a member releases is back at once for any member's next
// acquisition, while the member keeps the rest of its lease (KIP-932).
func TestShareReleaseGivesTheRecordBackAtOnce(t *testing.T) {
	h := shareFSM(t, 4)
	requireAcquired(t, run(h, sideBySide(1001, "a", 4, 100)), []int64{0, 1, 2, 3}, nil)
	if r := run(h, shareAck(1002, command.ShareAck{Holder: "a", First: 1, Last: 1, Kind: command.ShareRelease})); r[0].Error != "" {
		t.Fatalf("release: %s", r[0].Error)
	}
	requireAcquired(t, run(h, sideBySide(1003, "b", 4, 100)), []int64{1}, []int32{2})
	if r := run(h, shareAck(1004, command.ShareAck{Holder: "a", First: 0, Last: 3, Kind: command.ShareAccept})); r[0].Error == "" {
		t.Fatal("a accepted offset 1 after releasing it")
	}
	if r := run(h, shareAck(1005, command.ShareAck{Holder: "a", Kind: command.ShareAccept, Rest: true},
		command.ShareAck{Holder: "b", First: 1, Last: 1, Kind: command.ShareAccept})); r[0].Error != "" || r[1].Error != "" {
		t.Fatalf("accepting the rest: %+v", r)
	}
	if c, _ := h.cursor("g", "q", "p"); c.Offset != 4 || len(c.Leases) != 0 {
		t.Fatalf("after every record was accepted the cursor is at %d with leases %+v", c.Offset, c.Leases)
	}
}
