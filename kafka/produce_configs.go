package kafka

import (
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/recordbatch"
)

// maxRewrittenBatch bounds what a batch may decompress to when the leader
// reads its records to check or recompress them.
const maxRewrittenBatch = 64 << 20

// holdToTopicConfigs applies a topic's produce-time configs to one
// partition's batches before the leader proposes them, as Kafka's log
// validator does: min.insync.replicas for acks=all, the timestamp bounds
// of a CreateTime topic (KIP-937), compression.type and
// message.timestamp.type. Batches may be replaced. It returns the time
// stamped on a LogAppendTime topic's batches (-1 for CreateTime), or a
// refusal.
func (c *conn) holdToTopicConfigs(t broker.TopicInfo, acks int16, batches []recordbatch.Batch) (appendTime int64, code int16, msg string) {
	b := c.s.topic(t.Name)
	if need := topicConfigValue(t, command.ConfigMinInsyncReplicas); acks == -1 && need > 1 {
		if have := len(b.InSync()); int64(have) < need {
			return -1, kerr.NotEnoughReplicas.Code, fmt.Sprintf("%d of the topic's raft voters are in touch with the leader, min.insync.replicas is %d", have, need)
		}
	}
	now := b.Now().UnixMilli()
	logAppendTime := t.Config(command.ConfigTimestampType, 0) == 1
	if !logAppendTime {
		before := topicConfigValue(t, command.ConfigTimestampBeforeMax)
		after := topicConfigValue(t, command.ConfigTimestampAfterMax)
		for _, batch := range batches {
			newest, oldest := batch.MaxTimestamp, int64(math.MaxInt64)
			if before < math.MaxInt64 {
				var err error
				if oldest, newest, err = recordbatch.TimestampRange(batch.Raw, maxRewrittenBatch); err != nil {
					return -1, kerr.CorruptMessage.Code, err.Error()
				}
			}
			switch {
			case after < math.MaxInt64-now && newest > now+after:
				return -1, kerr.InvalidTimestamp.Code, fmt.Sprintf("timestamp %d is more than message.timestamp.after.max.ms (%d) ahead of the broker's %d", newest, after, now)
			case oldest < now-before:
				return -1, kerr.InvalidTimestamp.Code, fmt.Sprintf("timestamp %d is more than message.timestamp.before.max.ms (%d) behind the broker's %d", oldest, before, now)
			}
		}
	}
	if ct := t.Config(command.ConfigCompressionType, 0); ct > 0 {
		codec := recordbatch.Codec(ct - 1) // uncompressed, gzip, snappy, lz4, zstd
		level := 0
		if name := compressionLevelConfig(codec); name != "" {
			level = int(topicConfigValue(t, name)) // the level described, default included
		}
		// As Kafka's validator: the rewritten batches are held to
		// max.message.bytes too (one batch is decompressed at a time).
		total, limit := 0, broker.ProduceLimit(t)
		for i := range batches {
			raw, err := recordbatch.Recompress(batches[i].Raw, codec, level, maxRewrittenBatch)
			if err != nil {
				return -1, kerr.CorruptMessage.Code, err.Error()
			}
			if total += len(raw); total > limit {
				return -1, kerr.MessageTooLarge.Code, fmt.Sprintf("the records take more than max.message.bytes (%d) in %s", limit, compressionTypes[ct])
			}
			batches[i].Raw, batches[i].Codec = raw, codec
		}
	}
	if !logAppendTime {
		return -1, 0, ""
	}
	for i := range batches {
		recordbatch.SetLogAppendTime(batches[i].Raw, now)
		batches[i].MaxTimestamp = now
	}
	return now, 0, ""
}

// compressionLevelConfig names the level config of codec ("" for none).
func compressionLevelConfig(codec recordbatch.Codec) string {
	switch codec {
	case recordbatch.CodecGzip:
		return command.ConfigCompressionGzipLvl
	case recordbatch.CodecLZ4:
		return command.ConfigCompressionLZ4Lvl
	case recordbatch.CodecZstd:
		return command.ConfigCompressionZstdLvl
	}
	return ""
}
