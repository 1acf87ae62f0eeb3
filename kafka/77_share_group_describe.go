package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
)

func init() {
	register(kmsg.ShareGroupDescribe.Int16(), 1, 1, answerNow(handleShareGroupDescribe))
}

// handleShareGroupDescribe describes share groups: epoch and every member
// with its subscription and assignment. Another kind of group, or none,
// answers GROUP_ID_NOT_FOUND, as Kafka does.
func handleShareGroupDescribe(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, name := range req.GroupIDs {
		co, leader := c.coordinator(name)
		g := kmsg.NewShareGroupDescribeResponseGroup()
		g.GroupID = name
		v, found := shareGroupView{}, false
		switch g.ErrorCode = c.groupDenied(auth.Read, name); {
		case g.ErrorCode != 0:
		case !leader:
			g.ErrorCode = kerr.NotCoordinator.Code
		default:
			if v, found = co.describeShare(name); !found {
				g.ErrorCode = kerr.GroupIDNotFound.Code
				g.ErrorMessage = kmsg.StringPtr("Group " + name + " is not a share group.")
			}
		}
		if !found {
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g.GroupState, g.GroupEpoch, g.AssignmentEpoch, g.Assignor = v.state(), v.epoch, v.epoch, "simple"
		for _, m := range v.members {
			dm := kmsg.NewShareGroupDescribeResponseGroupMember()
			dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.id, m.epoch, m.clientID, m.clientHost
			if m.rackID != "" {
				dm.RackID = kmsg.StringPtr(m.rackID)
			}
			dm.SubscribedTopicNames = m.subscribed
			for _, a := range m.assigned {
				dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions,
					kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{TopicID: a.TopicID, Topic: a.Topic, Partitions: a.Partitions})
			}
			g.Members = append(g.Members, dm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}
