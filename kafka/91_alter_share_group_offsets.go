package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/command"
)

func init() {
	register(kmsg.AlterShareGroupOffsets.Int16(), 0, 0, answerNow(handleAlterShareGroupOffsets))
}

// handleAlterShareGroupOffsets moves an empty share group's start offsets:
// the group's positions, as an offset commit sets them (the group need not
// exist yet, as in Kafka).
func handleAlterShareGroupOffsets(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if resp.ErrorCode, resp.ErrorMessage = c.shareOffsetsRefusal(req.GroupID); resp.ErrorCode != 0 {
		return resp, nil
	}
	var offsets []command.OffsetCommit
	var where []*kmsg.AlterShareGroupOffsetsResponseTopicPartition
	for _, rt := range req.Topics {
		resp.Topics = append(resp.Topics, kmsg.NewAlterShareGroupOffsetsResponseTopic())
		t := &resp.Topics[len(resp.Topics)-1]
		t.Topic = rt.Topic
		if info, ok, err := c.s.lookupTopic(rt.Topic); err == nil && ok {
			t.TopicID = topicID(info)
		}
		t.Partitions = make([]kmsg.AlterShareGroupOffsetsResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			p := &t.Partitions[i]
			*p = kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			p.Partition = rp.Partition
			switch {
			case c.topicDenied(auth.Read, rt.Topic) != 0:
				p.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case rp.StartOffset < 0:
				p.ErrorCode, p.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("StartOffset must not be negative.")
			default:
				offsets = append(offsets, command.OffsetCommit{Topic: rt.Topic, Partition: rp.Partition, Offset: rp.StartOffset, LeaderEpoch: -1})
				where = append(where, p)
			}
		}
	}
	if len(offsets) == 0 {
		return resp, nil
	}
	outcomes, err := c.s.commitOffsets(req.GroupID, offsets)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(err), kmsg.StringPtr(err.Error())
		return resp, nil
	}
	for i, o := range outcomes {
		where[i].ErrorCode = outcomeCode(o)
	}
	return resp, nil
}
