package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(kmsg.JoinGroup.Int16(), 0, 9, handleJoinGroup) }

// handleJoinGroup's reply waits until the join phase ends (every member
// rejoined, or the rebalance timeout passed).
func handleJoinGroup(c *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.JoinGroupRequest)
	co, code := c.classic(req.Group)
	if code != 0 {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.MemberID = code, req.MemberID
		return ready(resp, nil)
	}
	return co.join(req, c.clientID, c.nc.RemoteAddr().String()), nil
}
