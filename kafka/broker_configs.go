package kafka

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Broker configs, as DescribeConfigs reports a BROKER resource: the
// Kafka broker configs behind the topic defaults (log.retention.ms,
// message.max.bytes, ...), and those of the listener and the groups. They
// are `waggle serve` flags or fixed by waggle's design, so every one is
// read-only with source STATIC_BROKER_CONFIG; AlterConfigs refuses them.

// brokerConfig is one broker config.
type brokerConfig struct {
	name, value string
	typ         kmsg.ConfigType
	doc         string
}

// brokerConfigs lists this node's broker configs by name (all of them
// when names is empty).
func (s *Server) brokerConfigs(names []string, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	defaults := s.svc.TopicDefaults()
	var all []brokerConfig
	for _, tc := range topicConfigs(defaults, defaults, nil, true, true) {
		syn := tc.ConfigSynonyms[len(tc.ConfigSynonyms)-1] // the broker default behind the topic config
		all = append(all, brokerConfig{syn.Name, derefString(syn.Value), tc.ConfigType, "default of the topic config " + tc.Name + ": " + derefString(tc.Documentation)})
	}
	i32 := func(v int32) string { return strconv.FormatInt(int64(v), 10) }
	cg := s.cfg.ConsumerGroups
	groupDefault := func(name string) string {
		def, _ := groupConfigDefOf(name)
		return def.def(s)
	}
	all = append(all,
		brokerConfig{"auto.create.topics.enable", strconv.FormatBool(s.cfg.AutoCreateTopics), kmsg.ConfigTypeBoolean, "--kafka-auto-create-topics"},
		brokerConfig{"broker.id", s.svc.NodeID(), kmsg.ConfigTypeInt, "--node-id"},
		brokerConfig{"connections.max.idle.ms", strconv.FormatInt(s.cfg.IdleTimeout.Milliseconds(), 10), kmsg.ConfigTypeLong, "how long a connection may wait between requests"},
		brokerConfig{"group.consumer.heartbeat.interval.ms", millis(cg.HeartbeatInterval), kmsg.ConfigTypeInt, "--kafka-consumer-heartbeat-interval"},
		brokerConfig{"group.consumer.session.timeout.ms", millis(cg.SessionTimeout), kmsg.ConfigTypeInt, "--kafka-consumer-session-timeout"},
		brokerConfig{"group.share.delivery.count.limit", groupDefault("share.delivery.count.limit"), kmsg.ConfigTypeInt, "default of the group config share.delivery.count.limit"},
		brokerConfig{"group.share.heartbeat.interval.ms", millis(cg.HeartbeatInterval), kmsg.ConfigTypeInt, "--kafka-consumer-heartbeat-interval"},
		brokerConfig{"group.share.partition.max.record.locks", groupDefault("share.partition.max.record.locks"), kmsg.ConfigTypeInt, "default of the group config share.partition.max.record.locks"},
		brokerConfig{"group.share.record.lock.duration.ms", groupDefault("share.record.lock.duration.ms"), kmsg.ConfigTypeInt, "default of the group config share.record.lock.duration.ms"},
		brokerConfig{"group.share.session.timeout.ms", millis(cg.SessionTimeout), kmsg.ConfigTypeInt, "--kafka-consumer-session-timeout"},
		brokerConfig{"num.partitions", i32(s.cfg.DefaultPartitions), kmsg.ConfigTypeInt, "--kafka-default-partitions"},
		brokerConfig{"socket.request.max.bytes", i32(s.cfg.MaxFrameBytes), kmsg.ConfigTypeInt, "--kafka-max-frame-bytes"},
	)
	slices.SortFunc(all, func(a, b brokerConfig) int { return cmp.Compare(a.name, b.name) })
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, c := range all {
		if len(names) > 0 && !slices.Contains(names, c.name) {
			continue
		}
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name, rc.Value, rc.ConfigType = c.name, kmsg.StringPtr(c.value), c.typ
		rc.Source, rc.ReadOnly = kmsg.ConfigSourceStaticBrokerConfig, true
		if docs {
			rc.Documentation = kmsg.StringPtr(c.doc)
		}
		out = append(out, rc)
	}
	return out
}
