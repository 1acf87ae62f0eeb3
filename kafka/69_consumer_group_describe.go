package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
)

func init() {
	register(kmsg.ConsumerGroupDescribe.Int16(), 0, 1, answerNow(handleConsumerGroupDescribe))
}

// memberTypeConsumer is ConsumerGroupDescribe v1's MemberType of a member
// speaking the consumer protocol (0 would be a classic member).
const memberTypeConsumer = 1

// handleConsumerGroupDescribe describes KIP-848 consumer groups: epochs,
// assignor, and every member with its current and target assignment. A
// classic group, or none, answers GROUP_ID_NOT_FOUND, as Kafka does.
func handleConsumerGroupDescribe(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, name := range req.Groups {
		co, leader := c.coordinator(name)
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.Group = name
		v, found := consumerGroupView{}, false
		switch g.ErrorCode = c.groupDenied(auth.Read, name); {
		case g.ErrorCode != 0:
		case !leader:
			g.ErrorCode = kerr.NotCoordinator.Code
		default:
			if v, found = co.describeConsumer(name); !found {
				g.ErrorCode = kerr.GroupIDNotFound.Code
				g.ErrorMessage = kmsg.StringPtr("Group " + name + " is not a consumer group.")
			}
		}
		if !found {
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName = v.state, v.epoch, v.assignmentEpoch, v.assignor
		for _, m := range v.members {
			dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.id, m.epoch, m.clientID, m.clientHost
			if m.instanceID != "" {
				dm.InstanceID = kmsg.StringPtr(m.instanceID)
			}
			if m.rackID != "" {
				dm.RackID = kmsg.StringPtr(m.rackID)
			}
			dm.SubscribedTopics = m.names
			if dm.SubscribedTopics == nil {
				dm.SubscribedTopics = []string{}
			}
			if m.regex != "" {
				dm.SubscribedTopicRegex = kmsg.StringPtr(m.regex)
			}
			dm.Assignment.TopicPartitions, dm.TargetAssignment.TopicPartitions = m.assigned, m.target
			dm.MemberType = memberTypeConsumer
			g.Members = append(g.Members, dm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}
