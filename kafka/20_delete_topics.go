package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
)

func init() { register(kmsg.DeleteTopics.Int16(), 0, 6, answerNow(handleDeleteTopics)) }

func handleDeleteTopics(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	for _, n := range req.TopicNames { // v0–v5
		targets = append(targets, target{name: kmsg.StringPtr(n)})
	}
	for _, t := range req.Topics { // v6+: by name or id
		targets = append(targets, target{name: t.Topic, id: t.TopicID})
	}
	for _, tg := range targets {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = tg.name, tg.id
		name := ""
		if tg.name != nil {
			name = *tg.name
		} else if info, ok, err := c.topicByID(tg.id); err == nil && ok {
			name = info.Name
			rt.Topic = kmsg.StringPtr(name)
		}
		switch {
		case name == "":
			rt.ErrorCode = kerr.UnknownTopicID.Code
		case c.topicDenied(auth.Manage, name) != 0:
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case isInternalTopic(name):
			rt.ErrorCode = kerr.InvalidTopicException.Code
		default:
			outcome, err := c.s.writer(c.s.placedIn(name)).DeleteTopic(context.Background(), name)
			if err != nil {
				rt.ErrorCode = kerr.NotController.Code
			} else {
				rt.ErrorCode = outcomeCode(outcome)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
