package kafka

import (
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/command"
)

func init() {
	register(kmsg.IncrementalAlterConfigs.Int16(), 0, 1, answerNow(handleIncrementalAlterConfigs))
}

// handleIncrementalAlterConfigs sets or deletes (returns to the default)
// the named configs and leaves the others as they are. APPEND and
// SUBTRACT apply to list configs, which no topic config waggle stores is.
func handleIncrementalAlterConfigs(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		r := kmsg.NewIncrementalAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		if rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig {
			r.ErrorCode, r.ErrorMessage = c.alterGroupConfig(rr.ResourceName, false, req.ValidateOnly, groupConfigChanges(rr.Configs))
			resp.Resources = append(resp.Resources, r)
			continue
		}
		r.ErrorCode, r.ErrorMessage = c.alterTopic(rr.ResourceType, rr.ResourceName, req.ValidateOnly, func(f command.LogFormat) ([]command.TopicSetting, string) {
			var settings []command.TopicSetting
			for _, cfg := range rr.Configs {
				switch cfg.Op {
				case kmsg.IncrementalAlterConfigOpSet:
				case kmsg.IncrementalAlterConfigOpDelete:
					switch d, ok := topicConfigDefOf(cfg.Name); {
					case !ok:
						return nil, "unknown topic config " + cfg.Name
					case slices.Contains(storedConfigs(f), cfg.Name):
						settings = append(settings, command.TopicSetting{Name: cfg.Name}) // 0: back to the default
					case !d.fixed:
						return nil, cfg.Name + " needs every node upgraded first (log format " + strconv.Itoa(int(command.ConfigSince(cfg.Name))) + ")"
					}
					continue
				default:
					return nil, cfg.Name + " is not a list config: only SET and DELETE apply"
				}
				s, stored, refusal := topicSetting(cfg.Name, cfg.Value, f)
				if refusal != "" {
					return nil, refusal
				}
				if stored {
					settings = append(settings, s)
				}
			}
			return settings, ""
		})
		resp.Resources = append(resp.Resources, r)
	}
	return resp, nil
}

// groupConfigChanges turns a GROUP resource's operations into changes:
// SET sets, DELETE returns to the default, and APPEND and SUBTRACT (list
// configs only; no group config is one) set an empty name the check
// refuses.
func groupConfigChanges(configs []kmsg.IncrementalAlterConfigsRequestResourceConfig) []command.GroupConfigChange {
	out := make([]command.GroupConfigChange, 0, len(configs))
	for _, cfg := range configs {
		switch cfg.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			out = append(out, command.GroupConfigChange{Name: cfg.Name, Value: derefString(cfg.Value)})
		case kmsg.IncrementalAlterConfigOpDelete:
			out = append(out, command.GroupConfigChange{Name: cfg.Name, Remove: true})
		default:
			out = append(out, command.GroupConfigChange{Name: cfg.Name + " (APPEND and SUBTRACT apply to list configs only)"})
		}
	}
	return out
}
