package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's partition reassignments (KIP-455) move a topic's raft group: on
// 5 nodes with 5 data groups of 3 replicas, kadm moves both partitions of
// a topic of group 2 from nodes 2, 3, 4 to 5, 3, 4 (node 2, the leader,
// replaced by node 5, the new preferred leader) while a producer writes
// to it through every broker. ListPartitionReassignments lists the topic,
// with the replicas being added and removed, until the group's members
// are the new replicas; then Metadata names them and a leader among them,
// and every record acknowledged before and during the move is read back
// once. Requests that disagree on a group's replicas, name a broker that
// does not exist or cancel a move that is not under way are refused.
//
// One replica moves: a move that adds two nodes at once (to 5, 1, 3)
// stalls with the first one a non-voter, as raftgroups.moveReplicas
// waits to add the second before it promotes the first, and may not add
// it while the group has a member catching up.
func TestKafkaPartitionReassignment(t *testing.T) {
	s := startScaleOut(t, 5, 6, 3)
	s.waitPlaced(t, func(g uint32) int { return s.replicas(g)[0] })
	const g = 2
	from, to := s.replicas(g), []int32{5, 3, 4}
	if !slices.Equal(from, []int{2, 3, 4}) {
		t.Fatalf("group %d is on %v, want 2, 3, 4", g, from)
	}
	topic := s.nameIn(t, "ra-t", g)
	cl := kafkaClient(t, s.kafkaAddrs(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgoLogger(t, "reassign"))
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	createTopic(t, cl, topic, 2, nil)

	var (
		mu    sync.Mutex
		acked []string
	)
	var before []*kgo.Record
	for i := range 200 {
		v := fmt.Sprintf("before-%d", i)
		before = append(before, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(v)})
		acked = append(acked, v)
	}
	produceSync(t, cl, before...)

	// Refused: partitions of one group asking for different replicas, a
	// broker that does not exist, a cancel with no move under way.
	requireRefused := func(req kadm.AlterPartitionAssignmentsReq, want error) {
		t.Helper()
		resp, err := adm.AlterPartitionAssignments(ctx, req)
		if err != nil {
			t.Fatalf("AlterPartitionAssignments %v: %v", req, err)
		}
		resp.Each(func(r kadm.AlterPartitionAssignmentsResponse) {
			if !errors.Is(r.Err, want) {
				t.Fatalf("AlterPartitionAssignments %v: %s[%d] answered %v (%s), want %v", req, r.Topic, r.Partition, r.Err, r.ErrMessage, want)
			}
			t.Logf("%s[%d] refused: %v: %s", r.Topic, r.Partition, r.Err, r.ErrMessage)
		})
	}
	var differ, stranger, cancel kadm.AlterPartitionAssignmentsReq
	differ.Assign(topic, 0, to)
	differ.Assign(topic, 1, []int32{3, 5, 4})
	requireRefused(differ, kerr.InvalidReplicaAssignment)
	stranger.Assign(topic, 0, []int32{5, 9, 3})
	stranger.Assign(topic, 1, []int32{5, 9, 3})
	requireRefused(stranger, kerr.InvalidReplicaAssignment)
	cancel.CancelAssign(topic, 0)
	requireRefused(cancel, kerr.NoReassignmentInProgress)
	groups, err := s.groupsOf(t, s.nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := groups[g]; got.Moving || !slices.Equal(got.Replicas, from) {
		t.Fatalf("after the refusals group %d is %+v, want it on %v, not moving", g, got, from)
	}

	// A producer writes through every broker during the move.
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			v := "during-" + strconv.Itoa(i)
			pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(v)}).FirstErr()
			cancel()
			if err != nil {
				done <- fmt.Errorf("record %s: %w", v, err)
				return
			}
			mu.Lock()
			acked = append(acked, v)
			mu.Unlock()
		}
	}()
	ackedNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	waitFor(t, 20*time.Second, func() error {
		if n := ackedNow(); n < 250 {
			return fmt.Errorf("%d records acknowledged before the move", n)
		}
		return nil
	})

	var move kadm.AlterPartitionAssignmentsReq
	move.Assign(topic, 0, to)
	move.Assign(topic, 1, to)
	start, ackedAtStart := time.Now(), ackedNow()
	resp, err := adm.AlterPartitionAssignments(ctx, move)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("AlterPartitionAssignments %v: %v", move, err)
	}

	// Listed until the group's members are the new replicas. Each listing
	// says where the move is: replicas = the new ones and those leaving.
	var listed kadm.TopicsSet
	listed.Add(topic, 0, 1)
	var seen, failed int
	last := ""
	waitFor(t, 90*time.Second, func() error {
		ls, err := adm.ListPartitionReassignments(ctx, listed)
		if err != nil {
			if failed++; failed == 1 {
				t.Logf("%v: listing failed: %v", time.Since(start).Round(time.Millisecond), err) // a group without a leader for a moment
			}
			return err
		}
		if len(ls[topic]) == 0 {
			return nil
		}
		if len(ls[topic]) != 2 {
			t.Fatalf("listed %v, want both partitions of %s", ls[topic], topic)
		}
		for _, p := range ls[topic] {
			want := append(slices.Clone(to), p.RemovingReplicas...)
			if !slices.Equal(p.Replicas, want) || len(p.AddingReplicas)+len(p.RemovingReplicas) == 0 {
				t.Fatalf("%s[%d] listed with replicas %v, adding %v, removing %v, moving to %v", topic, p.Partition, p.Replicas, p.AddingReplicas, p.RemovingReplicas, to)
			}
		}
		if now := fmt.Sprint(ls[topic][0]); now != last {
			p := ls[topic][0]
			t.Logf("%v: listed with replicas %v, adding %v, removing %v", time.Since(start).Round(time.Millisecond), p.Replicas, p.AddingReplicas, p.RemovingReplicas)
			last = now
		}
		seen++
		return fmt.Errorf("still moving: %v", ls[topic])
	})
	moved := time.Since(start)
	t.Logf("listed %d times (%d listings failed) until the move was done, %v after it was asked; %d records acknowledged meanwhile",
		seen, failed, moved.Round(time.Millisecond), ackedNow()-ackedAtStart)
	if seen == 0 {
		t.Errorf("the move was never listed") // it takes seconds: catching up, promoting, a hand-over
	}
	want := make([]int, len(to))
	for i, id := range to {
		want[i] = int(id)
	}
	s.waitMoved(t, g, want)
	t.Logf("group %d settled on %v %v after the move was asked", g, want, time.Since(start).Round(time.Millisecond))

	// Every broker's Metadata names the new replicas and a leader among
	// them.
	for _, n := range s.nodes {
		ncl := kafkaClient(t, []string{n.kafkaAddr})
		waitFor(t, 30*time.Second, func() error {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			raw, err := ncl.Broker(n.id).Request(ctx, req)
			if err != nil {
				return err
			}
			mt := raw.(*kmsg.MetadataResponse).Topics[0]
			if mt.ErrorCode != 0 || len(mt.Partitions) != 2 {
				return fmt.Errorf("node %d: %s: error %d, %d partitions", n.id, topic, mt.ErrorCode, len(mt.Partitions))
			}
			for _, p := range mt.Partitions {
				if got := slices.Sorted(slices.Values(p.Replicas)); p.ErrorCode != 0 || !slices.Equal(got, slices.Sorted(slices.Values(to))) || !slices.Contains(to, p.Leader) {
					return fmt.Errorf("node %d: %s[%d]: error %d, replicas %v, leader %d; want replicas %v and a leader among them", n.id, topic, p.Partition, p.ErrorCode, p.Replicas, p.Leader, to)
				}
			}
			return nil
		})
		ncl.Close()
	}

	// A broker that is not the controller (group 0's leader) takes a
	// reassignment too: it sends the record there (KIP-590).
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	via := int32(1)
	if md.Controller == via {
		via = 2
	}
	again := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	rp.Partition, rp.Replicas = 0, to
	rt.Partitions = append(rt.Partitions, rp)
	again.Topics = append(again.Topics, rt)
	raw, err := cl.Broker(int(via)).Request(ctx, again)
	if err != nil {
		t.Fatalf("AlterPartitionAssignments through broker %d: %v", via, err)
	}
	if r := raw.(*kmsg.AlterPartitionAssignmentsResponse); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AlterPartitionAssignments through broker %d, not the controller (%d): %v / %v, want no error", via, md.Controller,
			kerr.ErrorForCode(r.ErrorCode), kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	// The move done, the same replicas asked again change nothing, and
	// there is nothing to cancel.
	resp, err = adm.AlterPartitionAssignments(ctx, move)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("AlterPartitionAssignments %v again: %v", move, err)
	}
	if groups, err := s.groupsOf(t, s.nodes[0]); err != nil || groups[g].Moving {
		t.Fatalf("group %d after the same replicas again: %+v (%v)", g, groups[g], err)
	}
	requireRefused(cancel, kerr.NoReassignmentInProgress)

	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("the producer failed during the move: %v", err)
	}
	got := consumeN(t, s.kafkaAddrs(), topic, len(acked))
	read := map[string]int{}
	for _, r := range got {
		read[string(r.Value)]++
	}
	for _, v := range acked {
		if read[v] != 1 {
			t.Fatalf("record %s, acknowledged, read %d times", v, read[v])
		}
	}
	t.Logf("%d records produced before and during the move, each read once", len(acked))
}
