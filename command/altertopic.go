package command

import (
	"slices"

	"github.com/waggle-mq/waggle/store"
)

// Kafka topic configs a topic stores, by their Kafka names. The names are
// part of the log format (AlterTopicCommand carries them).
const (
	ConfigRetentionMs     = "retention.ms"
	ConfigRetentionBytes  = "retention.bytes"
	ConfigMaxMessageBytes = "max.message.bytes"
	ConfigSegmentBytes    = "segment.bytes"
	ConfigSegmentMs       = "segment.ms"
	// Compaction (compact.go). cleanup.policy is stored as a number:
	// store.PolicyDelete, PolicyCompact or PolicyCompactDelete;
	// min.cleanable.dirty.ratio in millionths; delete.retention.ms and
	// min.cleanable.dirty.ratio take -1 for an explicit 0.
	ConfigCleanupPolicy          = "cleanup.policy"
	ConfigMinCompactionLagMs     = "min.compaction.lag.ms"
	ConfigDeleteRetentionMs      = "delete.retention.ms"
	ConfigMinCleanableDirtyRatio = "min.cleanable.dirty.ratio"
)

// Kafka topic configs added at log format 8, kept in store.Queue.Configs
// by name (absent: the default). Enforced by the leader before it
// proposes (compression, timestamps, min.insync.replicas) or by the
// compaction pass it proposes (max.compaction.lag.ms); the rest are kept
// and described, their behaviour fixed by waggle's design.
const (
	ConfigCompressionType    = "compression.type" // store.Codec… constants
	ConfigCompressionGzipLvl = "compression.gzip.level"
	ConfigCompressionLZ4Lvl  = "compression.lz4.level"
	ConfigCompressionZstdLvl = "compression.zstd.level"
	ConfigTimestampType      = "message.timestamp.type" // store.LogAppendTime, or absent: CreateTime
	ConfigTimestampBeforeMax = "message.timestamp.before.max.ms"
	ConfigTimestampAfterMax  = "message.timestamp.after.max.ms"
	ConfigMinInsyncReplicas  = "min.insync.replicas"
	ConfigMaxCompactionLagMs = "max.compaction.lag.ms"
	ConfigFlushMessages      = "flush.messages"
	ConfigFlushMs            = "flush.ms"
	ConfigIndexIntervalBytes = "index.interval.bytes"
	ConfigSegmentIndexBytes  = "segment.index.bytes"
	ConfigSegmentJitterMs    = "segment.jitter.ms"
	ConfigFileDeleteDelayMs  = "file.delete.delay.ms"
	ConfigPreallocate        = "preallocate"
)

// format8Configs are the configs a format 7 state machine refuses.
var format8Configs = []string{ConfigCompressionType, ConfigCompressionGzipLvl, ConfigCompressionLZ4Lvl, ConfigCompressionZstdLvl,
	ConfigTimestampType, ConfigTimestampBeforeMax, ConfigTimestampAfterMax, ConfigMinInsyncReplicas, ConfigMaxCompactionLagMs,
	ConfigFlushMessages, ConfigFlushMs, ConfigIndexIntervalBytes, ConfigSegmentIndexBytes, ConfigSegmentJitterMs,
	ConfigFileDeleteDelayMs, ConfigPreallocate}

// ConfigSince is the log format whose state machine accepts the named
// topic config: format 1's CreateTopic carries retention, size and
// segment limits in fields of its own, format 2 the compaction configs
// (and AlterTopic), format 8 the rest.
func ConfigSince(name string) LogFormat {
	switch {
	case slices.Contains(format8Configs, name):
		return LogFormat8
	case name == ConfigRetentionMs, name == ConfigRetentionBytes, name == ConfigMaxMessageBytes, name == ConfigSegmentBytes, name == ConfigSegmentMs:
		return LogFormat1
	}
	return LogFormat2
}

// settingsSince is the format that reads every one of settings.
func settingsSince(settings []TopicSetting, floor LogFormat) LogFormat {
	for _, s := range settings {
		floor = max(floor, ConfigSince(s.Name))
	}
	return floor
}

