package kafka

import (
	"crypto/sha256"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/broker"
)

// consumerOffsetsTopic is Kafka's internal topic of committed offsets.
// waggle keeps committed offsets in its replicated state, not in a topic,
// but Metadata lists the topic, marked internal, as Kafka does: tools and
// clients filter on IsInternal (kcat -L, kafka-topics.sh --exclude-internal,
// franz-go's regex consumers), and some look for it to tell a Kafka
// cluster. It is no queue. Over Kafka it behaves as a topic of
// consumerOffsetsPartitions empty partitions that clients may not write:
//
//   - Metadata lists it when asked for all topics (or by name or id), led
//     by the raft leader like every partition; it is never auto-created.
//   - Produce answers INVALID_TOPIC_EXCEPTION, as Kafka does for a client
//     write to an internal topic (ReplicaManager: "Cannot append to
//     internal topic").
//   - CreateTopics answers TOPIC_ALREADY_EXISTS (it exists); DeleteTopics
//     INVALID_TOPIC_EXCEPTION.
//   - Fetch, ListOffsets and OffsetForLeaderEpoch answer an empty log:
//     log start, high watermark and last stable offset 0; DescribeLogDirs
//     a size of 0.
//   - OffsetCommit of offset 0 is answered without an error and stores
//     nothing (no commit reads the same); other offsets answer
//     UNKNOWN_TOPIC_OR_PARTITION. A KIP-848 pattern may assign it.
//
// A queue of the same name made over HTTP is not seen over Kafka.
const consumerOffsetsTopic = "__consumer_offsets"

// consumerOffsetsPartitions is the internal topic's partition count. Kafka
// defaults to 50 (offsets.topic.num.partitions); with nothing in it one
// partition says as much.
const consumerOffsetsPartitions = 1

// isInternalTopic reports whether name is the internal topic.
func isInternalTopic(name string) bool { return name == consumerOffsetsTopic }

// internalTopic describes the internal topic as a TopicInfo, for the
// code that looks topics up by id.
func internalTopic() broker.TopicInfo {
	return broker.TopicInfo{Name: consumerOffsetsTopic, Partitions: consumerOffsetsPartitions}
}

// internalTopicID is the internal topic's KIP-516 id: fixed, and derived
// apart from queue ids (topicID), so no queue ever shares it.
var internalTopicID = func() [16]byte {
	sum := sha256.Sum256([]byte("waggle internal topic " + consumerOffsetsTopic))
	var id [16]byte
	copy(id[:], sum[:16])
	return id
}()

// internalTopicMetadata is the internal topic's Metadata entry.
func internalTopicMetadata(leader, epoch int32) kmsg.MetadataResponseTopic {
	mt := topicMetadata(internalTopic(), leader, epoch)
	mt.TopicID = internalTopicID
	mt.IsInternal = true
	return mt
}

// emptyFetch answers a fetch from an internal topic partition: an empty
// log, so only offset 0 is in range.
func emptyFetch(p *kmsg.FetchResponseTopicPartition, rp kmsg.FetchRequestTopicPartition) {
	if rp.Partition < 0 || rp.Partition >= consumerOffsetsPartitions {
		p.ErrorCode = kerr.UnknownTopicOrPartition.Code
		return
	}
	p.HighWatermark, p.LastStableOffset, p.LogStartOffset = 0, 0, 0
	if rp.FetchOffset != 0 {
		p.ErrorCode = kerr.OffsetOutOfRange.Code
	}
}

// emptyListOffset answers ListOffsets for an internal topic partition:
// earliest and latest are 0, no record has any timestamp.
func emptyListOffset(rp kmsg.ListOffsetsRequestTopicPartition, p *kmsg.ListOffsetsResponseTopicPartition) {
	switch {
	case rp.Partition < 0 || rp.Partition >= consumerOffsetsPartitions:
		p.ErrorCode = kerr.UnknownTopicOrPartition.Code
	case rp.Timestamp == latestTimestamp || rp.Timestamp == earliestTimestamp:
		p.Offset = 0
	case rp.Timestamp < 0:
		p.ErrorCode = kerr.UnsupportedVersion.Code
	}
}

// never is a signal that never fires: a long-poll on the internal topic
// alone waits out its MaxWait instead of answering at once (which would
// make a consumer of it spin).
var never = make(chan struct{})
