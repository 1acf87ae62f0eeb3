package kafka

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/store"
)

func init() { register(kmsg.DescribeConfigs.Int16(), 0, 4, answerNow(handleDescribeConfigs)) }

func handleDescribeConfigs(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	var topics []string
	for _, rr := range req.Resources {
		if rr.ResourceType == kmsg.ConfigResourceTypeTopic {
			topics = append(topics, rr.ResourceName)
		}
	}
	c.s.catchUpGroups(topics)
	for _, rr := range req.Resources {
		r := kmsg.NewDescribeConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			if !c.describable(rr.ResourceName) {
				r.ErrorCode = kerr.TopicAuthorizationFailed.Code
				break
			}
			info, ok, err := c.s.lookupTopic(rr.ResourceName)
			if err != nil {
				r.ErrorCode = lookupCode(err)
				break
			}
			if !ok {
				r.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			r.Configs = topicConfigs(info, c.s.svc.TopicDefaults(), rr.ConfigNames, req.IncludeSynonyms, req.IncludeDocumentation)
		case kmsg.ConfigResourceTypeBroker:
			r.Configs = c.s.brokerConfigs(rr.ConfigNames, req.IncludeDocumentation)
		case kmsg.ConfigResourceTypeGroupConfig:
			if r.ErrorCode = c.groupDenied(auth.Read, rr.ResourceName); r.ErrorCode != 0 {
				break
			}
			set, err := c.s.groupConfig(rr.ResourceName)
			if err != nil {
				r.ErrorCode = lookupCode(err)
				break
			}
			r.Configs = c.s.describeGroupConfigs(set, rr.ConfigNames, req.IncludeDocumentation)
		default:
			r.ErrorCode = kerr.InvalidRequest.Code
		}
		resp.Resources = append(resp.Resources, r)
	}
	return resp, nil
}

// topicConfigs answers a topic's configs (all of Kafka's topic configs,
// or those named): each with its value in force, whether the topic set it,
// and the broker default behind it as a synonym (v1+, KIP-226).
func topicConfigs(t, defaults broker.TopicInfo, names []string, synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, d := range topicConfigDefs {
		if len(names) > 0 && !slices.Contains(names, d.name) {
			continue
		}
		value, set := d.show(t)
		def, _ := d.show(defaults)
		cfg := kmsg.NewDescribeConfigsResponseResourceConfig()
		cfg.Name, cfg.Value, cfg.IsDefault, cfg.ReadOnly = d.name, kmsg.StringPtr(value), !set, false
		cfg.Source, cfg.ConfigType = kmsg.ConfigSourceDefaultConfig, d.typ
		if set {
			cfg.Source = kmsg.ConfigSourceDynamicTopicConfig
		}
		if docs {
			cfg.Documentation = kmsg.StringPtr(d.doc)
		}
		if synonyms {
			if set {
				cfg.ConfigSynonyms = append(cfg.ConfigSynonyms, configSynonym(d.name, value, kmsg.ConfigSourceDynamicTopicConfig))
			}
			cfg.ConfigSynonyms = append(cfg.ConfigSynonyms, configSynonym(d.synonym, def, kmsg.ConfigSourceDefaultConfig))
		}
		out = append(out, cfg)
	}
	return out
}

func configSynonym(name, value string, source kmsg.ConfigSource) kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
	s.Name, s.Value, s.Source = name, kmsg.StringPtr(value), source
	return s
}

func orDefault(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}

// policyName is cleanup.policy as Kafka writes it.
func policyName(p int64) string {
	switch p {
	case store.PolicyCompact:
		return "compact"
	case store.PolicyCompactDelete:
		return "compact,delete"
	}
	return "delete"
}
