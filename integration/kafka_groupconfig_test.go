package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/command"
)

// Group configs (Kafka's GROUP config resource) set through a follower of
// three nodes: every node describes them, they survive a leader kill, a
// KIP-848 member is told the group's heartbeat interval, bad names and
// values are refused with the config named, and AlterConfigs replaces the
// set whole.
func TestGroupConfigsRoundTripAcrossNodes(t *testing.T) {
	c := startCluster(t, 3)
	requireLogFormat(t, c.leader(), int(command.LogFormat7))
	const group, topic = "cfg-group", "cfg-topic"
	admin := kafkaClient(t, []string{c.followers()[0].kafkaAddr})
	createTopic(t, admin, topic, 2, nil)

	alter := func(cl *kgo.Client, configs ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsResponseResource {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.Configs = kmsg.ConfigResourceTypeGroupConfig, group, configs
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Resources[0]
	}
	set := func(name, value string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value, cfg.Op = name, kmsg.StringPtr(value), kmsg.IncrementalAlterConfigOpSet
		return cfg
	}
	if r := alter(admin, set("share.auto.offset.reset", "earliest"), set("consumer.heartbeat.interval.ms", "700")); r.ErrorCode != 0 {
		t.Fatalf("alter: %v %v", kerr.ErrorForCode(r.ErrorCode), derefStr(r.ErrorMessage))
	}
	for name, want := range map[string]string{"share.bogus": "share.bogus", "share.delivery.count.limit": "share.delivery.count.limit"} {
		if r := alter(admin, set(name, "99")); r.ErrorCode != kerr.InvalidConfig.Code || !strings.Contains(derefStr(r.ErrorMessage), want) {
			t.Fatalf("%s=99: %v %q, want INVALID_CONFIG naming %s", name, kerr.ErrorForCode(r.ErrorCode), derefStr(r.ErrorMessage), want)
		}
	}

	// describe asks one node for the group's configs.
	describe := func(n *node) (map[string]string, map[string]kmsg.ConfigSource, error) {
		cl := kafkaClient(t, []string{n.kafkaAddr})
		defer cl.Close()
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		req.Resources = append(req.Resources, r)
		// Asked of that node itself: kgo sends DescribeConfigs anywhere.
		resp, err := req.RequestWith(context.Background(), cl.Broker(n.id))
		if err != nil {
			return nil, nil, err
		}
		if code := resp.Resources[0].ErrorCode; code != 0 {
			return nil, nil, kerr.ErrorForCode(code)
		}
		values, sources := map[string]string{}, map[string]kmsg.ConfigSource{}
		for _, cfg := range resp.Resources[0].Configs {
			values[cfg.Name], sources[cfg.Name] = derefStr(cfg.Value), cfg.Source
		}
		return values, sources, nil
	}
	expect := func(nodes []*node, want map[string]string) {
		t.Helper()
		for _, n := range nodes {
			waitFor(t, 10*time.Second, func() error {
				values, sources, err := describe(n)
				if err != nil {
					return err
				}
				for name, v := range want {
					if values[name] != v || sources[name] != kmsg.ConfigSourceGroupConfig {
						return fmt.Errorf("node %d: %s=%q (source %v), want %q set on the group", n.id, name, values[name], sources[name], v)
					}
				}
				if len(values) < 9 {
					return fmt.Errorf("node %d described %d configs", n.id, len(values))
				}
				return nil
			})
		}
	}
	expect(c.live(), map[string]string{"share.auto.offset.reset": "earliest", "consumer.heartbeat.interval.ms": "700"})

	// A leader kill loses nothing; the new leader tells a KIP-848 member
	// the group's heartbeat interval.
	old := c.leader()
	old.kill9()
	survivors := c.live()
	expect(survivors, map[string]string{"share.auto.offset.reset": "earliest", "consumer.heartbeat.interval.ms": "700"})
	newLeader := c.leader()
	member := kafkaClient(t, []string{newLeader.kafkaAddr})
	waitFor(t, 20*time.Second, func() error {
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames = group, "cfg-member", 10_000, []string{topic}
		resp, err := hb.RequestWith(context.Background(), member.Broker(newLeader.id))
		if err != nil {
			return err
		}
		if resp.ErrorCode != 0 {
			return kerr.ErrorForCode(resp.ErrorCode)
		}
		if resp.HeartbeatIntervalMillis != 700 {
			return fmt.Errorf("heartbeat interval %d ms, want the group's 700", resp.HeartbeatIntervalMillis)
		}
		return nil
	})

	// AlterConfigs replaces the set: what it leaves out returns to the
	// default.
	replace := kmsg.NewPtrAlterConfigsRequest()
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	only := kmsg.NewAlterConfigsRequestResourceConfig()
	only.Name, only.Value = "share.isolation.level", kmsg.StringPtr("read_committed")
	rr.Configs = append(rr.Configs, only)
	replace.Resources = append(replace.Resources, rr)
	resp, err := replace.RequestWith(context.Background(), member)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %v %+v", err, resp)
	}
	waitFor(t, 10*time.Second, func() error {
		values, sources, err := describe(survivors[1])
		if err != nil {
			return err
		}
		if values["share.isolation.level"] != "read_committed" || sources["share.auto.offset.reset"] != kmsg.ConfigSourceDefaultConfig || values["share.auto.offset.reset"] != "latest" {
			return fmt.Errorf("after replace: %v %v", values, sources)
		}
		return nil
	})
}

func derefStr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
