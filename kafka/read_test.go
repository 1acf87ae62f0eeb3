package kafka

import (
	"bytes"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

func fetchRequest(topic string, partition int32, offset int64, leaderEpoch int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 11, 0, 0, 1<<20 // no long-poll: answer at once
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = partition, offset, leaderEpoch, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestFetchAgainstTheFake: a fetch reads the partition from the broker on
// the leader only, answers the log's bounds and batches, and refuses in
// Kafka's order: the leader epoch before leadership (KIP-320), leadership
// before reading, the log's bounds after it.
func TestFetchAgainstTheFake(t *testing.T) {
	stored := batch("a", "b")
	log := broker.PartitionLog{HighWatermark: 10, LogStart: 2, LastStable: 8, Batches: [][]byte{stored},
		Aborted: []store.AbortedTxn{{ProducerID: 4, FirstOffset: 3}}}
	for _, tc := range []struct {
		name        string
		leaderID    string
		topic       string
		offset      int64
		epoch       int32
		outcome     command.TopicOutcome
		want        int16
		wantRead    bool
		wantRecords bool
	}{
		{name: "leader", leaderID: "1", topic: "orders", offset: 2, epoch: -1, wantRead: true, wantRecords: true},
		{name: "leader, current epoch", leaderID: "1", topic: "orders", offset: 2, epoch: 5, wantRead: true, wantRecords: true},
		{name: "follower", leaderID: "2", topic: "orders", offset: 2, epoch: -1, want: kerr.NotLeaderForPartition.Code},
		{name: "no leader", leaderID: "", topic: "orders", offset: 2, epoch: -1, want: kerr.NotLeaderForPartition.Code},
		{name: "older epoch, before leadership", leaderID: "2", topic: "orders", offset: 2, epoch: 4, want: kerr.FencedLeaderEpoch.Code},
		{name: "newer epoch", leaderID: "1", topic: "orders", offset: 2, epoch: 6, want: kerr.UnknownLeaderEpoch.Code},
		{name: "below the log start", leaderID: "1", topic: "orders", offset: 1, epoch: -1, want: kerr.OffsetOutOfRange.Code, wantRead: true},
		{name: "past the high watermark", leaderID: "1", topic: "orders", offset: 11, epoch: -1, want: kerr.OffsetOutOfRange.Code, wantRead: true},
		{name: "unknown topic", leaderID: "1", topic: "nope", offset: 0, epoch: -1, outcome: command.TopicUnknown,
			want: kerr.UnknownTopicOrPartition.Code, wantRead: true},
		{name: "internal topic is an empty log, not read", leaderID: "1", topic: consumerOffsetsTopic, offset: 0, epoch: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := newFakeBroker()
			fb.leaderID = tc.leaderID
			fb.read = func(topic string, partition int32, offset int64) (broker.PartitionLog, error) {
				l := log
				l.Outcome = tc.outcome
				return l, nil
			}
			c := newTestConn(t, newTestServer(t, fb, DefaultConfig()), nil)
			resp := roundTrip(t, c, fetchRequest(tc.topic, 0, tc.offset, tc.epoch)).(*kmsg.FetchResponse)
			if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Fatalf("answer %+v, want one partition", resp)
			}
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != tc.want {
				t.Fatalf("error %s, want %s", codeName(p.ErrorCode), codeName(tc.want))
			}
			if read := len(fb.reads) > 0; read != tc.wantRead {
				t.Fatalf("partition read: %v, want %v", read, tc.wantRead)
			}
			if got := bytes.Equal(p.RecordBatches, stored); got != tc.wantRecords {
				t.Fatalf("records returned: %v, want %v", got, tc.wantRecords)
			}
			if tc.wantRecords {
				if p.HighWatermark != 10 || p.LogStartOffset != 2 || p.LastStableOffset != 8 {
					t.Fatalf("bounds hw %d start %d lso %d, want 10, 2, 8", p.HighWatermark, p.LogStartOffset, p.LastStableOffset)
				}
				if len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].ProducerID != 4 || p.AbortedTransactions[0].FirstOffset != 3 {
					t.Fatalf("aborted %+v, want producer 4 from offset 3", p.AbortedTransactions)
				}
			}
			if tc.topic == consumerOffsetsTopic && (p.HighWatermark != 0 || p.LogStartOffset != 0 || len(p.RecordBatches) != 0) {
				t.Fatalf("internal topic answered %+v, want an empty log at 0", p)
			}
		})
	}
}

