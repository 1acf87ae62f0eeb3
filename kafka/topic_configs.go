package kafka

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// Topic configs: every config of Kafka 4's topic list, each with how
// CreateTopics and the alter APIs check a value, how the topic stores it
// (broker.TopicInfo), and how DescribeConfigs shows it. A name not in the
// list is refused with INVALID_CONFIG, naming it.
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

// topicConfigDef is one Kafka topic config.
type topicConfigDef struct {
	name string
	typ  kmsg.ConfigType
	// synonym is the broker config behind the default (Kafka's name).
	synonym string
	// parse checks a value (nil is the empty string): stored false
	// accepts it and keeps nothing (the value waggle's design fixes);
	// refusal, when not empty, says why it is refused.
	parse func(v string) (value int64, stored bool, refusal string)
	// show is the value in force for a topic, and whether the topic set it.
	show func(t broker.TopicInfo) (value string, set bool)
	// value is a kept config's value in force as a number (nil for the
	// others): what the produce path reads.
	value func(t broker.TopicInfo) (n int64, set bool)
	// fixed: waggle's design allows one value (AlterConfigs refuses others).
	fixed bool
	doc   string
}

// Codes of compression.type and message.timestamp.type as stored; 0 (none
// stored) is Kafka's default, "producer" and "CreateTime".
var (
	compressionTypes = []string{"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"}
	timestampTypes   = []string{"CreateTime", "LogAppendTime"}
)

// Defaults of the format 8 configs, as Kafka 4 has them.
const (
	defaultTimestampAfterMaxMs = 3_600_000 // KIP-937 as of Kafka 4.0
	defaultLZ4Level            = 9
	defaultZstdLevel           = 3
)

