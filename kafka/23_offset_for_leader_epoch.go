package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
)

// OffsetForLeaderEpoch v0–4: v1 answers the epoch, v2 carries the
// client's current leader epoch (KIP-320), v3 the replica id, v4 is
// flexible. librdkafka sends v2, franz-go the newest.
func init() {
	register(kmsg.OffsetForLeaderEpoch.Int16(), 0, 4, answerNow(handleOffsetForLeaderEpoch))
}

// handleOffsetForLeaderEpoch tells a consumer where an epoch of a
// partition ends, which it compares with its position to detect a
// truncated log (KIP-320).
//
// Leader epochs are raft terms (broker.Service.LeaderEpoch). Raft never
// truncates a committed entry and readers only see committed records, so
// whatever a consumer read in any epoch is still in the log, at the same
// offsets, however many leaders came since. waggle keeps no record of
// where each term's appends began, so for an epoch up to the current one
// it answers that epoch with the partition's high watermark as its end:
// never below a consumer's position, so never a false truncation. (Kafka
// answers the start of the next epoch for an older epoch; a client only
// tests the end against its position, and both are at or past it.) An
// epoch above the current one, or -1, answers Kafka's UNDEFINED: epoch
// and end offset -1, no error. The replica id (v3+) is not looked at:
// waggle has no Kafka follower replicas, and any reader's end is the same.
func handleOffsetForLeaderEpoch(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		tb := c.s.topic(rt.Topic)
		leader, epoch := tb.IsLeader(), tb.LeaderEpoch()
		t := kmsg.NewOffsetForLeaderEpochResponseTopic()
		t.Topic = rt.Topic
		denied := c.topicDenied(auth.Read, rt.Topic)
		var partitions int32 // 0: unknown topic
		if denied == 0 {
			if isInternalTopic(rt.Topic) {
				partitions = consumerOffsetsPartitions
			} else if infos, err := tb.Topics([]string{rt.Topic}); err != nil {
				return nil, err
			} else if len(infos) == 1 {
				partitions = infos[0].Partitions
			}
		}
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			p.Partition, p.LeaderEpoch, p.EndOffset = rp.Partition, -1, -1
			current := int32(-1)
			if req.Version >= 2 {
				current = rp.CurrentLeaderEpoch
			}
			switch {
			case denied != 0:
				p.ErrorCode = denied
			case rp.Partition < 0 || rp.Partition >= partitions:
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case leaderEpochCode(current, epoch) != 0:
				p.ErrorCode = leaderEpochCode(current, epoch)
			case !leader:
				p.ErrorCode = kerr.NotLeaderForPartition.Code
			case !tb.LeaderCaughtUp():
				// A new leader still applying its log may have a high
				// watermark below what consumers read from the old one:
				// that end would look like a truncation. Retriable: clients
				// refresh metadata and ask again.
				p.ErrorCode = kerr.NotLeaderForPartition.Code
			case rp.LeaderEpoch < 0 || rp.LeaderEpoch > epoch:
				// UNDEFINED_EPOCH_OFFSET: not an epoch this log has had.
			case isInternalTopic(rt.Topic):
				p.LeaderEpoch, p.EndOffset = rp.LeaderEpoch, 0
			default:
				log, err := tb.ReadPartition(rt.Topic, rp.Partition, -1, 1, false)
				if err != nil {
					p.ErrorCode = errCode(err)
				} else if p.ErrorCode = outcomeCode(log.Outcome); p.ErrorCode == 0 {
					p.LeaderEpoch, p.EndOffset = rp.LeaderEpoch, log.HighWatermark
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}
