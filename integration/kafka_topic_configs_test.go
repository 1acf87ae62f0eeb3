package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/command"
)

// Kafka's topic configs, set at creation through a follower of a
// three-node cluster and enforced by the leader: a 10 MiB
// max.message.bytes, compression.type, LogAppendTime, the timestamp
// bounds of KIP-937, min.insync.replicas across a killed follower, and
// max.compaction.lag.ms. DescribeConfigs lists every config of Kafka's
// topic list; unknown names and values waggle's design rules out are
// refused, naming the config.
func TestKafkaTopicConfigsEnforcedAcrossACluster(t *testing.T) {
	c := startCluster(t, 3)
	requireLogFormat(t, c.leader(), int(command.LogFormat8))
	follower := c.followers()[0]
	cl := kafkaClient(t, []string{follower.kafkaAddr}, kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(16<<20))
	adm := kadm.NewClient(cl)
	ctx := context.Background()

	t.Run("max.message.bytes of 10 MiB", func(t *testing.T) {
		createTopic(t, cl, "big", 1, map[string]string{"max.message.bytes": "10485760"})
		big := make([]byte, 10<<20-1024)
		rand.Read(big) // incompressible
		produceSync(t, cl, &kgo.Record{Topic: "big", Value: big})
		got := consumeN(t, []string{follower.kafkaAddr}, "big", 1, kgo.FetchMaxPartitionBytes(16<<20))
		if !bytes.Equal(got[0].Value, big) {
			t.Fatal("the 10 MiB record read back differs")
		}
		tooBig := make([]byte, 10<<20+1024)
		rand.Read(tooBig)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: tooBig}).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
			t.Fatalf("a record over max.message.bytes: %v, want MESSAGE_TOO_LARGE", err)
		}
	})

	t.Run("compression.type zstd", func(t *testing.T) {
		createTopic(t, cl, "packed", 1, map[string]string{"compression.type": "zstd", "compression.zstd.level": "6"})
		plain := kafkaClient(t, []string{follower.kafkaAddr}, kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
		text := []byte(strings.Repeat("compressible text, ", 200))
		produceSync(t, plain, &kgo.Record{Topic: "packed", Value: text}, &kgo.Record{Topic: "packed", Value: []byte("two")})
		got := consumeN(t, []string{follower.kafkaAddr}, "packed", 2)
		if !bytes.Equal(got[0].Value, text) || string(got[1].Value) != "two" {
			t.Fatalf("records read back: %q, %q", got[0].Value[:20], got[1].Value)
		}
		_, _, codecs, err := readLeaderPartition(t, c, "packed")
		if err != nil || len(codecs) == 0 || slices.ContainsFunc(codecs, func(c int8) bool { return c != 4 }) {
			t.Fatalf("the stored batches' codecs: %v, %v; want 4 (zstd)", codecs, err)
		}
	})

	t.Run("LogAppendTime", func(t *testing.T) {
		createTopic(t, cl, "stamped", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
		before := time.Now()
		old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
		produceSync(t, cl, &kgo.Record{Topic: "stamped", Value: []byte("x"), Timestamp: old})
		got := consumeN(t, []string{follower.kafkaAddr}, "stamped", 1)[0]
		if got.Attrs.TimestampType() != 1 || got.Timestamp.Before(before.Add(-2*time.Second)) || got.Timestamp.After(time.Now().Add(2*time.Second)) {
			t.Fatalf("record timestamp %v (type %d), want the leader's append time near %v", got.Timestamp, got.Attrs.TimestampType(), before)
		}
	})

	t.Run("timestamp bounds", func(t *testing.T) {
		createTopic(t, cl, "bounded", 1, map[string]string{"message.timestamp.before.max.ms": "3600000"})
		produceSync(t, cl, &kgo.Record{Topic: "bounded", Value: []byte("now")})
		for name, ts := range map[string]time.Time{"a day old": time.Now().Add(-24 * time.Hour), "2 h ahead (default after.max.ms 1 h)": time.Now().Add(2 * time.Hour)} {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "bounded", Value: []byte(name), Timestamp: ts}).FirstErr(); !errors.Is(err, kerr.InvalidTimestamp) {
				t.Errorf("a record %s: %v, want INVALID_TIMESTAMP", name, err)
			}
		}
	})

	t.Run("max.compaction.lag.ms", func(t *testing.T) {
		// segment.ms is its week-long default: only the max lag seals the
		// active segment and starts the pass.
		createTopic(t, cl, "latest", 1, map[string]string{"cleanup.policy": "compact", "max.compaction.lag.ms": "2000"})
		for i := range 10 {
			produceSync(t, cl, &kgo.Record{Topic: "latest", Key: []byte("k"), Value: fmt.Appendf(nil, "v%d", i)})
		}
		waitFor(t, 60*time.Second, func() error {
			byKey, n, _, err := readLeaderPartition(t, c, "latest")
			if err != nil {
				return err
			}
			if n != 1 || string(byKey["k"]) != "v9" {
				return fmt.Errorf("%d records, k=%s: not yet compacted (max.compaction.lag.ms %s)", n, byKey["k"], describeTopicConfigs(t, cl, "latest")["max.compaction.lag.ms"])
			}
			return nil
		})
	})

	t.Run("described and refused", func(t *testing.T) {
		described, err := adm.DescribeTopicConfigs(ctx, "packed")
		if err != nil || described[0].Err != nil {
			t.Fatalf("DescribeConfigs: %+v, %v", described, err)
		}
		byName := map[string]kadm.Config{}
		for _, cfg := range described[0].Configs {
			byName[cfg.Key] = cfg
		}
		for _, name := range []string{"cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type", "compression.zstd.level",
			"delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms", "follower.replication.throttled.replicas",
			"index.interval.bytes", "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
			"max.compaction.lag.ms", "max.message.bytes", "message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
			"message.timestamp.type", "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
			"remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes", "retention.ms",
			"segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms", "unclean.leader.election.enable"} {
			if _, ok := byName[name]; !ok {
				t.Errorf("DescribeConfigs lacks %s", name)
			}
		}
		if ct := byName["compression.type"]; ct.MaybeValue() != "zstd" || ct.Source != kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("compression.type as described: %+v", ct)
		}
		if lvl := byName["compression.zstd.level"]; lvl.MaybeValue() != "6" || lvl.Source != kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("compression.zstd.level as described: %+v", lvl)
		}
		if mi := byName["min.insync.replicas"]; mi.MaybeValue() != "1" || mi.Source != kmsg.ConfigSourceDefaultConfig {
			t.Errorf("min.insync.replicas as described: %+v", mi)
		}
		for name, value := range map[string]string{"no.such.config": "1", "unclean.leader.election.enable": "true", "remote.storage.enable": "true",
			"compression.type": "brotli", "max.message.bytes": "1073741824", "local.retention.ms": "1000"} {
			req := kmsg.NewPtrCreateTopicsRequest()
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "refused", 1, -1
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			cfg.Name, cfg.Value = name, kmsg.StringPtr(value)
			rt.Configs = append(rt.Configs, cfg)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			r := resp.Topics[0]
			if r.ErrorCode != kerr.InvalidConfig.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, name) {
				t.Errorf("creating with %s=%s: code %d, message %v; want INVALID_CONFIG naming the config", name, value, r.ErrorCode, r.ErrorMessage)
			}
		}
	})

	// Last: it kills a follower.
	t.Run("min.insync.replicas", func(t *testing.T) {
		createTopic(t, cl, "durable", 1, map[string]string{"min.insync.replicas": "3"})
		strict := kafkaClient(t, []string{follower.kafkaAddr}, kgo.ProducerLinger(0), kgo.RecordRetries(3), kgo.RecordDeliveryTimeout(20*time.Second))
		produceSync(t, strict, &kgo.Record{Topic: "durable", Value: []byte("all three")})
		victim := c.followers()[1]
		victim.kill9()
		waitFor(t, 20*time.Second, func() error {
			err := strict.ProduceSync(ctx, &kgo.Record{Topic: "durable", Value: []byte("two of three")}).FirstErr()
			if !errors.Is(err, kerr.NotEnoughReplicas) {
				return fmt.Errorf("acks=all with a voter down: %v, want NOT_ENOUGH_REPLICAS", err)
			}
			return nil
		})
		leaderOnly := kafkaClient(t, []string{follower.kafkaAddr}, kgo.ProducerLinger(0), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()))
		produceSync(t, leaderOnly, &kgo.Record{Topic: "durable", Value: []byte("acks=1")})
		victim.start()
		waitFor(t, 30*time.Second, func() error {
			return strict.ProduceSync(ctx, &kgo.Record{Topic: "durable", Value: []byte("three again")}).FirstErr()
		})
	})
}
