package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
)

func init() { register(kmsg.CreatePartitions.Int16(), 0, 3, answerNow(handleCreatePartitions)) }

func handleCreatePartitions(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewCreatePartitionsResponseTopic()
		t.Topic = rt.Topic
		switch {
		case c.topicDenied(auth.Manage, rt.Topic) != 0:
			t.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case req.ValidateOnly:
			info, ok, err := c.s.lookupTopic(rt.Topic)
			switch {
			case err != nil:
				t.ErrorCode = lookupCode(err)
			case !ok:
				t.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rt.Count <= info.Partitions:
				t.ErrorCode = kerr.InvalidPartitions.Code
			}
		default:
			outcome, err := c.s.writer(c.s.placedIn(rt.Topic)).AddPartitions(rt.Topic, rt.Count)
			if err != nil {
				t.ErrorCode = kerr.NotController.Code
			} else {
				t.ErrorCode = outcomeCode(outcome)
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}
