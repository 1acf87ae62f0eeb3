package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/command"
)

func init() { register(kmsg.DeleteRecords.Int16(), 0, 2, answerNow(handleDeleteRecords)) }

// handleDeleteRecords moves each partition's log start offset to the
// offset asked (-1: the high watermark). Reads below it answer
// OFFSET_OUT_OF_RANGE at once; the disk space goes when retention drops
// the segments.
func handleDeleteRecords(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewDeleteRecordsResponseTopic()
		t.Topic = rt.Topic
		code := c.topicDenied(auth.Manage, rt.Topic)
		tb := c.s.topic(rt.Topic)
		if code == 0 && !tb.IsLeader() {
			code = kerr.NotLeaderForPartition.Code
		}
		var results []command.DeleteRecordsResult
		if code == 0 {
			before := make([]command.RecordsBefore, len(rt.Partitions))
			for i, p := range rt.Partitions {
				before[i] = command.RecordsBefore{Partition: p.Partition, Offset: p.Offset}
			}
			var err error
			if results, err = tb.DeleteRecords(rt.Topic, before); err != nil {
				code = errCode(err)
			}
		}
		for i, rp := range rt.Partitions {
			p := kmsg.NewDeleteRecordsResponseTopicPartition()
			p.Partition, p.LowWatermark, p.ErrorCode = rp.Partition, -1, code
			if code == 0 {
				p.LowWatermark, p.ErrorCode = results[i].LowWatermark, outcomeCode(results[i].Outcome)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}