var topicConfigDefs = []topicConfigDef{
	stored(configCleanupPolicy, kmsg.ConfigTypeList, "log.cleanup.policy", parseCleanupPolicy,
		func(t broker.TopicInfo) (string, bool) { return policyName(t.CleanupPolicy), t.CleanupPolicySet },
		"delete, compact, or compact,delete"),
	kept(command.ConfigCompressionGzipLvl, "compression.gzip.level", kmsg.ConfigTypeInt, -1, 9, -1,
		"gzip level (1-9, -1 the codec's default) when compression.type is gzip"),
	kept(command.ConfigCompressionLZ4Lvl, "compression.lz4.level", kmsg.ConfigTypeInt, 1, 17, defaultLZ4Level,
		"lz4 level (1-17) when compression.type is lz4"),
	stored(command.ConfigCompressionType, kmsg.ConfigTypeString, "compression.type", enumParser(command.ConfigCompressionType, compressionTypes),
		enumShow(command.ConfigCompressionType, compressionTypes),
		"the codec batches are stored in: producer keeps the producer's; any other makes the leader recompress batches in another codec"),
	kept(command.ConfigCompressionZstdLvl, "compression.zstd.level", kmsg.ConfigTypeInt, -131072, 22, defaultZstdLevel,
		"zstd level when compression.type is zstd"),
	stored(configDeleteRetention, kmsg.ConfigTypeLong, "log.cleaner.delete.retention.ms", parseNonNegativeMs(configDeleteRetention),
		func(t broker.TopicInfo) (string, bool) { return i64(t.DeleteRetentionMs), t.DeleteRetentionMsSet },
		"how long a compacted tombstone is kept"),
	kept(command.ConfigFileDeleteDelayMs, "log.segment.delete.delay.ms", kmsg.ConfigTypeLong, 0, math.MaxInt64, 60_000,
		"kept and described; waggle removes a segment file once no snapshot links it"),
	kept(command.ConfigFlushMessages, "log.flush.interval.messages", kmsg.ConfigTypeLong, 1, math.MaxInt64, math.MaxInt64,
		"kept and described; every write is fsynced by raft before it is acknowledged, more often than any value asks"),
	kept(command.ConfigFlushMs, "log.flush.interval.ms", kmsg.ConfigTypeLong, 0, math.MaxInt64, math.MaxInt64,
		"kept and described; every write is fsynced by raft before it is acknowledged, more often than any value asks"),
	fixedConfig("follower.replication.throttled.replicas", "follower.replication.throttled.replicas", kmsg.ConfigTypeList, "", anyList,
		"accepted and not kept: raft replicates every partition of a group together, unthrottled"),
	kept(command.ConfigIndexIntervalBytes, "log.index.interval.bytes", kmsg.ConfigTypeInt, 0, math.MaxInt32, 4096,
		"kept and described; waggle's offset index has an entry per batch"),
	fixedConfig("leader.replication.throttled.replicas", "leader.replication.throttled.replicas", kmsg.ConfigTypeList, "", anyList,
		"accepted and not kept: raft replicates every partition of a group together, unthrottled"),
	fixedConfig("local.retention.bytes", "log.local.retention.bytes", kmsg.ConfigTypeLong, "-2", nil,
		"-2 only: without tiered storage every record is local, kept by retention.bytes"),
	fixedConfig("local.retention.ms", "log.local.retention.ms", kmsg.ConfigTypeLong, "-2", nil,
		"-2 only: without tiered storage every record is local, kept by retention.ms"),
	kept(command.ConfigMaxCompactionLagMs, "log.cleaner.max.compaction.lag.ms", kmsg.ConfigTypeLong, 1, math.MaxInt64, math.MaxInt64,
		"a compacted partition's records are compacted at most this long after they are written, however little is dirty"),
	stored(configMaxMessageBytes, kmsg.ConfigTypeInt, "message.max.bytes",
		intParser(configMaxMessageBytes, 1, broker.MaxTopicMessageBytes),
		func(t broker.TopicInfo) (string, bool) {
			return strconv.Itoa(broker.ProduceLimit(t)), t.MaxMessageBytes != 0
		},
		"largest record batch a produce may carry (at most 16 MiB)"),
	kept(command.ConfigTimestampAfterMax, "log.message.timestamp.after.max.ms", kmsg.ConfigTypeLong, 0, math.MaxInt64, defaultTimestampAfterMaxMs,
		"a CreateTime record stamped further than this ahead of the leader's clock is refused (INVALID_TIMESTAMP)"),
	kept(command.ConfigTimestampBeforeMax, "log.message.timestamp.before.max.ms", kmsg.ConfigTypeLong, 0, math.MaxInt64, math.MaxInt64,
		"a CreateTime record stamped further than this behind the leader's clock is refused (INVALID_TIMESTAMP)"),
	stored(command.ConfigTimestampType, kmsg.ConfigTypeString, "log.message.timestamp.type", enumParser(command.ConfigTimestampType, timestampTypes),
		enumShow(command.ConfigTimestampType, timestampTypes),
		"CreateTime keeps the producer's timestamps; LogAppendTime stamps each batch with the leader's clock"),
	stored(configMinCleanableDirty, kmsg.ConfigTypeDouble, "log.cleaner.min.cleanable.ratio", parseDirtyRatio,
		func(t broker.TopicInfo) (string, bool) {
			return ratio(t.MinCleanableDirtyPPM), t.MinCleanableDirtyRatioSet
		},
		"share of new bytes that starts a compaction pass"),
	stored(configMinCompactionLag, kmsg.ConfigTypeLong, "log.cleaner.min.compaction.lag.ms", parseNonNegativeMs(configMinCompactionLag),
		func(t broker.TopicInfo) (string, bool) { return i64(t.MinCompactionLagMs), t.MinCompactionLagMsSet },
		"how old a record must be to be compacted"),
	kept(command.ConfigMinInsyncReplicas, "min.insync.replicas", kmsg.ConfigTypeInt, 1, math.MaxInt32, 1,
		"an acks=all produce is refused (NOT_ENOUGH_REPLICAS) while fewer of the topic's raft voters, the leader counted, are in touch with the leader"),
	kept(command.ConfigPreallocate, "log.preallocate", kmsg.ConfigTypeBoolean, 0, 1, 0,
		"kept and described; segment files grow as they are written"),
	fixedConfig("remote.log.copy.disable", "remote.log.copy.disable", kmsg.ConfigTypeBoolean, "false", nil,
		"false only: waggle has no tiered storage"),
	fixedConfig("remote.log.delete.on.disable", "remote.log.delete.on.disable", kmsg.ConfigTypeBoolean, "false", nil,
		"false only: waggle has no tiered storage"),
	fixedConfig("remote.storage.enable", "remote.log.storage.system.enable", kmsg.ConfigTypeBoolean, "false", nil,
		"false only: waggle has no tiered storage"),
	stored(configRetentionBytes, kmsg.ConfigTypeLong, "log.retention.bytes", intParser(configRetentionBytes, -1, 1<<62),
		func(t broker.TopicInfo) (string, bool) {
			return i64(orDefault(t.RetentionBytes, -1)), t.RetentionBytes != 0
		},
		"bytes kept per partition (-1: no limit)"),
	stored(configRetentionMs, kmsg.ConfigTypeLong, "log.retention.ms", intParser(configRetentionMs, -1, 1<<62),
		func(t broker.TopicInfo) (string, bool) { return i64(t.RetentionMs), t.RetentionSet },
		"how long records are kept (-1: for ever)"),
	stored(configSegmentBytes, kmsg.ConfigTypeInt, "log.segment.bytes", intParser(configSegmentBytes, broker.MinSegmentBytes, 1<<30),
		func(t broker.TopicInfo) (string, bool) { return i64(t.SegmentBytes), t.SegmentBytesSet },
		"size of a segment file"),
	kept(command.ConfigSegmentIndexBytes, "log.index.size.max.bytes", kmsg.ConfigTypeInt, 4, math.MaxInt32, 10_485_760,
		"kept and described; waggle's offset index is in badger, not a file per segment"),
	kept(command.ConfigSegmentJitterMs, "log.roll.jitter.ms", kmsg.ConfigTypeLong, 0, math.MaxInt64, 0,
		"kept and described; segments are sealed by segment.ms without jitter"),
	stored(configSegmentMs, kmsg.ConfigTypeLong, "log.roll.ms", intParser(configSegmentMs, 1000, 1<<62),
		func(t broker.TopicInfo) (string, bool) { return i64(t.SegmentMs), t.SegmentMsSet },
		"age at which a segment is sealed"),
	fixedConfig("unclean.leader.election.enable", "unclean.leader.election.enable", kmsg.ConfigTypeBoolean, "false", nil,
		"false only: raft elects only leaders holding every committed write"),
}

