package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
)

func init() { register(kmsg.OffsetDelete.Int16(), 0, 0, answerNow(handleOffsetDelete)) }

func handleOffsetDelete(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if !broker.ValidGroupName(req.Group) {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	if _, coordinating := c.coordinator(req.Group); !coordinating {
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp, nil
	}
	var offsets []command.OffsetCommit
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetDeleteResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetDeleteResponseTopicPartition()
			p.Partition = rp.Partition
			if !broker.ValidTopicName(rt.Topic) {
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				offsets = append(offsets, command.OffsetCommit{Topic: rt.Topic, Partition: rp.Partition})
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if len(offsets) == 0 {
		return resp, nil
	}
	if _, err := c.s.deleteOffsets(req.Group, false, offsets); err != nil {
		resp.ErrorCode = kerr.NotCoordinator.Code
	}
	return resp, nil
}