func listOffsetsRequest(version int16, topic string, timestamp int64, leaderEpoch int32, isolation int8) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.IsolationLevel = version, isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, timestamp, leaderEpoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestListOffsetsAgainstTheFake: earliest is the log start, latest the
// high watermark (the last stable offset for read_committed), a timestamp
// asks the broker; the answer carries the leader epoch (v4+); a follower
// or a stale epoch is refused.
func TestListOffsetsAgainstTheFake(t *testing.T) {
	for _, tc := range []struct {
		name       string
		leaderID   string
		version    int16
		topic      string
		timestamp  int64
		epoch      int32
		isolation  int8
		want       int16
		wantOffset int64
	}{
		{name: "earliest", leaderID: "1", version: 7, topic: "orders", timestamp: earliestTimestamp, epoch: -1, wantOffset: 2},
		{name: "latest", leaderID: "1", version: 7, topic: "orders", timestamp: latestTimestamp, epoch: -1, wantOffset: 10},
		{name: "latest read_committed", leaderID: "1", version: 7, topic: "orders", timestamp: latestTimestamp, epoch: -1, isolation: readCommitted, wantOffset: 8},
		{name: "by timestamp", leaderID: "1", version: 7, topic: "orders", timestamp: 1005, epoch: -1, wantOffset: 5},
		{name: "v0", leaderID: "1", version: 0, topic: "orders", timestamp: latestTimestamp, epoch: -1, wantOffset: 10},
		{name: "max timestamp is not served", leaderID: "1", version: 7, topic: "orders", timestamp: -3, epoch: -1, want: kerr.UnsupportedVersion.Code, wantOffset: -1},
		{name: "unknown topic by timestamp", leaderID: "1", version: 7, topic: "nope", timestamp: 1005, epoch: -1, want: kerr.UnknownTopicOrPartition.Code, wantOffset: -1},
		{name: "follower", leaderID: "2", version: 7, topic: "orders", timestamp: latestTimestamp, epoch: -1, want: kerr.NotLeaderForPartition.Code, wantOffset: -1},
		{name: "fenced epoch", leaderID: "1", version: 7, topic: "orders", timestamp: latestTimestamp, epoch: 3, want: kerr.FencedLeaderEpoch.Code, wantOffset: -1},
		{name: "epoch not checked before v4", leaderID: "1", version: 3, topic: "orders", timestamp: latestTimestamp, epoch: 3, wantOffset: 10},
		{name: "internal topic", leaderID: "1", version: 7, topic: consumerOffsetsTopic, timestamp: latestTimestamp, epoch: -1, wantOffset: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := newFakeBroker()
			fb.leaderID = tc.leaderID
			fb.read = func(string, int32, int64) (broker.PartitionLog, error) {
				return broker.PartitionLog{HighWatermark: 10, LogStart: 2, LastStable: 8}, nil
			}
			c := newTestConn(t, newTestServer(t, fb, DefaultConfig()), nil)
			resp := roundTrip(t, c, listOffsetsRequest(tc.version, tc.topic, tc.timestamp, tc.epoch, tc.isolation)).(*kmsg.ListOffsetsResponse)
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != tc.want {
				t.Fatalf("error %s, want %s", codeName(p.ErrorCode), codeName(tc.want))
			}
			offset := p.Offset
			if tc.version == 0 {
				if len(p.OldStyleOffsets) != 1 {
					t.Fatalf("v0 offsets %v, want one", p.OldStyleOffsets)
				}
				offset = p.OldStyleOffsets[0]
			}
			if offset != tc.wantOffset {
				t.Fatalf("offset %d, want %d", offset, tc.wantOffset)
			}
			if tc.version >= 4 && tc.want == 0 && p.LeaderEpoch != 5 {
				t.Fatalf("leader epoch %d, want the term 5", p.LeaderEpoch)
			}
		})
	}
}

