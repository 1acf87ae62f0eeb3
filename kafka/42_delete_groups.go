package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
)

func init() { register(kmsg.DeleteGroups.Int16(), 0, 2, answerNow(handleDeleteGroups)) }

// handleDeleteGroups deletes groups without members, with their committed
// offsets.
func handleDeleteGroups(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	leader := c.coordinating()
	for _, name := range req.Groups {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group = name
		_, inMemory := c.s.groups.describe(name)
		switch {
		case c.groupDenied(auth.Manage, name) != 0:
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
		case !leader:
			g.ErrorCode = kerr.NotCoordinator.Code
		case !c.s.groups.forget(name):
			g.ErrorCode = kerr.NonEmptyGroup.Code
		default:
			n, err := c.s.svc.DeleteOffsets(name, true, nil)
			switch {
			case err != nil:
				g.ErrorCode = kerr.NotCoordinator.Code
			case n == 0 && !inMemory:
				g.ErrorCode = kerr.GroupIDNotFound.Code
			}
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}
