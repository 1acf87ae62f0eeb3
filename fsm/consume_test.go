package fsm

import (
	"fmt"
	"slices"
	"testing"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

func popCmd(now int64, group, lease string, batch int, leaseMs int64) []byte {
	c := command.PopCommand{NowMs: now, Group: group, Queue: "q", Batch: batch, LeaseMs: leaseMs, LeaseID: lease}
	return c.Encode()
}

func ackCmd(now int64, group string, acks ...command.Ack) []byte {
	c := command.AckCommand{NowMs: now, Group: group, Acks: acks}
	return c.Encode()
}

func requirePop(t *testing.T, answer any, offsets []int64, attempts []int32) command.PopResult {
	t.Helper()
	r := answer.(command.PopResult)
	if !slices.Equal(r.Offsets, offsets) || (attempts != nil && !slices.Equal(r.Attempts, attempts)) {
		t.Fatalf("pop leased %v (attempts %v), want %v (%v)", r.Offsets, r.Attempts, offsets, attempts)
	}
	return r
}

func TestPopAckRedeliverAndFanOut(t *testing.T) {
	f := newFSM(t)
	var items []command.PushItem
	for i := range 5 {
		items = append(items, item("q", "p", fmt.Sprint("m", i), byte(i)))
	}
	f.ApplyBatch(logs(1, push(1000, items...)))

	answers := f.ApplyBatch(logs(2,
		popCmd(1001, "g", "L1", 3, 60_000),
		popCmd(1002, "g", "L2", 3, 60_000),   // the partition is leased to L1
		popCmd(1003, "g2", "M1", 10, 60_000), // another group reads independently
	))
	l1 := requirePop(t, answers[0], []int64{0, 1, 2}, []int32{1, 1, 1})
	requirePop(t, answers[1], nil, nil)
	requirePop(t, answers[2], []int64{0, 1, 2, 3, 4}, nil)

	pid := l1.PartitionID
	acks := f.ApplyBatch(logs(5,
		ackCmd(1010, "g", command.Ack{PartitionID: pid, LeaseID: "wrong", TransactionID: "m0", Status: command.AckCompleted}),
		ackCmd(1011, "g",
			command.Ack{PartitionID: pid, LeaseID: "L1", TransactionID: "m0", Status: command.AckCompleted},
			command.Ack{PartitionID: pid, LeaseID: "L1", TransactionID: "m0", Status: command.AckCompleted}, // twice: harmless
			command.Ack{PartitionID: pid, LeaseID: "L1", TransactionID: "m1", Status: command.AckFailed},
			command.Ack{PartitionID: pid, LeaseID: "L1", TransactionID: "m2", Status: command.AckCompleted}),
	))
	if r := acks[0].([]command.AckResult)[0]; r.Success {
		t.Fatal("ack with a wrong lease id succeeded")
	}
	rs := acks[1].([]command.AckResult)
	if !rs[0].Success || !rs[1].Success || !rs[2].Success || !rs[3].Success || !rs[3].LeaseReleased || rs[2].LeaseReleased {
		t.Fatalf("acks: %+v", rs)
	}
	// m1 failed: delivered again first, with its attempt count, then 3, 4.
	requirePop(t, f.ApplyBatch(logs(7, popCmd(1020, "g", "L3", 10, 60_000)))[0], []int64{1, 3, 4}, []int32{2, 1, 1})
}

func TestExpiredLeaseRedeliversAndRefusesLateAcks(t *testing.T) {
	f := newFSM(t)
	f.ApplyBatch(logs(1, push(1000, item("q", "p", "a", 1), item("q", "p", "b", 2))))
	answers := f.ApplyBatch(logs(2,
		popCmd(1000, "g", "L1", 2, 1000),
		popCmd(1999, "g", "L2", 2, 1000), // still leased
		popCmd(2000, "g", "L3", 2, 1000), // L1 expired at 2000
	))
	l1 := requirePop(t, answers[0], []int64{0, 1}, nil)
	requirePop(t, answers[1], nil, nil)
	requirePop(t, answers[2], []int64{0, 1}, []int32{2, 2})
	late := f.ApplyBatch(logs(5, ackCmd(2001, "g", command.Ack{PartitionID: l1.PartitionID, LeaseID: "L1", TransactionID: "a", Status: command.AckCompleted})))
	if late[0].([]command.AckResult)[0].Success {
		t.Fatal("an ack on an expired lease succeeded")
	}
}

func TestRetryLimitDeadLetters(t *testing.T) {
	f := newFSM(t)
	limit := int32(1)
	cfg := command.ConfigureQueueCommand{NowMs: 1, Queue: "q", Options: command.QueueOptions{RetryLimit: &limit}}
	f.ApplyBatch(logs(1, cfg.Encode(), push(2, item("q", "p", "x", 1))))
	idx := uint64(3)
	for round := 0; round < 2; round++ {
		lease := fmt.Sprint("L", round)
		pop := f.ApplyBatch(logs(idx, popCmd(10, "g", lease, 1, 60_000)))[0].(command.PopResult)
		if !slices.Equal(pop.Offsets, []int64{0}) {
			t.Fatalf("round %d: pop %v", round, pop.Offsets)
		}
		res := f.ApplyBatch(logs(idx+1, ackCmd(11, "g", command.Ack{PartitionID: pop.PartitionID, LeaseID: lease, TransactionID: "x", Status: command.AckFailed, Error: "boom"})))[0].([]command.AckResult)[0]
		if res.DeadLettered != (round == 1) {
			t.Fatalf("round %d: dead-lettered %v", round, res.DeadLettered)
		}
		idx += 2
	}
	requirePop(t, f.ApplyBatch(logs(idx, popCmd(20, "g", "L9", 1, 60_000)))[0], nil, nil)
}

// A cursor that retention left behind jumps to the partition's start and
// counts what it never read: the offsets it passes over, less those it had
// finished already.
func TestSkipExpiredCountsTheUnreadOffsetsItPasses(t *testing.T) {
	cur := store.Cursor{Offset: 3, Done: []int64{5, 9}, Attempts: map[int64]int32{3: 1, 9: 2}, Failures: map[int64]int32{4: 1}}
	if !skipExpired(&cur, store.Partition{StartOffset: 8}) {
		t.Fatal("a cursor below the start did not move")
	}
	if cur.Offset != 8 || cur.Expired != 4 || !slices.Equal(cur.Done, []int64{9}) || len(cur.Attempts) != 1 || len(cur.Failures) != 0 {
		t.Fatalf("after the jump: %+v; want offset 8, 4 expired (3, 4, 6, 7), done [9], the attempts of 9 only", cur)
	}
	if skipExpired(&cur, store.Partition{StartOffset: 8}) || cur.Expired != 4 {
		t.Fatalf("a cursor at the start moved again: %+v", cur)
	}
}