func metadataRequest(autoCreate bool, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version, req.AllowAutoTopicCreation = 12, autoCreate
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// TestMetadataNamesTheLeader: brokers are the members with a Kafka address
// (this node under its advertised one), the raft leader leads every
// partition at the term as its epoch, and without a leader partitions
// answer LEADER_NOT_AVAILABLE.
func TestMetadataNamesTheLeader(t *testing.T) {
	for _, tc := range []struct {
		name       string
		leaderID   string
		wantLeader int32
		wantCode   int16
	}{
		{"this node leads", "1", 1, 0},
		{"another node leads", "2", 2, 0},
		{"no leader", "", -1, kerr.LeaderNotAvailable.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := newFakeBroker()
			fb.leaderID = tc.leaderID
			cfg := DefaultConfig()
			cfg.AdvertisedAddr = "kafka-1.example:19092"
			c := newTestConn(t, newTestServer(t, fb, cfg), nil)
			resp := roundTrip(t, c, metadataRequest(false, "orders")).(*kmsg.MetadataResponse)
			var brokers []string
			for _, b := range resp.Brokers {
				brokers = append(brokers, b.Host)
			}
			if !slices.Equal(brokers, []string{"kafka-1.example", "10.0.0.2"}) || resp.Brokers[0].Port != 19092 {
				t.Fatalf("brokers %+v", resp.Brokers)
			}
			if resp.ControllerID != tc.wantLeader {
				t.Fatalf("controller %d, want %d", resp.ControllerID, tc.wantLeader)
			}
			mt := resp.Topics[0]
			if mt.ErrorCode != 0 || len(mt.Partitions) != 3 || mt.TopicID != topicID(fb.topics["orders"]) {
				t.Fatalf("topic %+v, want orders with 3 partitions and its id", mt)
			}
			for _, p := range mt.Partitions {
				if p.Leader != tc.wantLeader || p.ErrorCode != tc.wantCode {
					t.Fatalf("partition %d: leader %d (%s), want %d (%s)", p.Partition, p.Leader, codeName(p.ErrorCode), tc.wantLeader, codeName(tc.wantCode))
				}
				if tc.wantLeader >= 0 && (p.LeaderEpoch != 5 || !slices.Equal(p.Replicas, []int32{tc.wantLeader})) {
					t.Fatalf("partition %d: epoch %d replicas %v", p.Partition, p.LeaderEpoch, p.Replicas)
				}
			}
		})
	}
}

// TestMetadataTopics: every topic plus the internal one when asked for
// all; a missing topic is created only when the client and the node allow
// it, and only by the leader; a name no topic may have is refused.
func TestMetadataTopics(t *testing.T) {
	fb := newFakeBroker()
	c := newTestConn(t, newTestServer(t, fb, DefaultConfig()), nil)

	all := roundTrip(t, c, &kmsg.MetadataRequest{Version: 12}).(*kmsg.MetadataResponse) // null topics: all
	var names []string
	for _, mt := range all.Topics {
		names = append(names, *mt.Topic)
		if mt.IsInternal != (*mt.Topic == consumerOffsetsTopic) {
			t.Errorf("%s internal: %v", *mt.Topic, mt.IsInternal)
		}
	}
	if !slices.Equal(names, []string{"orders", consumerOffsetsTopic}) {
		t.Fatalf("all topics %v", names)
	}

	for _, tc := range []struct {
		name       string
		topic      string
		allow      bool
		leaderID   string
		want       int16
		wantExists bool
	}{
		{"missing, client does not allow creation", "fresh1", false, "1", kerr.UnknownTopicOrPartition.Code, false},
		{"missing, created", "fresh2", true, "1", 0, true},
		{"missing, follower cannot create", "fresh3", true, "2", kerr.LeaderNotAvailable.Code, false},
		{"invalid name", "bad name", true, "1", kerr.InvalidTopicException.Code, false},
		{"internal topic is listed, never created", consumerOffsetsTopic, true, "1", 0, false},
	} {
		fb.leaderID = tc.leaderID
		mt := roundTrip(t, c, metadataRequest(tc.allow, tc.topic)).(*kmsg.MetadataResponse).Topics[0]
		if mt.ErrorCode != tc.want {
			t.Errorf("%s: error %s, want %s", tc.name, codeName(mt.ErrorCode), codeName(tc.want))
		}
		if _, exists := fb.topics[tc.topic]; exists != tc.wantExists {
			t.Errorf("%s: topic exists %v, want %v", tc.name, exists, tc.wantExists)
		}
	}
}
