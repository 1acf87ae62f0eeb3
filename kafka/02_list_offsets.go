package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
)

func init() { register(kmsg.ListOffsets.Int16(), 0, 10, answerNow(handleListOffsets)) }

// Special timestamps of ListOffsets.
const (
	latestTimestamp   = -1
	earliestTimestamp = -2
)

func handleListOffsets(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		leader, epoch := c.s.topic(rt.Topic).IsLeader(), c.s.topic(rt.Topic).LeaderEpoch()
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition, p.Offset, p.Timestamp = rp.Partition, -1, -1
			if p.ErrorCode = c.topicDenied(auth.Read, rt.Topic); p.ErrorCode != 0 {
				// not told where it is
			} else if req.Version >= 4 && leaderEpochCode(rp.CurrentLeaderEpoch, epoch) != 0 {
				p.ErrorCode = leaderEpochCode(rp.CurrentLeaderEpoch, epoch) // KIP-320
			} else if !leader {
				p.ErrorCode = kerr.NotLeaderForPartition.Code
			} else if isInternalTopic(rt.Topic) {
				emptyListOffset(rp, &p)
			} else {
				c.listOffset(rt.Topic, rp, req.IsolationLevel == readCommitted, &p)
			}
			if p.ErrorCode == 0 && p.Offset >= 0 {
				// The epoch of the offset found (v4+). Every epoch up to the
				// current one ends at the high watermark (see
				// 23_offset_for_leader_epoch.go), so the current one is
				// true of any offset.
				p.LeaderEpoch = epoch
			}
			if req.Version == 0 && p.ErrorCode == 0 {
				p.OldStyleOffsets = []int64{p.Offset}
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

func (c *conn) listOffset(topic string, rp kmsg.ListOffsetsRequestTopicPartition, committed bool, p *kmsg.ListOffsetsResponseTopicPartition) {
	switch rp.Timestamp {
	case latestTimestamp, earliestTimestamp:
		log, err := c.s.topic(topic).ReadPartition(topic, rp.Partition, -1, 1, false)
		if err != nil {
			p.ErrorCode = errCode(err)
			return
		}
		if p.ErrorCode = outcomeCode(log.Outcome); p.ErrorCode != 0 {
			return
		}
		p.Offset = log.HighWatermark
		if committed {
			p.Offset = log.LastStable // a read_committed consumer's end (KIP-98)
		}
		if rp.Timestamp == earliestTimestamp {
			p.Offset = log.LogStart
		}
	default:
		if rp.Timestamp < 0 {
			p.ErrorCode = kerr.UnsupportedVersion.Code // -3 (max timestamp) and below
			return
		}
		offset, ts, outcome, err := c.s.topic(topic).OffsetForTime(topic, rp.Partition, rp.Timestamp)
		if err != nil {
			p.ErrorCode = errCode(err)
			return
		}
		p.ErrorCode, p.Offset, p.Timestamp = outcomeCode(outcome), offset, ts
	}
}
