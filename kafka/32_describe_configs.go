package kafka

import (
	"math"
	"strconv"

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

// topicConfig is one config as DescribeConfigs reports it.
type topicConfig struct {
	name, value string
	set         bool // set on the topic (else the broker's default is in force)
	// synonym is the broker config behind the default (Kafka's name), and
	// def its value.
	synonym, def string
	typ          kmsg.ConfigType
	// readOnly: waggle's behaviour, not a setting (AlterConfigs refuses it).
	readOnly bool
	doc      string
}

// topicConfigs answers a topic's configs: the ones waggle applies, with
// the broker default behind each as a synonym (v1+, KIP-226), and the
// Kafka configs whose value waggle's design fixes, read-only.
func topicConfigs(t, defaults broker.TopicInfo, names []string, synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	maxBytes := int64(min(t.MaxMessageBytes, broker.MaxTopicMessageBytes)) // what produces are held to
	defMaxBytes := strconv.Itoa(broker.DefaultMaxMessageBytes)
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	ratio := func(ppm int64) string { return strconv.FormatFloat(float64(ppm)/1e6, 'g', -1, 64) }
	all := []topicConfig{
		{configCleanupPolicy, policyName(t.CleanupPolicy), t.CleanupPolicySet, "log.cleanup.policy", policyName(defaults.CleanupPolicy),
			kmsg.ConfigTypeList, false, "delete, compact, or compact,delete"},
		{"compression.type", "producer", false, "compression.type", "producer", kmsg.ConfigTypeString, true,
			"batches are stored as the producer compressed them"},
		{configDeleteRetention, i64(t.DeleteRetentionMs), t.DeleteRetentionMsSet, "log.cleaner.delete.retention.ms", i64(defaults.DeleteRetentionMs),
			kmsg.ConfigTypeLong, false, "how long a compacted tombstone is kept"},
		{"max.compaction.lag.ms", i64(math.MaxInt64), false, "log.cleaner.max.compaction.lag.ms", i64(math.MaxInt64), kmsg.ConfigTypeLong, true,
			"not enforced: passes start by min.cleanable.dirty.ratio"},
		{configMaxMessageBytes, i64(orDefault(maxBytes, broker.DefaultMaxMessageBytes)), maxBytes != 0, "message.max.bytes", defMaxBytes,
			kmsg.ConfigTypeInt, false, "largest record batch a produce may carry (at most 4 MiB)"},
		{"message.timestamp.type", "CreateTime", false, "log.message.timestamp.type", "CreateTime", kmsg.ConfigTypeString, true,
			"records keep the producer's timestamps"},
		{configMinCleanableDirty, ratio(t.MinCleanableDirtyPPM), t.MinCleanableDirtyRatioSet, "log.cleaner.min.cleanable.ratio", ratio(defaults.MinCleanableDirtyPPM),
			kmsg.ConfigTypeDouble, false, "share of new bytes that starts a compaction pass"},
		{configMinCompactionLag, i64(t.MinCompactionLagMs), t.MinCompactionLagMsSet, "log.cleaner.min.compaction.lag.ms", i64(defaults.MinCompactionLagMs),
			kmsg.ConfigTypeLong, false, "how old a record must be to be compacted"},
		{configRetentionBytes, i64(orDefault(t.RetentionBytes, -1)), t.RetentionBytes != 0, "log.retention.bytes", "-1",
			kmsg.ConfigTypeLong, false, "bytes kept per partition (-1: no limit)"},
		{configRetentionMs, i64(t.RetentionMs), t.RetentionSet, "log.retention.ms", i64(defaults.RetentionMs),
			kmsg.ConfigTypeLong, false, "how long records are kept (-1: for ever)"},
		{configSegmentBytes, i64(t.SegmentBytes), t.SegmentBytesSet, "log.segment.bytes", i64(defaults.SegmentBytes),
			kmsg.ConfigTypeInt, false, "size of a segment file"},
		{configSegmentMs, i64(t.SegmentMs), t.SegmentMsSet, "log.roll.ms", i64(defaults.SegmentMs),
			kmsg.ConfigTypeLong, false, "age at which a segment is sealed"},
		{"unclean.leader.election.enable", "false", false, "unclean.leader.election.enable", "false", kmsg.ConfigTypeBoolean, true,
			"raft elects only leaders holding every committed write"},
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, e := range all {
		if len(names) > 0 && !want[e.name] {
			continue
		}
		cfg := kmsg.NewDescribeConfigsResponseResourceConfig()
		cfg.Name, cfg.Value, cfg.IsDefault, cfg.ReadOnly = e.name, kmsg.StringPtr(e.value), !e.set, e.readOnly
		cfg.Source, cfg.ConfigType = kmsg.ConfigSourceDefaultConfig, e.typ
		if e.set {
			cfg.Source = kmsg.ConfigSourceDynamicTopicConfig
		}
		if docs {
			cfg.Documentation = kmsg.StringPtr(e.doc)
		}
		if synonyms {
			if e.set {
				cfg.ConfigSynonyms = append(cfg.ConfigSynonyms, configSynonym(e.name, e.value, kmsg.ConfigSourceDynamicTopicConfig))
			}
			cfg.ConfigSynonyms = append(cfg.ConfigSynonyms, configSynonym(e.synonym, e.def, kmsg.ConfigSourceDefaultConfig))
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
