package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(kmsg.Heartbeat.Int16(), 0, 4, answerNow(handleHeartbeat)) }

func handleHeartbeat(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	co, code := c.classic(req.Group)
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	resp.ErrorCode = co.heartbeat(req.Group, req.MemberID, req.InstanceID, req.Generation)
	return resp, nil
}