// topicConfigIndex finds a config's definition by name.
var topicConfigIndex = func() map[string]int {
	m := make(map[string]int, len(topicConfigDefs))
	for i, d := range topicConfigDefs {
		m[d.name] = i
	}
	return m
}()

// stored is a config with a parser and a display of its own (those of
// the first formats, read from broker.TopicInfo's fields, and the
// enumerated ones).
func stored(name string, typ kmsg.ConfigType, synonym string, parse func(string) (int64, bool, string),
	show func(broker.TopicInfo) (string, bool), doc string) topicConfigDef {
	return topicConfigDef{name: name, typ: typ, synonym: synonym, parse: parse, show: show, doc: doc}
}

func topicConfigDefOf(name string) (topicConfigDef, bool) {
	i, ok := topicConfigIndex[name]
	if !ok {
		return topicConfigDef{}, false
	}
	return topicConfigDefs[i], true
}

// storedConfigs are the configs a topic keeps at log format f, which
// AlterConfigs returns to their defaults when a request leaves them out.
func storedConfigs(f command.LogFormat) []string {
	var out []string
	for _, d := range topicConfigDefs {
		if !d.fixed && command.ConfigSince(d.name) <= f {
			out = append(out, d.name)
		}
	}
	return out
}

// topicSetting checks one topic config as CreateTopics, AlterConfigs and
// IncrementalAlterConfigs take it (a nil value is the empty string), for
// a cluster at log format f. stored is false for a value that is accepted
// but changes nothing; refusal, when not empty, says why the value is
// refused (INVALID_CONFIG).
func topicSetting(name string, v *string, f command.LogFormat) (s command.TopicSetting, stored bool, refusal string) {
	d, ok := topicConfigDefOf(name)
	if !ok {
		return s, false, "unknown topic config " + name
	}
	if since := command.ConfigSince(name); !d.fixed && f < since {
		return s, false, name + " needs every node upgraded first (log format " + strconv.Itoa(int(since)) + ")"
	}
	value, stored, refusal := d.parse(derefString(v))
	return command.TopicSetting{Name: name, Value: value}, stored, refusal
}

// topicConfigValue is the value in force of a config kept as an integer
// (kept), its default included.
func topicConfigValue(t broker.TopicInfo, name string) int64 {
	d, _ := topicConfigDefOf(name)
	n, _ := d.value(t)
	return n
}

// kept is a format 8 config stored as an integer from lo to hi: a boolean
// is 0 or 1. Zero is stored as -1 where -1 is not a value (a stored 0
// means "the default"), and a value equal to the default is stored too
// (Kafka reports a config set to its default as set).
func kept(name, synonym string, typ kmsg.ConfigType, lo, hi, def int64, doc string) topicConfigDef {
	zeroAs := int64(0)
	if lo > -1 {
		zeroAs = -1
	}
	boolean := typ == kmsg.ConfigTypeBoolean
	format := func(n int64) string {
		if boolean {
			return strconv.FormatBool(n != 0)
		}
		return i64(n)
	}
	value := func(t broker.TopicInfo) (int64, bool) {
		n, ok := t.Configs[name]
		switch {
		case !ok:
			return def, false
		case n == -1 && zeroAs == -1:
			return 0, true
		}
		return n, true
	}
	return topicConfigDef{name: name, typ: typ, synonym: synonym, doc: doc, value: value,
		parse: func(v string) (int64, bool, string) {
			n, err := strconv.ParseInt(v, 10, 64)
			if boolean {
				b, berr := strconv.ParseBool(v)
				n, err = map[bool]int64{false: 0, true: 1}[b], berr
			}
			if err != nil || n < lo || n > hi {
				if boolean {
					return 0, false, name + " must be true or false"
				}
				return 0, false, name + " must be an integer from " + i64(lo) + " to " + i64(hi)
			}
			if n == 0 {
				n = zeroAs
			}
			return n, true, ""
		},
		show: func(t broker.TopicInfo) (string, bool) {
			n, set := value(t)
			return format(n), set
		},
	}
}