// AlterTopicCommand changes a topic's configs live (Kafka AlterConfigs and
// IncrementalAlterConfigs). Each setting names a config; the value 0
// returns it to its default. The leader validates the values; the state
// machine refuses the whole command if it names a config it does not know.
type AlterTopicCommand struct {
	Name     string
	Settings []TopicSetting
}

// TopicSetting is one config's new value.
type TopicSetting struct {
	Name  string
	Value int64
}

func (c *AlterTopicCommand) since() LogFormat { return settingsSince(c.Settings, LogFormat2) }

// Encode returns the raft entry for the command.
func (c *AlterTopicCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdAlterTopic))
	e.string(c.Name)
	e.uvarint(uint64(len(c.Settings)))
	for _, s := range c.Settings {
		e.string(s.Name)
		e.varint(s.Value)
	}
	return e.b
}

func decodeAlterTopic(b []byte) (*AlterTopicCommand, error) {
	d := decoder{b: b}
	c := &AlterTopicCommand{Name: d.string()}
	if n := d.count(2); n > 0 {
		c.Settings = make([]TopicSetting, n)
		for i := range c.Settings {
			c.Settings[i] = TopicSetting{Name: d.string(), Value: d.varint()}
		}
	}
	return c, d.finish()
}

// ApplyTopicSettings sets each named config on q: the one place that says
// which field of a queue a Kafka topic config is. It reports false (with
// q partly changed) when a name is not a topic config.
func ApplyTopicSettings(q *store.Queue, settings []TopicSetting) bool {
	for _, s := range settings {
		switch s.Name {
		case ConfigRetentionMs:
			q.RetentionMs = s.Value
		case ConfigRetentionBytes:
			q.RetentionBytes = s.Value
		case ConfigMaxMessageBytes:
			q.MaxMessageBytes = int32(s.Value)
		case ConfigSegmentBytes:
			q.SegmentBytes = s.Value
		case ConfigSegmentMs:
			q.SegmentMs = s.Value
		case ConfigCleanupPolicy:
			q.CleanupPolicy = s.Value
		case ConfigMinCompactionLagMs:
			q.MinCompactionLagMs = s.Value
		case ConfigDeleteRetentionMs:
			q.DeleteRetentionMs = s.Value
		case ConfigMinCleanableDirtyRatio:
			q.MinCleanableDirtyPPM = s.Value
		default:
			if !slices.Contains(format8Configs, s.Name) {
				return false
			}
			q.SetConfig(s.Name, s.Value)
		}
	}
	return true
}

// DeleteRecordsCommand moves partitions' log start offsets forward (Kafka
// DeleteRecords): records below become unreadable at once; their disk space
// goes with the segments retention drops.
type DeleteRecordsCommand struct {
	Topic      string
	Partitions []RecordsBefore
}

// RecordsBefore names a partition and the offset its log is to start at;
// -1 is its high watermark (everything).
type RecordsBefore struct {
	Partition int32
	Offset    int64
}

// DeleteRecordsResult answers one partition: its log start offset after
// the command (Kafka's low watermark), or why it was refused.
type DeleteRecordsResult struct {
	Outcome      TopicOutcome
	LowWatermark int64
}

func (c *DeleteRecordsCommand) since() LogFormat { return LogFormat2 }

// Encode returns the raft entry for the command.
func (c *DeleteRecordsCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdDeleteRecords))
	e.string(c.Topic)
	e.uvarint(uint64(len(c.Partitions)))
	for _, p := range c.Partitions {
		e.varint(int64(p.Partition))
		e.varint(p.Offset)
	}
	return e.b
}

func decodeDeleteRecords(b []byte) (*DeleteRecordsCommand, error) {
	d := decoder{b: b}
	c := &DeleteRecordsCommand{Topic: d.string()}
	if n := d.count(2); n > 0 {
		c.Partitions = make([]RecordsBefore, n)
		for i := range c.Partitions {
			c.Partitions[i] = RecordsBefore{Partition: int32(d.varint()), Offset: d.varint()}
		}
	}
	return c, d.finish()
}
