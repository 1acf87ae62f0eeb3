package integration

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic configs change live through kadm: IncrementalAlterConfigs (set,
// delete) and AlterConfigs (the whole set, the rest back to defaults).
// Each change shows in DescribeConfigs and takes effect: a lower
// max.message.bytes refuses larger records, a short retention.ms drops
// what is older.
func TestKafkaTopicConfigsAlterLive(t *testing.T) {
	n := startSingle(t)
	cl := kafkaClient(t, []string{n.kafkaAddr}, kgo.DefaultProduceTopic("live"), kgo.ProducerLinger(0))
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	waitLogFormat(t, n, 2) // altering a topic is a format 2 entry
	createTopic(t, cl, "live", 1, nil)
	big := make([]byte, 2000)
	rand.Read(big)                              // incompressible: the batch stays over 1024 bytes
	produceSync(t, cl, &kgo.Record{Value: big}) // fits the default max.message.bytes

	alter := func(op kadm.IncrementalOp, name, value string) {
		t.Helper()
		var v *string
		if op == kadm.SetConfig {
			v = &value
		}
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: name, Value: v}}, "live")
		if err != nil || len(rs) != 1 || rs[0].Err != nil {
			t.Fatalf("IncrementalAlterConfigs op %d %s=%s: %+v, %v", op, name, value, rs, err)
		}
	}
	alter(kadm.SetConfig, "max.message.bytes", "1024")
	if got := describeTopicConfigs(t, cl, "live")["max.message.bytes"]; got != "1024" {
		t.Fatalf("max.message.bytes after the alter: %s", got)
	}
	// kadm asks for synonyms: a set config shows the topic's value, then
	// the broker default behind it; waggle's fixed configs show their one value.
	described, err := adm.DescribeTopicConfigs(ctx, "live")
	if err != nil || described[0].Err != nil {
		t.Fatalf("DescribeConfigs: %+v, %v", described, err)
	}
	byName := map[string]kadm.Config{}
	for _, c := range described[0].Configs {
		byName[c.Key] = c
	}
	mmb := byName["max.message.bytes"]
	if mmb.Source != kmsg.ConfigSourceDynamicTopicConfig || len(mmb.Synonyms) != 2 ||
		mmb.Synonyms[1].Key != "message.max.bytes" || mmb.Synonyms[1].Source != kmsg.ConfigSourceDefaultConfig || *mmb.Synonyms[1].Value != "1048588" {
		t.Fatalf("max.message.bytes as described: %+v", mmb)
	}
	ret := byName["retention.ms"]
	if ret.Source != kmsg.ConfigSourceDefaultConfig || len(ret.Synonyms) != 1 || ret.Synonyms[0].Key != "log.retention.ms" {
		t.Fatalf("retention.ms as described: %+v", ret)
	}
	if u := byName["unclean.leader.election.enable"]; u.Value == nil || *u.Value != "false" || u.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("unclean.leader.election.enable as described: %+v", u)
	}
	// The broker's configs: the defaults behind the topic configs, and
	// the listener's and groups' flags, static and read-only.
	brokerCfgs, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil || len(brokerCfgs) != 1 || brokerCfgs[0].Err != nil {
		t.Fatalf("DescribeConfigs of the broker: %+v, %v", brokerCfgs, err)
	}
	brokerByName := map[string]kadm.Config{}
	for _, c := range brokerCfgs[0].Configs {
		brokerByName[c.Key] = c
	}
	for name, want := range map[string]string{"log.retention.ms": *ret.Synonyms[0].Value, "message.max.bytes": "1048588", "num.partitions": "1"} {
		c := brokerByName[name]
		if c.Value == nil || *c.Value != want || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
			t.Fatalf("broker config %s: %+v, want %s (static)", name, c, want)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: big}).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("a 2000-byte record after max.message.bytes=1024: %v, want MESSAGE_TOO_LARGE", err)
	}
	alter(kadm.DeleteConfig, "max.message.bytes", "")
	produceSync(t, cl, &kgo.Record{Value: big}) // the default again

	// Refusals: an unknown config, a bad value, APPEND to a scalar.
	for _, ac := range []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "no.such.config", Value: kadm.StringPtr("1")},
		{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("soon")},
		{Op: kadm.AppendConfig, Name: "retention.ms", Value: kadm.StringPtr("1")},
		{Op: kadm.SetConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact,purge")},        // not a policy
		{Op: kadm.SetConfig, Name: "unclean.leader.election.enable", Value: kadm.StringPtr("true")}, // raft allows no unclean leader
	} {
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{ac}, "live")
		if err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, kerr.InvalidConfig) {
			t.Errorf("alter op %d %s=%v: %+v, %v; want INVALID_CONFIG", ac.Op, ac.Name, *ac.Value, rs, err)
		}
	}

	// AlterConfigs replaces the set: retention.ms and segment.ms short,
	// everything not named back to its default.
	alter(kadm.SetConfig, "retention.bytes", "1000000")
	rs, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{
		{Name: "retention.ms", Value: kadm.StringPtr("2000")}, {Name: "segment.ms", Value: kadm.StringPtr("1000")},
	}, "live")
	if err != nil || len(rs) != 1 || rs[0].Err != nil {
		t.Fatalf("AlterConfigs: %+v, %v", rs, err)
	}
	configs := describeTopicConfigs(t, cl, "live")
	if configs["retention.ms"] != "2000" || configs["segment.ms"] != "1000" || configs["retention.bytes"] != "-1" {
		t.Fatalf("after AlterConfigs: %v", configs)
	}
	// The retention applies to records already there: they go once their
	// segment is sealed and older than 2 s.
	waitFor(t, 30*time.Second, func() error {
		produceSync(t, cl, &kgo.Record{Value: []byte(strconv.Itoa(int(time.Now().UnixMilli())))})
		if e := earliestOffset(t, cl, "live"); e < 2 {
			return fmt.Errorf("the log still starts at %d", e)
		}
		return nil
	})
}

