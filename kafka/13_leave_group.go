package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(kmsg.LeaveGroup.Int16(), 0, 5, answerNow(handleLeaveGroup)) }

func handleLeaveGroup(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	co, code := c.classic(req.Group)
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	if req.Version < 3 {
		resp.ErrorCode = co.leave(req.Group, []leaver{{memberID: req.MemberID}})[0]
		return resp, nil
	}
	leavers := make([]leaver, len(req.Members))
	for i, m := range req.Members {
		leavers[i] = leaver{memberID: m.MemberID, instanceID: m.InstanceID}
	}
	for i, code := range co.leave(req.Group, leavers) {
		m := kmsg.NewLeaveGroupResponseMember()
		m.MemberID, m.InstanceID, m.ErrorCode = req.Members[i].MemberID, req.Members[i].InstanceID, code
		resp.Members = append(resp.Members, m)
	}
	return resp, nil
}
