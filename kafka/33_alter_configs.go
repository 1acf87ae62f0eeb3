package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
)

func init() { register(kmsg.AlterConfigs.Int16(), 0, 2, answerNow(handleAlterConfigs)) }

// handleAlterConfigs replaces a topic's configs: those the request leaves
// out go back to their defaults, as in Kafka.
func handleAlterConfigs(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		r := kmsg.NewAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		if rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig {
			changes := make([]command.GroupConfigChange, 0, len(rr.Configs))
			for _, cfg := range rr.Configs {
				changes = append(changes, command.GroupConfigChange{Name: cfg.Name, Value: derefString(cfg.Value)})
			}
			r.ErrorCode, r.ErrorMessage = c.alterGroupConfig(rr.ResourceName, true, req.ValidateOnly, changes)
			resp.Resources = append(resp.Resources, r)
			continue
		}
		r.ErrorCode, r.ErrorMessage = c.alterTopic(rr.ResourceType, rr.ResourceName, req.ValidateOnly, func(f command.LogFormat) ([]command.TopicSetting, string) {
			given := map[string]command.TopicSetting{}
			for _, cfg := range rr.Configs {
				s, stored, refusal := topicSetting(cfg.Name, cfg.Value, f)
				if _, twice := given[cfg.Name]; twice {
					refusal = cfg.Name + " is named twice"
				}
				if refusal != "" {
					return nil, refusal
				}
				if stored {
					given[s.Name] = s
				}
			}
			var settings []command.TopicSetting
			for _, name := range storedConfigs(f) {
				settings = append(settings, command.TopicSetting{Name: name, Value: given[name].Value}) // 0: the default
			}
			return settings, ""
		})
		resp.Resources = append(resp.Resources, r)
	}
	return resp, nil
}

// alterTopic checks and applies one resource of AlterConfigs or
// IncrementalAlterConfigs; settings works out what to change, or why not.
func (c *conn) alterTopic(kind kmsg.ConfigResourceType, topic string, validateOnly bool, settings func(command.LogFormat) ([]command.TopicSetting, string)) (int16, *string) {
	refuse := func(code int16, msg string) (int16, *string) { return code, kmsg.StringPtr(msg) }
	switch {
	case kind == kmsg.ConfigResourceTypeBroker:
		return refuse(kerr.InvalidRequest.Code, "broker configs are set with waggle serve's flags, not over Kafka")
	case kind != kmsg.ConfigResourceTypeTopic:
		return refuse(kerr.InvalidRequest.Code, "only topic configs can be altered")
	case c.topicDenied(auth.Manage, topic) != 0:
		return kerr.TopicAuthorizationFailed.Code, nil
	}
	format := c.s.topic(topic).LogFormat()
	if format < command.LogFormat2 {
		return refuse(kerr.InvalidRequest.Code, broker.ErrUpgradeInProgress.Error())
	}
	s, refusal := settings(format)
	if refusal != "" {
		return refuse(kerr.InvalidConfig.Code, refusal)
	}
	seen := map[string]bool{}
	for _, setting := range s {
		if seen[setting.Name] {
			return refuse(kerr.InvalidRequest.Code, setting.Name+" is named twice")
		}
		seen[setting.Name] = true
	}
	if validateOnly {
		switch _, ok, err := c.s.lookupTopic(topic); {
		case err != nil:
			return lookupCode(err), nil
		case !ok:
			return kerr.UnknownTopicOrPartition.Code, nil
		}
		return 0, nil
	}
	outcome, err := c.s.writer(c.s.placedIn(topic)).AlterTopic(topic, s)
	if err != nil {
		return refuse(errCode(err), err.Error())
	}
	return outcomeCode(outcome), nil
}
