package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.JoinGroup.Int16(), 0, 9, handleJoinGroup) }

// handleJoinGroup's reply waits until the join phase ends (every member
// rejoined, or the rebalance timeout passed).
func handleJoinGroup(c *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.JoinGroupRequest)
	if !c.coordinating() {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.MemberID = kerr.NotCoordinator.Code, req.MemberID
		return ready(resp, nil)
	}
	return c.s.groups.join(req, c.clientID, c.nc.RemoteAddr().String()), nil
}
