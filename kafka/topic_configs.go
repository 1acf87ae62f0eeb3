package kafka

import (
	"strconv"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/raftfsm"
)

// Topic configs waggle understands; any other is refused with
// INVALID_CONFIG. cleanup.policy takes "delete" only.
const (
	configRetentionMs     = raftfsm.ConfigRetentionMs
	configRetentionBytes  = raftfsm.ConfigRetentionBytes
	configSegmentBytes    = raftfsm.ConfigSegmentBytes
	configSegmentMs       = raftfsm.ConfigSegmentMs
	configMaxMessageBytes = raftfsm.ConfigMaxMessageBytes
	configCleanupPolicy   = "cleanup.policy"
)

// alterableConfigs are the configs a topic stores, which AlterConfigs
// returns to their defaults when a request leaves them out.
var alterableConfigs = []string{configRetentionMs, configRetentionBytes, configMaxMessageBytes, configSegmentBytes, configSegmentMs}

// topicSetting checks one topic config as CreateTopics, AlterConfigs and
// IncrementalAlterConfigs take it (a nil value is the empty string).
// stored is false for a value that is accepted but changes nothing
// (cleanup.policy=delete); refusal, when not empty, says why the value is
// refused (INVALID_CONFIG).
func topicSetting(name string, v *string) (s raftfsm.TopicSetting, stored bool, refusal string) {
	value := ""
	if v != nil {
		value = *v
	}
	number := func(min, max int64, why string) (raftfsm.TopicSetting, bool, string) {
		v, err := strconv.ParseInt(value, 10, 64)
		// 0 is refused even where min allows -1: a stored 0 means "the
		// default", which is not what Kafka makes of 0.
		if err != nil || v < min || v > max || v == 0 {
			return s, false, name + " must be " + why
		}
		return raftfsm.TopicSetting{Name: name, Value: v}, true, ""
	}
	switch name {
	case configRetentionMs:
		return number(-1, 1<<62, "a positive number of milliseconds, or -1 to keep for ever")
	case configRetentionBytes:
		return number(-1, 1<<62, "a positive number of bytes, or -1 for no limit")
	case configSegmentBytes:
		return number(broker.MinSegmentBytes, 1<<30, "a number from "+strconv.Itoa(broker.MinSegmentBytes)+" to 1073741824")
	case configSegmentMs:
		return number(1000, 1<<62, "a number of milliseconds, at least 1000")
	case configMaxMessageBytes:
		return number(1, broker.MaxTopicMessageBytes, "a number from 1 to "+strconv.Itoa(broker.MaxTopicMessageBytes))
	case configCleanupPolicy:
		if value != "delete" {
			return s, false, "only cleanup.policy=delete is supported"
		}
		return s, false, ""
	default:
		return s, false, "unsupported topic config " + name
	}
}
