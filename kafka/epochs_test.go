package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's rule (Partition.checkCurrentLeaderEpoch): -1 is not checked, an
// older epoch is fenced, a newer one unknown.
func TestLeaderEpochCode(t *testing.T) {
	for _, c := range []struct {
		requested, current int32
		want               int16
	}{
		{-1, 5, 0},
		{5, 5, 0},
		{4, 5, kerr.FencedLeaderEpoch.Code},
		{0, 5, kerr.FencedLeaderEpoch.Code},
		{6, 5, kerr.UnknownLeaderEpoch.Code},
	} {
		if got := leaderEpochCode(c.requested, c.current); got != c.want {
			t.Errorf("requested %d, current %d: code %d, want %d", c.requested, c.current, got, c.want)
		}
	}
}

func TestLogDirTopicPartitions(t *testing.T) {
	sizes := []int64{10, 20, 30}
	rt, ok := logDirTopic("t", sizes, nil, true)
	if !ok || len(rt.Partitions) != 3 || rt.Partitions[2].Size != 30 || rt.Partitions[1].Partition != 1 {
		t.Fatalf("all partitions: %+v", rt.Partitions)
	}
	// Asked partitions once each; ones that do not exist are left out.
	rt, ok = logDirTopic("t", sizes, []int32{2, 7, -1, 2, 0}, false)
	if !ok || len(rt.Partitions) != 2 || rt.Partitions[0].Partition != 2 || rt.Partitions[0].Size != 30 || rt.Partitions[1].Partition != 0 {
		t.Fatalf("asked partitions: %+v", rt.Partitions)
	}
	if _, ok := logDirTopic("t", sizes, []int32{3}, false); ok {
		t.Fatal("a topic with none of the asked partitions is listed")
	}
}

// The internal topic is an empty log: only offset 0 is in range.
func TestInternalTopicIsAnEmptyLog(t *testing.T) {
	p := kmsg.NewFetchResponseTopicPartition()
	rp := kmsg.NewFetchRequestTopicPartition()
	emptyFetch(&p, rp)
	if p.ErrorCode != 0 || p.HighWatermark != 0 || p.LogStartOffset != 0 || p.LastStableOffset != 0 {
		t.Fatalf("fetch at 0: %+v", p)
	}
	p, rp.FetchOffset = kmsg.NewFetchResponseTopicPartition(), 1
	if emptyFetch(&p, rp); p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch at 1: code %d", p.ErrorCode)
	}
	p, rp.Partition, rp.FetchOffset = kmsg.NewFetchResponseTopicPartition(), consumerOffsetsPartitions, 0
	if emptyFetch(&p, rp); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("fetch of partition %d: code %d", rp.Partition, p.ErrorCode)
	}
	for _, ts := range []int64{latestTimestamp, earliestTimestamp} {
		lp := kmsg.NewListOffsetsResponseTopicPartition()
		lp.Offset = -1
		lr := kmsg.NewListOffsetsRequestTopicPartition()
		lr.Timestamp = ts
		if emptyListOffset(lr, &lp); lp.ErrorCode != 0 || lp.Offset != 0 {
			t.Fatalf("list offset %d: %+v", ts, lp)
		}
	}
	mt := internalTopicMetadata(3, 7)
	if !mt.IsInternal || *mt.Topic != consumerOffsetsTopic || len(mt.Partitions) != consumerOffsetsPartitions ||
		mt.Partitions[0].Leader != 3 || mt.Partitions[0].LeaderEpoch != 7 || mt.TopicID == ([16]byte{}) {
		t.Fatalf("metadata: %+v", mt)
	}
}