// waitLogFormat waits until the cluster n belongs to writes raft log
// format f or a later one (the leader raises it once every member reads
// it).
func waitLogFormat(t testing.TB, n *node, f int) {
	t.Helper()
	waitFor(t, 10*time.Second, func() error {
		var cl struct {
			LogFormat int `json:"logFormat"`
		}
		if status := getJSON(t, n.url("/api/v1/cluster"), &cl); status != 200 || cl.LogFormat < f {
			return fmt.Errorf("the cluster writes log format %d (status %d), want %d or later", cl.LogFormat, status, f)
		}
		return nil
	})
}

// DeleteRecords (kadm) moves a partition's log start: ListOffsets earliest
// answers it and a consumer from the start reads from it on (a fetch below
// a log start is out of range: TestKafkaRetentionDropsExpiredSegments); an
// offset past the high watermark is refused, one below the start changes
// nothing.
func TestKafkaDeleteRecordsMovesTheLogStart(t *testing.T) {
	n := startSingle(t)
	waitLogFormat(t, n, 2)
	cl := kafkaClient(t, []string{n.kafkaAddr}, kgo.DefaultProduceTopic("trim"), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	createTopic(t, cl, "trim", 2, nil)
	for i := range 10 {
		produceSync(t, cl, &kgo.Record{Partition: 0, Value: []byte(strconv.Itoa(i))})
	}

	var offsets kadm.Offsets
	offsets.Add(kadm.Offset{Topic: "trim", Partition: 0, At: 6})
	offsets.Add(kadm.Offset{Topic: "trim", Partition: 1, At: 1}) // past its high watermark 0
	rs, err := adm.DeleteRecords(ctx, offsets)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := rs.Lookup("trim", 0); r.Err != nil || r.LowWatermark != 6 {
		t.Fatalf("DeleteRecords to 6 on partition 0: %+v", r)
	}
	if r, _ := rs.Lookup("trim", 1); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("DeleteRecords past the high watermark: %+v, want OFFSET_OUT_OF_RANGE", r)
	}
	if e := earliestOffset(t, cl, "trim"); e != 6 {
		t.Fatalf("earliest offset after DeleteRecords: %d, want 6", e)
	}
	recs := consumeN(t, []string{n.kafkaAddr}, "trim", 4)
	for i, r := range recs {
		if r.Offset != int64(6+i) || string(r.Value) != strconv.Itoa(6+i) {
			t.Fatalf("record %d read from the start: offset %d value %q", i, r.Offset, r.Value)
		}
	}
	// An earlier offset than the start changes nothing.
	offsets = kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "trim", Partition: 0, At: 2})
	rs, err = adm.DeleteRecords(ctx, offsets)
	if r, _ := rs.Lookup("trim", 0); err != nil || r.Err != nil || r.LowWatermark != 6 {
		t.Fatalf("DeleteRecords below the start: %+v, %v", r, err)
	}
}

// CreateTopics v5+ answers the new topic's configs, as set or defaulted.
func TestKafkaCreateTopicsEchoesConfigs(t *testing.T) {
	n := startSingle(t)
	cl := kafkaClient(t, []string{n.kafkaAddr})
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis = 7, 5000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "echo", 1, 1
	c := kmsg.NewCreateTopicsRequestTopicConfig()
	c.Name, c.Value = "retention.ms", kmsg.StringPtr("5000")
	rt.Configs = append(rt.Configs, c)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics: %+v, %v", resp, err)
	}
	got := map[string]kmsg.CreateTopicsResponseTopicConfig{}
	for _, cfg := range resp.Topics[0].Configs {
		got[cfg.Name] = cfg
	}
	if r := got["retention.ms"]; r.Value == nil || *r.Value != "5000" || r.Source != int8(kmsg.ConfigSourceDynamicTopicConfig) {
		t.Errorf("retention.ms echoed as %+v, want 5000 from DYNAMIC_TOPIC_CONFIG", r)
	}
	if m := got["max.message.bytes"]; m.Value == nil || m.Source != int8(kmsg.ConfigSourceDefaultConfig) {
		t.Errorf("max.message.bytes echoed as %+v, want its default", m)
	}
}

// The ACL APIs answer instead of closing the connection: without --auth
// SECURITY_DISABLED, as Kafka without an authorizer.
func TestKafkaACLRequestsAnswerSecurityDisabled(t *testing.T) {
	n := startSingle(t)
	cl := kafkaClient(t, []string{n.kafkaAddr})
	ctx := context.Background()
	describe := kmsg.NewPtrDescribeACLsRequest()
	describe.ResourceType, describe.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	describe.Operation, describe.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if resp, err := describe.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("DescribeAcls: %+v, %v; want SECURITY_DISABLED", resp, err)
	}
	create := kmsg.NewPtrCreateACLsRequest()
	create.Creations = append(create.Creations, kmsg.NewCreateACLsRequestCreation())
	if resp, err := create.RequestWith(ctx, cl); err != nil || len(resp.Results) != 1 || resp.Results[0].ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("CreateAcls: %+v, %v; want SECURITY_DISABLED", resp, err)
	}
}
