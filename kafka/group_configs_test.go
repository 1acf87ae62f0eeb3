package kafka

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/command"
)

func TestGroupConfigChecks(t *testing.T) {
	s := &Server{cfg: DefaultConfig()}
	set := func(name, value string) command.GroupConfigChange {
		return command.GroupConfigChange{Name: name, Value: value}
	}
	for _, tc := range []struct {
		name    string
		have    map[string]string
		replace bool
		changes []command.GroupConfigChange
		refusal string // a part of it; "" accepts
	}{
		{"known values", nil, false, []command.GroupConfigChange{set("share.auto.offset.reset", "earliest"), set("share.record.lock.duration.ms", "15000")}, ""},
		{"by duration", nil, false, []command.GroupConfigChange{set("share.auto.offset.reset", "by_duration:P1DT2H30M")}, ""},
		{"bad duration", nil, false, []command.GroupConfigChange{set("share.auto.offset.reset", "by_duration:1h")}, "share.auto.offset.reset must be"},
		{"unknown name", nil, false, []command.GroupConfigChange{set("share.bogus", "1")}, "unknown group config share.bogus"},
		{"out of range", nil, false, []command.GroupConfigChange{set("share.delivery.count.limit", "11")}, "share.delivery.count.limit must be an integer from 2 to 10"},
		{"not a number", nil, false, []command.GroupConfigChange{set("consumer.session.timeout.ms", "soon")}, "consumer.session.timeout.ms must be"},
		{"heartbeat above session", nil, false, []command.GroupConfigChange{set("consumer.heartbeat.interval.ms", "60000")}, "must be below consumer.session.timeout.ms"},
		{"pair with what is set", map[string]string{"consumer.session.timeout.ms": "10000"}, false,
			[]command.GroupConfigChange{set("consumer.heartbeat.interval.ms", "20000")}, "must be below"},
		{"replace forgets what is set", map[string]string{"consumer.session.timeout.ms": "10000"}, true,
			[]command.GroupConfigChange{set("consumer.heartbeat.interval.ms", "20000")}, ""},
		{"remove back to the default", map[string]string{"consumer.heartbeat.interval.ms": "2000", "consumer.session.timeout.ms": "3000"}, false,
			[]command.GroupConfigChange{{Name: "consumer.session.timeout.ms", Remove: true}}, ""},
		{"list operation", nil, false, groupConfigChanges([]kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "share.isolation.level", Op: kmsg.IncrementalAlterConfigOpAppend}}),
			"APPEND and SUBTRACT apply to list configs only"},
	} {
		got := s.checkGroupConfigs(tc.have, tc.replace, tc.changes)
		if (tc.refusal == "") != (got == "") || !strings.Contains(got, tc.refusal) {
			t.Errorf("%s: refusal %q, want one with %q", tc.name, got, tc.refusal)
		}
	}
}

func TestParseISODuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"PT1H": time.Hour, "P1D": 24 * time.Hour, "P2DT3H4M5S": 51*time.Hour + 4*time.Minute + 5*time.Second, "PT0.5S": 500 * time.Millisecond} {
		if got, err := parseISODuration(in); err != nil || got != want {
			t.Errorf("%s: %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "P", "PT", "1H", "PT1D", "P1H", "PT1S1M", "P1DT", "PTT1H"} {
		if _, err := parseISODuration(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

// DescribeConfigs lists every group config, the ones set as GROUP_CONFIG
// and the rest as defaults, the consumer ones taken from the broker's.
func TestDescribeGroupConfigs(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ConsumerGroups.SessionTimeout = 20 * time.Second
	s := &Server{cfg: cfg}
	got := s.describeGroupConfigs(map[string]string{"share.auto.offset.reset": "earliest"}, nil, true)
	if len(got) != len(groupConfigDefs) {
		t.Fatalf("%d configs described, want %d", len(got), len(groupConfigDefs))
	}
	for _, c := range got {
		switch c.Name {
		case "share.auto.offset.reset":
			if *c.Value != "earliest" || c.Source != kmsg.ConfigSourceGroupConfig || c.IsDefault {
				t.Errorf("set config: %s=%s source %v default %v", c.Name, *c.Value, c.Source, c.IsDefault)
			}
		case "consumer.session.timeout.ms":
			if *c.Value != "20000" || c.Source != kmsg.ConfigSourceDefaultConfig || !c.IsDefault {
				t.Errorf("default from the broker: %s=%s source %v", c.Name, *c.Value, c.Source)
			}
		}
		if c.Documentation == nil || *c.Documentation == "" {
			t.Errorf("%s: no documentation", c.Name)
		}
	}
	if only := s.describeGroupConfigs(nil, []string{"share.isolation.level"}, false); len(only) != 1 || *only[0].Value != "read_uncommitted" {
		t.Fatalf("named config: %+v", only)
	}
}

// A KIP-848 group's own session timeout and heartbeat interval win over
// the coordinator's.
func TestConsumerGroupTimeoutsFromGroupConfig(t *testing.T) {
	co, clk := newTestCoordinator()
	co.consumerCfg = DefaultConsumerGroupConfig() // 45 s, 5 s
	c := newClient(t, co, "g", "a", "a")
	req := c.request()
	resp := c.co.consumerHeartbeat(req, "c", "h", heartbeatLookups{fetched: map[string]*topicMeta{"a": &topicA},
		session: 2 * time.Second, heartbeat: 500 * time.Millisecond})
	if resp.ErrorCode != 0 || resp.HeartbeatIntervalMillis != 500 {
		t.Fatalf("heartbeat interval %d ms (error %d), want the group's 500", resp.HeartbeatIntervalMillis, resp.ErrorCode)
	}
	clk.add(3 * time.Second)
	co.expireConsumers(clk.now())
	if _, found := co.describeConsumer("g"); found {
		t.Fatal("member kept past the group's 2 s session timeout")
	}
}

// A BROKER resource describes the broker configs behind the topic
// defaults and the listener's and groups' flags, read-only and static.
func TestDescribeBrokerConfigs(t *testing.T) {
	f := newFakeBroker()
	cfg := DefaultConfig()
	cfg.DefaultPartitions, cfg.ConsumerGroups.SessionTimeout = 3, 20*time.Second
	s := New(f, cfg, slog.New(slog.DiscardHandler))
	defer s.Close()
	got := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range s.brokerConfigs(nil, true) {
		if _, twice := got[c.Name]; twice {
			t.Fatalf("%s described twice", c.Name)
		}
		if c.Source != kmsg.ConfigSourceStaticBrokerConfig || !c.ReadOnly || c.Documentation == nil {
			t.Errorf("%s: source %v read-only %v doc %v", c.Name, c.Source, c.ReadOnly, c.Documentation)
		}
		got[c.Name] = c
	}
	for name, want := range map[string]string{"num.partitions": "3", "group.consumer.session.timeout.ms": "20000",
		"message.max.bytes": "1048588", "broker.id": "1", "group.share.delivery.count.limit": "5"} {
		if c, ok := got[name]; !ok || *c.Value != want {
			t.Errorf("%s: %v, want %s", name, got[name].Value, want)
		}
	}
	if only := s.brokerConfigs([]string{"num.partitions"}, false); len(only) != 1 {
		t.Fatalf("asked for one config, got %d", len(only))
	}
}
