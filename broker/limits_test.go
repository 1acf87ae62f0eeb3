package broker

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/waggle-mq/waggle/command"
)

// Regression tests for issue 14 (the FSM never panics on a request-shaped
// input): a group name is in every cursor, subscription and group key,
// which badger refuses past 65,000 bytes, so a name of 70,000 bytes made
// seek, ack, delete group and commit entries fail in FSM apply, a panic on
// every replica at every restart. They are refused before proposing now.
func TestLongGroupNamesRefusedBeforeProposing(t *testing.T) {
	s := startService(t)
	if outcome, err := s.CreateTopic("t", 1, nil); err != nil || outcome != command.TopicOK {
		t.Fatalf("create topic: %v, %v", outcome, err)
	}
	res, err := s.Push(context.Background(), []PushItem{{Queue: "t", Partition: "0", Payload: []byte(`1`)}})
	if err != nil || res[0].Status != StatusQueued {
		t.Fatalf("push: %+v, %v", res, err)
	}
	msgs, err := s.Pop(t.Context(), PopRequest{Queue: "t", Partition: "0"})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("pop: %v, %v", msgs, err)
	}
	pid := msgs[0].PartitionID

	long := strings.Repeat("g", 70_000)
	zero := int64(0)
	checks := map[string]error{
		"seek":         s.Seek(context.Background(), long, "t", SeekRequest{Offset: &zero}),
		"delete group": s.DeleteGroup(context.Background(), long),
	}
	_, checks["ack"] = s.Ack(context.Background(), long, []AckRequest{{PartitionID: pid, LeaseID: "x", TransactionID: "x", Status: command.AckCompleted}})
	_, checks["commit"] = s.CommitOffsets(long, []command.OffsetCommit{{Topic: "t", Partition: 0, Offset: 1}})
	_, checks["delete offsets"] = s.DeleteOffsets(long, false, []command.OffsetCommit{{Topic: "t", Partition: 0}})
	_, checks["pop"] = s.Pop(t.Context(), PopRequest{Queue: "t", Group: long})
	_, checks["transaction"] = s.Transaction(context.Background(), TransactionRequest{Ops: []TxnOp{{Type: "ack", Group: long,
		Ack: AckRequest{PartitionID: pid, LeaseID: "x", TransactionID: "x"}}}})
	for name, err := range checks {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s with a %d-byte group: %v, want ErrInvalid", name, len(long), err)
		}
	}
	// The node is still up and applies entries.
	if _, err := s.Push(context.Background(), []PushItem{{Queue: "t", Payload: []byte(`2`)}}); err != nil {
		t.Fatal(err)
	}
}

// Regression test: a Kafka commit of 10,000 offsets became one entry, and
// with a 1,024-byte group and Kafka's 4,096-byte metadata it wrote about
// 50 MB in one badger transaction (refused past 9.6 MB: FSM panic). Commits
// are split by bytes now, and metadata over 4,096 bytes is refused.
func TestLargeOffsetCommitsSplitByBytes(t *testing.T) {
	s := startService(t)
	if outcome, err := s.CreateTopic("t", 1, nil); err != nil || outcome != command.TopicOK {
		t.Fatalf("create topic: %v, %v", outcome, err)
	}
	group := strings.Repeat("g", MaxGroupName)
	meta := strings.Repeat("m", MaxOffsetMetadata)
	offsets := make([]command.OffsetCommit, 5_000)
	for i := range offsets {
		offsets[i] = command.OffsetCommit{Topic: "t", Partition: 0, Offset: int64(i), Metadata: meta}
	}
	for _, chunk := range offsetChunks(group, offsets) {
		bytes := 0
		for _, o := range chunk {
			bytes += offsetBytes(group, o)
		}
		if bytes > offsetEntryBytes || len(chunk) > command.MaxOffsetsPerEntry {
			t.Fatalf("a chunk of %d offsets, %d bytes", len(chunk), bytes)
		}
	}
	outcomes, err := s.CommitOffsets(group, offsets)
	if err != nil || len(outcomes) != len(offsets) {
		t.Fatalf("commit: %d outcomes, %v", len(outcomes), err)
	}
	got, err := s.GroupOffsets(group)
	if err != nil || len(got) != 1 || got[0].Offset != int64(len(offsets)-1) || got[0].Metadata != meta {
		t.Fatalf("group offsets: %d, %v", len(got), err)
	}
	if _, err := s.CommitOffsets(group, []command.OffsetCommit{{Topic: "t", Offset: 1, Metadata: meta + "m"}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("metadata of %d bytes: %v, want ErrInvalid", len(meta)+1, err)
	}
	if _, err := s.CommitOffsets("g", []command.OffsetCommit{{Topic: strings.Repeat("t", 70_000), Offset: 1}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a 70,000-byte topic name: %v, want ErrInvalid", err)
	}
	// Deleting many offsets of a long group splits too.
	dels := make([]command.OffsetCommit, 20_000)
	for i := range dels {
		dels[i] = command.OffsetCommit{Topic: "t", Partition: int32(i)}
	}
	if n := len(offsetChunks(group, dels)); n < 2 {
		t.Fatalf("20,000 deletes of a %d-byte group in %d entries", len(group), n)
	}
	if _, err := s.DeleteOffsets(group, false, dels); err != nil {
		t.Fatal(err)
	}
}

// Regression test: a topic created with max.message.bytes of 50 MB took a
// 40 MB produce as one entry of forty 1 MB batches, past badger's 9.6 MB
// transaction (FSM panic). max.message.bytes is capped, and produces are
// held to the cap whatever an older topic says.
func TestMaxMessageBytesCapped(t *testing.T) {
	s := startService(t)
	if _, err := s.CreateTopic("big", 1, []command.TopicSetting{{Name: command.ConfigMaxMessageBytes, Value: 50 << 20}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("max.message.bytes 50 MB: %v, want ErrInvalid", err)
	}
	if outcome, err := s.CreateTopic("ok", 1, []command.TopicSetting{{Name: command.ConfigMaxMessageBytes, Value: MaxTopicMessageBytes}}); err != nil || outcome != command.TopicOK {
		t.Fatalf("max.message.bytes at the cap: %v, %v", outcome, err)
	}
	for _, tc := range []struct {
		max  int32
		want int
	}{{0, DefaultMaxMessageBytes}, {1000, 1000}, {MaxTopicMessageBytes, MaxTopicMessageBytes}, {50 << 20, MaxTopicMessageBytes}} {
		if got := ProduceLimit(TopicInfo{MaxMessageBytes: tc.max}); got != tc.want {
			t.Errorf("ProduceLimit(%d) = %d, want %d", tc.max, got, tc.want)
		}
	}
}
