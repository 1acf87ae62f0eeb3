package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(kmsg.SyncGroup.Int16(), 0, 5, handleSyncGroup) }

// handleSyncGroup's reply waits, for a follower, until the leader has sent
// the assignment.
func handleSyncGroup(c *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.SyncGroupRequest)
	co, code := c.classic(req.Group)
	if code != 0 {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = code
		return ready(resp, nil)
	}
	return co.syncGroup(req), nil
}
