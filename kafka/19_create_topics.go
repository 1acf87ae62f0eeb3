package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
)

func init() { register(kmsg.CreateTopics.Int16(), 0, 7, answerNow(handleCreateTopics)) }

func handleCreateTopics(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewCreateTopicsResponseTopic()
		t.Topic = rt.Topic
		code, msg := c.topicDenied(auth.Manage, rt.Topic), ""
		if code == 0 {
			code, msg = c.createTopic(rt, req.ValidateOnly)
		}
		t.ErrorCode = code
		if msg != "" {
			t.ErrorMessage = kmsg.StringPtr(msg)
		}
		if code == 0 {
			if info, ok, err := c.s.lookupTopic(rt.Topic); err == nil && ok {
				t.TopicID, t.NumPartitions, t.ReplicationFactor = topicID(info), info.Partitions, 1
				// v5+ echoes the topic's configs as DescribeConfigs shows them.
				for _, dc := range topicConfigs(info, c.s.svc.TopicDefaults(), nil, false, false) {
					cc := kmsg.NewCreateTopicsResponseTopicConfig()
					cc.Name, cc.Value, cc.ReadOnly, cc.Source = dc.Name, dc.Value, dc.ReadOnly, int8(dc.Source)
					t.Configs = append(t.Configs, cc)
				}
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

func (c *conn) createTopic(rt kmsg.CreateTopicsRequestTopic, validateOnly bool) (int16, string) {
	if !broker.ValidTopicName(rt.Topic) {
		return kerr.InvalidTopicException.Code, "topic names are 1-249 characters of [a-zA-Z0-9._-]"
	}
	if isInternalTopic(rt.Topic) {
		return kerr.TopicAlreadyExists.Code, "an internal topic"
	}
	partitions := rt.NumPartitions
	if partitions == -1 {
		partitions = c.s.cfg.DefaultPartitions
	}
	if partitions <= 0 {
		return kerr.InvalidPartitions.Code, "partition count must be positive"
	}
	var settings []command.TopicSetting
	format := c.s.topic(rt.Topic).LogFormat()
	for _, cfg := range rt.Configs {
		if cfg.Value == nil {
			continue
		}
		setting, stored, refusal := topicSetting(cfg.Name, cfg.Value, format)
		if refusal != "" {
			return kerr.InvalidConfig.Code, refusal
		}
		if stored {
			settings = append(settings, setting)
		}
	}
	if validateOnly {
		switch _, ok, err := c.s.lookupTopic(rt.Topic); {
		case err != nil:
			return lookupCode(err), err.Error()
		case ok:
			return kerr.TopicAlreadyExists.Code, ""
		}
		return 0, ""
	}
	// Written by the leader of the topic's raft group, forwarded there from
	// any other broker (KIP-590).
	outcome, err := c.s.writer(c.s.placedIn(rt.Topic)).CreateTopic(rt.Topic, partitions, settings)
	if errors.Is(err, broker.ErrInvalid) {
		return kerr.InvalidRequest.Code, err.Error()
	}
	if err != nil {
		return kerr.NotController.Code, err.Error()
	}
	return outcomeCode(outcome), ""
}