// fixedConfig is a config whose value waggle's design fixes: values other
// than value (or than what accept accepts) are refused, and none is kept.
func fixedConfig(name, synonym string, typ kmsg.ConfigType, value string, accept func(string) bool, doc string) topicConfigDef {
	return topicConfigDef{name: name, typ: typ, synonym: synonym, fixed: true, doc: doc,
		parse: func(v string) (int64, bool, string) {
			if v == value || (accept != nil && accept(v)) {
				return 0, false, ""
			}
			return 0, false, name + " can only be " + strconv.Quote(value) + " on waggle: " + doc
		},
		show: func(broker.TopicInfo) (string, bool) { return value, false },
	}
}

// anyList accepts Kafka's throttled-replicas lists: "*" or
// partition:broker pairs.
func anyList(v string) bool {
	if v == "*" {
		return true
	}
	for _, pair := range strings.Split(v, ",") {
		p, b, ok := strings.Cut(strings.TrimSpace(pair), ":")
		if _, err := strconv.Atoi(p); !ok || err != nil {
			return false
		}
		if _, err := strconv.Atoi(b); err != nil {
			return false
		}
	}
	return true
}

// enumParser and enumShow keep an enumerated config as its index in
// values (0, the first, being the default and not stored).
func enumParser(name string, values []string) func(string) (int64, bool, string) {
	return func(v string) (int64, bool, string) {
		i := slices.Index(values, v)
		if i < 0 {
			return 0, false, name + " must be one of " + strings.Join(values, ", ")
		}
		return int64(i), true, ""
	}
}

func enumShow(name string, values []string) func(broker.TopicInfo) (string, bool) {
	return func(t broker.TopicInfo) (string, bool) {
		i, ok := t.Configs[name]
		if i < 0 || i >= int64(len(values)) {
			i = 0
		}
		return values[i], ok
	}
}

// intParser checks an integer config of the first format. 0 is refused
// even where the range allows it: a stored 0 means "the default", which
// is not what Kafka makes of 0.
func intParser(name string, lo, hi int64) func(string) (int64, bool, string) {
	return func(v string) (int64, bool, string) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi || n == 0 {
			why := "an integer from " + i64(lo) + " to " + i64(hi)
			if lo == -1 {
				why = "a positive integer, or -1 for no limit"
			}
			return 0, false, name + " must be " + why
		}
		return n, true, ""
	}
}

func parseCleanupPolicy(v string) (int64, bool, string) {
	var del, compact bool
	for _, p := range strings.Split(v, ",") {
		switch strings.TrimSpace(p) {
		case "delete":
			del = true
		case "compact":
			compact = true
		default:
			return 0, false, "cleanup.policy must be delete, compact or compact,delete"
		}
	}
	switch {
	case compact && del:
		return store.PolicyCompactDelete, true, ""
	case compact:
		return store.PolicyCompact, true, ""
	}
	return store.PolicyDelete, true, ""
}

// parseNonNegativeMs keeps an explicit 0 of delete.retention.ms as -1
// (stored 0 is the default); min.compaction.lag.ms's default is 0.
func parseNonNegativeMs(name string) func(string) (int64, bool, string) {
	return func(v string) (int64, bool, string) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<62 {
			return 0, false, name + " must be a number of milliseconds, 0 or more"
		}
		if n == 0 && name == configDeleteRetention {
			n = -1
		}
		return n, true, ""
	}
}

// parseDirtyRatio keeps min.cleanable.dirty.ratio in millionths, an
// explicit 0 as -1.
func parseDirtyRatio(v string) (int64, bool, string) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= 0 && f <= 1) {
		return 0, false, configMinCleanableDirty + " must be a number from 0 to 1"
	}
	ppm := int64(math.Round(f * 1e6))
	if ppm == 0 {
		ppm = -1
	}
	return ppm, true, ""
}

func i64(v int64) string     { return strconv.FormatInt(v, 10) }
func ratio(ppm int64) string { return strconv.FormatFloat(float64(ppm)/1e6, 'g', -1, 64) }
