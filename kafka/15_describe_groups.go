package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
)

func init() { register(kmsg.DescribeGroups.Int16(), 0, 5, answerNow(handleDescribeGroups)) }

func handleDescribeGroups(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		co, leader := c.coordinator(name)
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group = name
		if g.ErrorCode = c.groupDenied(auth.Read, name); g.ErrorCode != 0 || !leader {
			if g.ErrorCode == 0 {
				g.ErrorCode = kerr.NotCoordinator.Code
			}
			resp.Groups = append(resp.Groups, g)
			continue
		}
		if g.ErrorCode = co.load(name); g.ErrorCode != 0 {
			resp.Groups = append(resp.Groups, g)
			continue
		}
		v, _ := co.describe(name) // a snapshot: safe to read without the lock
		g.State, g.ProtocolType, g.Protocol = v.state, v.protocolType, v.protocol
		for _, m := range v.members {
			dm := kmsg.NewDescribeGroupsResponseGroupMember()
			dm.MemberID, dm.ClientID, dm.ClientHost = m.id, m.clientID, m.clientHost
			dm.ProtocolMetadata, dm.MemberAssignment = m.metadata, m.assignment
			if m.instanceID != "" {
				dm.InstanceID = kmsg.StringPtr(m.instanceID)
			}
			g.Members = append(g.Members, dm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}
