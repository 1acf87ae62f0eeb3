package kafka

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/store"
)

func init() { register(kmsg.DescribeConfigs.Int16(), 0, 4, answerNow(handleDescribeConfigs)) }

func handleDescribeConfigs(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		r := kmsg.NewDescribeConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			if !c.describable(rr.ResourceName) {
				r.ErrorCode = kerr.TopicAuthorizationFailed.Code
				break
			}
			infos, err := c.s.svc.Topics([]string{rr.ResourceName})
			if err != nil || len(infos) == 0 {
				r.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			r.Configs = topicConfigs(infos[0], rr.ConfigNames)
		case kmsg.ConfigResourceTypeBroker:
			// No broker-level configs are settable; answer an empty list.
		default:
			r.ErrorCode = kerr.InvalidRequest.Code
		}
		resp.Resources = append(resp.Resources, r)
	}
	return resp, nil
}

func topicConfigs(t broker.TopicInfo, names []string) []kmsg.DescribeConfigsResponseResourceConfig {
	type entry struct {
		name, value string
		isDefault   bool
	}
	maxBytes := int64(min(t.MaxMessageBytes, broker.MaxTopicMessageBytes)) // what produces are held to
	all := []entry{
		{configCleanupPolicy, policyName(t.CleanupPolicy), !t.CleanupPolicySet},
		{configDeleteRetention, strconv.FormatInt(t.DeleteRetentionMs, 10), !t.DeleteRetentionMsSet},
		{configMaxMessageBytes, strconv.FormatInt(orDefault(maxBytes, broker.DefaultMaxMessageBytes), 10), maxBytes == 0},
		{configMinCleanableDirty, strconv.FormatFloat(float64(t.MinCleanableDirtyPPM)/1e6, 'g', -1, 64), !t.MinCleanableDirtyRatioSet},
		{configMinCompactionLag, strconv.FormatInt(t.MinCompactionLagMs, 10), !t.MinCompactionLagMsSet},
		{configRetentionBytes, strconv.FormatInt(orDefault(t.RetentionBytes, -1), 10), t.RetentionBytes == 0},
		{configRetentionMs, strconv.FormatInt(t.RetentionMs, 10), !t.RetentionSet},
		{configSegmentBytes, strconv.FormatInt(t.SegmentBytes, 10), !t.SegmentBytesSet},
		{configSegmentMs, strconv.FormatInt(t.SegmentMs, 10), !t.SegmentMsSet},
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, e := range all {
		if len(names) > 0 && !want[e.name] {
			continue
		}
		cfg := kmsg.NewDescribeConfigsResponseResourceConfig()
		// Every stored config is altered live (AlterConfigs,
		// IncrementalAlterConfigs).
		cfg.Name, cfg.Value, cfg.IsDefault = e.name, kmsg.StringPtr(e.value), e.isDefault
		cfg.Source = kmsg.ConfigSourceDynamicTopicConfig
		if e.isDefault {
			cfg.Source = kmsg.ConfigSourceDefaultConfig
		}
		out = append(out, cfg)
	}
	return out
}

func orDefault(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}

// policyName is cleanup.policy as Kafka writes it.
func policyName(p int64) string {
	switch p {
	case store.PolicyCompact:
		return "compact"
	case store.PolicyCompactDelete:
		return "compact,delete"
	}
	return "delete"
}
