package kafka

import (
	"math"
	"strconv"
	"strings"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// Topic configs waggle understands; any other is refused with
// INVALID_CONFIG. cleanup.policy takes "delete" only.
const (
	configRetentionMs       = command.ConfigRetentionMs
	configRetentionBytes    = command.ConfigRetentionBytes
	configSegmentBytes      = command.ConfigSegmentBytes
	configSegmentMs         = command.ConfigSegmentMs
	configMaxMessageBytes   = command.ConfigMaxMessageBytes
	configCleanupPolicy     = command.ConfigCleanupPolicy
	configMinCompactionLag  = command.ConfigMinCompactionLagMs
	configDeleteRetention   = command.ConfigDeleteRetentionMs
	configMinCleanableDirty = command.ConfigMinCleanableDirtyRatio
)

// alterableConfigs are the configs a topic stores, which AlterConfigs
// returns to their defaults when a request leaves them out.
var alterableConfigs = []string{configRetentionMs, configRetentionBytes, configMaxMessageBytes, configSegmentBytes, configSegmentMs,
	configCleanupPolicy, configMinCompactionLag, configDeleteRetention, configMinCleanableDirty}

// topicSetting checks one topic config as CreateTopics, AlterConfigs and
// IncrementalAlterConfigs take it (a nil value is the empty string).
// stored is false for a value that is accepted but changes nothing;
// refusal, when not empty, says why the value is refused (INVALID_CONFIG).
func topicSetting(name string, v *string) (s command.TopicSetting, stored bool, refusal string) {
	value := ""
	if v != nil {
		value = *v
	}
	number := func(min, max int64, why string) (command.TopicSetting, bool, string) {
		v, err := strconv.ParseInt(value, 10, 64)
		// 0 is refused even where min allows -1: a stored 0 means "the
		// default", which is not what Kafka makes of 0.
		if err != nil || v < min || v > max || v == 0 {
			return s, false, name + " must be " + why
		}
		return command.TopicSetting{Name: name, Value: v}, true, ""
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
		var del, compact bool
		for _, p := range strings.Split(value, ",") {
			switch strings.TrimSpace(p) {
			case "delete":
				del = true
			case "compact":
				compact = true
			default:
				return s, false, "cleanup.policy must be delete, compact or compact,delete"
			}
		}
		policy := int64(store.PolicyDelete)
		switch {
		case compact && del:
			policy = store.PolicyCompactDelete
		case compact:
			policy = store.PolicyCompact
		}
		return command.TopicSetting{Name: name, Value: policy}, true, ""
	case configMinCompactionLag, configDeleteRetention:
		v, err := strconv.ParseInt(value, 10, 64)
		if err != nil || v < 0 || v > 1<<62 {
			return s, false, name + " must be a number of milliseconds, 0 or more"
		}
		if v == 0 && name == configDeleteRetention {
			v = -1 // stored 0 is the default; -1 an explicit 0
		}
		return command.TopicSetting{Name: name, Value: v}, true, ""
	case configMinCleanableDirty:
		f, err := strconv.ParseFloat(value, 64)
		if err != nil || !(f >= 0 && f <= 1) {
			return s, false, name + " must be a number from 0 to 1"
		}
		ppm := int64(math.Round(f * 1e6))
		if ppm == 0 {
			ppm = -1
		}
		return command.TopicSetting{Name: name, Value: ppm}, true, ""
	default:
		return s, false, "unsupported topic config " + name
	}
}
