package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
)

func init() { register(kmsg.DeleteGroups.Int16(), 0, 2, answerNow(handleDeleteGroups)) }

// handleDeleteGroups deletes groups without members, with their committed
// offsets.
func handleDeleteGroups(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		_, leader := c.coordinator(name)
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group = name
		switch {
		case c.groupDenied(auth.Manage, name) != 0:
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
		case !broker.ValidGroupName(name):
			g.ErrorCode = kerr.InvalidGroupID.Code
		case !leader:
			g.ErrorCode = kerr.NotCoordinator.Code
		default:
			g.ErrorCode = deleteGroup(c, name)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

// deleteGroup forgets an empty group and deletes its committed offsets.
// forget decides "has members" and "known here" in one critical section; a
// describe before it would let a join slip in between.
func deleteGroup(c *conn, name string) int16 {
	co, _ := c.coordinator(name)
	if code := co.load(name); code != 0 { // a recorded group's members count
		return code
	}
	inMemory, empty := co.forget(name)
	if !empty {
		return kerr.NonEmptyGroup.Code
	}
	n, err := c.s.deleteOffsets(name, true, nil)
	switch {
	case err != nil:
		return kerr.NotCoordinator.Code
	case n == 0 && !inMemory:
		return kerr.GroupIDNotFound.Code
	}
	return 0
}
