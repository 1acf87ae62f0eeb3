package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/command"
)

func init() {
	register(kmsg.DeleteShareGroupOffsets.Int16(), 0, 0, answerNow(handleDeleteShareGroupOffsets))
}

// handleDeleteShareGroupOffsets forgets an empty share group's positions
// in whole topics: it starts there again by share.auto.offset.reset.
func handleDeleteShareGroupOffsets(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if resp.ErrorCode, resp.ErrorMessage = c.shareOffsetsRefusal(req.GroupID); resp.ErrorCode != 0 {
		return resp, nil
	}
	var offsets []command.OffsetCommit
	for _, rt := range req.Topics {
		t := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		t.Topic = rt.Topic
		info, ok, err := c.s.lookupTopic(rt.Topic)
		switch {
		case err != nil:
			t.ErrorCode = lookupCode(err)
		case !ok:
			t.ErrorCode = kerr.UnknownTopicOrPartition.Code
		case c.topicDenied(auth.Read, rt.Topic) != 0:
			t.ErrorCode = kerr.TopicAuthorizationFailed.Code
		default:
			t.TopicID = topicID(info)
			for p := range info.Partitions {
				offsets = append(offsets, command.OffsetCommit{Topic: rt.Topic, Partition: p})
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	if len(offsets) > 0 {
		if _, err := c.s.deleteOffsets(req.GroupID, false, offsets); err != nil {
			resp.ErrorCode, resp.ErrorMessage = errCode(err), kmsg.StringPtr(err.Error())
		}
	}
	return resp, nil
}
