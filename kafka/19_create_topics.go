package kafka

import (
	"errors"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
)

func init() { register(kmsg.CreateTopics.Int16(), 0, 7, answerNow(handleCreateTopics)) }

// Topic configs waggle understands; any other is refused with INVALID_CONFIG.
const (
	configRetentionMs     = "retention.ms"
	configRetentionBytes  = "retention.bytes"
	configSegmentBytes    = "segment.bytes"
	configSegmentMs       = "segment.ms"
	configMaxMessageBytes = "max.message.bytes"
	configCleanupPolicy   = "cleanup.policy"
)

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
			if infos, err := c.s.svc.Topics([]string{rt.Topic}); err == nil && len(infos) == 1 {
				t.TopicID, t.NumPartitions, t.ReplicationFactor = topicID(infos[0]), infos[0].Partitions, 1
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
	partitions := rt.NumPartitions
	if partitions == -1 {
		partitions = c.s.cfg.DefaultPartitions
	}
	if partitions <= 0 {
		return kerr.InvalidPartitions.Code, "partition count must be positive"
	}
	var tc broker.TopicConfig
	for _, cfg := range rt.Configs {
		if cfg.Value == nil {
			continue
		}
		switch cfg.Name {
		case configRetentionMs:
			v, err := strconv.ParseInt(*cfg.Value, 10, 64)
			if err != nil || v < -1 {
				return kerr.InvalidConfig.Code, "retention.ms must be a number of milliseconds or -1"
			}
			tc.RetentionMs = v
		case configRetentionBytes:
			v, err := strconv.ParseInt(*cfg.Value, 10, 64)
			if err != nil || v < -1 {
				return kerr.InvalidConfig.Code, "retention.bytes must be a number of bytes or -1"
			}
			tc.RetentionBytes = v
		case configSegmentBytes:
			v, err := strconv.ParseInt(*cfg.Value, 10, 64)
			if err != nil || v < broker.MinSegmentBytes || v > 1<<30 {
				return kerr.InvalidConfig.Code, "segment.bytes must be a number from " + strconv.Itoa(broker.MinSegmentBytes) + " to 1073741824"
			}
			tc.SegmentBytes = v
		case configSegmentMs:
			v, err := strconv.ParseInt(*cfg.Value, 10, 64)
			if err != nil || v < 1000 {
				return kerr.InvalidConfig.Code, "segment.ms must be a number of milliseconds, at least 1000"
			}
			tc.SegmentMs = v
		case configMaxMessageBytes:
			v, err := strconv.ParseInt(*cfg.Value, 10, 32)
			if err != nil || v <= 0 || v > broker.MaxTopicMessageBytes {
				return kerr.InvalidConfig.Code, "max.message.bytes must be a number from 1 to " + strconv.Itoa(broker.MaxTopicMessageBytes)
			}
			tc.MaxMessageBytes = int32(v)
		case configCleanupPolicy:
			if *cfg.Value != "delete" {
				return kerr.InvalidConfig.Code, "only cleanup.policy=delete is supported"
			}
		default:
			return kerr.InvalidConfig.Code, "unsupported topic config " + cfg.Name
		}
	}
	if !c.s.svc.IsLeader() {
		return kerr.NotController.Code, "this node is not the leader"
	}
	if validateOnly {
		if infos, err := c.s.svc.Topics([]string{rt.Topic}); err == nil && len(infos) > 0 {
			return kerr.TopicAlreadyExists.Code, ""
		}
		return 0, ""
	}
	outcome, err := c.s.svc.CreateTopic(rt.Topic, partitions, tc)
	if errors.Is(err, broker.ErrInvalid) {
		return kerr.InvalidRequest.Code, err.Error()
	}
	if err != nil {
		return kerr.NotController.Code, err.Error()
	}
	return outcomeCode(outcome), ""
}
