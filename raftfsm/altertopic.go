package raftfsm

import (
	"errors"

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
)

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

func (c *AlterTopicCommand) since() LogFormat { return LogFormat2 }

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

func (p *Processor) alterTopic(tx *store.Tx, _ *store.Meta, c *AlterTopicCommand) TopicOutcome {
	q, err := tx.Queue(c.Name)
	if errors.Is(err, store.ErrNotFound) {
		return TopicUnknown
	}
	must(err)
	for _, s := range c.Settings {
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
		default:
			return TopicInvalidConfig
		}
	}
	must(tx.PutQueue(q))
	return TopicOK
}
