package kafka

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
)

// Group configs: Kafka's GROUP config resource (KIP-848, KIP-932), set
// with IncrementalAlterConfigs or AlterConfigs and read with
// DescribeConfigs, kept in the store of the raft group that coordinates
// the group, so every node answers them and a new leader applies them.
// KIP-848 groups apply consumer.session.timeout.ms and
// consumer.heartbeat.interval.ms; the share.* configs are kept and
// described for share groups (KIP-932).

// groupConfigDef is one config a group may set.
type groupConfigDef struct {
	name string
	typ  kmsg.ConfigType
	// def is the value in force when the group sets none.
	def func(s *Server) string
	// check refuses a value ("" accepts it).
	check func(v string) string
	doc   string
}

// intWithin checks an integer config's range.
func intWithin(lo, hi int64) func(string) string {
	return func(v string) string {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			return fmt.Sprintf("must be an integer from %d to %d", lo, hi)
		}
		return ""
	}
}

// oneOf checks an enumerated config.
func oneOf(values ...string) func(string) string {
	return func(v string) string {
		if !slices.Contains(values, v) {
			return "must be one of " + strings.Join(values, ", ")
		}
		return ""
	}
}

func constant(v string) func(*Server) string { return func(*Server) string { return v } }

func millis(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// groupConfigDefs are the configs a group may set, by name in order.
var groupConfigDefs = []groupConfigDef{
	{"consumer.heartbeat.interval.ms", kmsg.ConfigTypeInt, func(s *Server) string { return millis(s.cfg.ConsumerGroups.HeartbeatInterval) },
		intWithin(100, 3_600_000), "how often members of this KIP-848 group heartbeat (below consumer.session.timeout.ms)"},
	{"consumer.session.timeout.ms", kmsg.ConfigTypeInt, func(s *Server) string { return millis(s.cfg.ConsumerGroups.SessionTimeout) },
		intWithin(1_000, 3_600_000), "a member of this KIP-848 group not heard from for this long is removed"},
	{"share.auto.offset.reset", kmsg.ConfigTypeString, constant("latest"), checkShareOffsetReset,
		"where a share group starts reading a partition: latest, earliest or by_duration:<ISO-8601 duration>"},
	{"share.delivery.count.limit", kmsg.ConfigTypeInt, constant("5"), intWithin(2, 10),
		"deliveries of a record to a share group before it is archived"},
	{"share.heartbeat.interval.ms", kmsg.ConfigTypeInt, func(s *Server) string { return millis(s.cfg.ConsumerGroups.HeartbeatInterval) }, intWithin(100, 3_600_000),
		"how often members of this share group heartbeat"},
	{"share.isolation.level", kmsg.ConfigTypeString, constant("read_uncommitted"), oneOf("read_committed", "read_uncommitted"),
		"whether a share group reads records of open Kafka transactions"},
	{"share.partition.max.record.locks", kmsg.ConfigTypeInt, constant("2000"), intWithin(100, 10_000),
		"records of one partition a share group may have acquired at once"},
	{"share.record.lock.duration.ms", kmsg.ConfigTypeInt, constant("30000"), intWithin(1_000, 3_600_000),
		"how long a share group member holds an acquired record"},
	{"share.session.timeout.ms", kmsg.ConfigTypeInt, func(s *Server) string { return millis(s.cfg.ConsumerGroups.SessionTimeout) }, intWithin(1_000, 3_600_000),
		"a member of this share group not heard from for this long is removed"},
}

// checkShareOffsetReset accepts latest, earliest and by_duration:<ISO-8601
// duration> (KIP-1106).
func checkShareOffsetReset(v string) string {
	if v == "latest" || v == "earliest" {
		return ""
	}
	if d, ok := strings.CutPrefix(v, "by_duration:"); ok {
		if _, err := parseISODuration(d); err == nil {
			return ""
		}
	}
	return "must be latest, earliest or by_duration:<ISO-8601 duration> (e.g. by_duration:PT1H)"
}

// parseISODuration reads an ISO-8601 duration of days, hours, minutes and
// seconds (PnDTnHnMnS), the form Java's Duration.parse takes.
func parseISODuration(s string) (time.Duration, error) {
	bad := errors.New("not an ISO-8601 duration")
	rest, ok := strings.CutPrefix(s, "P")
	if !ok || rest == "" {
		return 0, bad
	}
	var total time.Duration
	inTime, units := false, "D"
	for rest != "" {
		if rest[0] == 'T' {
			if inTime {
				return 0, bad
			}
			inTime, units, rest = true, "HMS", rest[1:]
			if rest == "" {
				return 0, bad
			}
			continue
		}
		i := strings.IndexFunc(rest, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
		if i <= 0 {
			return 0, bad
		}
		n, err := strconv.ParseFloat(rest[:i], 64)
		u := rest[i]
		j := strings.IndexByte(units, u)
		if err != nil || j < 0 {
			return 0, bad
		}
		units = units[j+1:] // units come in order, each once
		per := map[byte]time.Duration{'D': 24 * time.Hour, 'H': time.Hour, 'M': time.Minute, 'S': time.Second}[u]
		total += time.Duration(n * float64(per))
		rest = rest[i+1:]
	}
	return total, nil
}

func groupConfigDefOf(name string) (groupConfigDef, bool) {
	i := slices.IndexFunc(groupConfigDefs, func(d groupConfigDef) bool { return d.name == name })
	if i < 0 {
		return groupConfigDef{}, false
	}
	return groupConfigDefs[i], true
}

// checkGroupConfigs refuses unknown names and bad values, and a pair of
// consumer timeouts that cannot work together once the changes apply to
// what the group has set (nil: nothing).
func (s *Server) checkGroupConfigs(set map[string]string, replace bool, changes []command.GroupConfigChange) string {
	after := map[string]string{}
	if !replace {
		for k, v := range set {
			after[k] = v
		}
	}
	for _, ch := range changes {
		def, ok := groupConfigDefOf(ch.Name)
		if !ok {
			return "unknown group config " + ch.Name
		}
		if ch.Remove {
			delete(after, ch.Name)
			continue
		}
		if refusal := def.check(ch.Value); refusal != "" {
			return ch.Name + " " + refusal
		}
		after[ch.Name] = ch.Value
	}
	value := func(name string) int64 {
		v, ok := after[name]
		if !ok {
			def, _ := groupConfigDefOf(name)
			v = def.def(s)
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	if value("consumer.heartbeat.interval.ms") >= value("consumer.session.timeout.ms") {
		return "consumer.heartbeat.interval.ms must be below consumer.session.timeout.ms"
	}
	if value("share.heartbeat.interval.ms") >= value("share.session.timeout.ms") {
		return "share.heartbeat.interval.ms must be below share.session.timeout.ms"
	}
	return ""
}

// groupConfig answers a group's configs from the store of the raft group
// that coordinates it (nil: none set).
func (s *Server) groupConfig(group string) (map[string]string, error) {
	return s.group(s.placedIn(group)).GroupConfig(group)
}

// alterGroupConfig checks and applies one GROUP resource of AlterConfigs
// or IncrementalAlterConfigs (replace: AlterConfigs).
func (c *conn) alterGroupConfig(group string, replace, validateOnly bool, changes []command.GroupConfigChange) (int16, *string) {
	refuse := func(code int16, msg string) (int16, *string) { return code, kmsg.StringPtr(msg) }
	if !broker.ValidGroupName(group) {
		return refuse(kerr.InvalidGroupID.Code, "invalid group id")
	}
	if code := c.groupDenied(auth.Manage, group); code != 0 {
		return code, nil
	}
	b := c.s.writer(c.s.placedIn(group))
	if b.LogFormat() < command.LogFormat7 {
		return refuse(kerr.InvalidRequest.Code, broker.ErrUpgradeInProgress.Error())
	}
	set, err := c.s.groupConfig(group)
	if err != nil {
		return lookupCode(err), nil
	}
	if refusal := c.s.checkGroupConfigs(set, replace, changes); refusal != "" {
		return refuse(kerr.InvalidConfig.Code, refusal)
	}
	if validateOnly {
		return 0, nil
	}
	if err := b.AlterGroupConfig(group, replace, changes); err != nil {
		return refuse(errCode(err), err.Error())
	}
	return 0, nil
}

// describeGroupConfigs answers DescribeConfigs for a GROUP resource: every
// config, set on the group (GROUP_CONFIG) or the default in force
// (DEFAULT_CONFIG).
func (s *Server) describeGroupConfigs(set map[string]string, names []string, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, d := range groupConfigDefs {
		if names != nil && !slices.Contains(names, d.name) {
			continue
		}
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name, rc.ConfigType = d.name, d.typ
		if v, ok := set[d.name]; ok {
			rc.Value, rc.Source = kmsg.StringPtr(v), kmsg.ConfigSourceGroupConfig
		} else {
			rc.Value, rc.Source, rc.IsDefault = kmsg.StringPtr(d.def(s)), kmsg.ConfigSourceDefaultConfig, true
		}
		if docs {
			rc.Documentation = kmsg.StringPtr(d.doc)
		}
		out = append(out, rc)
	}
	return out
}

// consumerTimeouts is what a KIP-848 group's configs make of its session
// timeout and heartbeat interval (zero: the coordinator's own).
func consumerTimeouts(set map[string]string) (session, heartbeat time.Duration) {
	return millisDuration(configMillis(set, "consumer.session.timeout.ms")), millisDuration(configMillis(set, "consumer.heartbeat.interval.ms"))
}

// derefString is *p, or "" for nil.
func derefString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// configMillis is an integer config of set in milliseconds (0 when unset).
func configMillis(set map[string]string, name string) int64 {
	n, err := strconv.ParseInt(set[name], 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

func millisDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
