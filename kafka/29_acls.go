package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The ACL APIs (DescribeAcls 29, CreateAcls 30, DeleteAcls 31) are answered
// so that tools show a reason instead of losing the connection. Without
// --auth there is no authorizer: SECURITY_DISABLED, as Kafka answers. With
// it, access is waggle's users with their roles and queue and group
// patterns (waggle user add/list), which Kafka ACLs do not express:
// INVALID_REQUEST, saying so.
func init() {
	register(kmsg.DescribeACLs.Int16(), 0, 3, answerNow(handleDescribeACLs))
	register(kmsg.CreateACLs.Int16(), 0, 3, answerNow(handleCreateACLs))
	register(kmsg.DeleteACLs.Int16(), 0, 3, answerNow(handleDeleteACLs))
}

const aclsNotKafkas = "waggle's access control is its users' roles and queue and group patterns (waggle user list), not Kafka ACLs"

// aclRefusal is the code and message every ACL request is answered with.
func (c *conn) aclRefusal() (int16, *string) {
	if !c.s.cfg.Auth.Enabled {
		return kerr.SecurityDisabled.Code, nil
	}
	return kerr.InvalidRequest.Code, kmsg.StringPtr(aclsNotKafkas)
}

func handleDescribeACLs(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	resp := kreq.ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.ErrorCode, resp.ErrorMessage = c.aclRefusal()
	return resp, nil
}

func handleCreateACLs(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	code, msg := c.aclRefusal()
	for range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode, r.ErrorMessage = code, msg
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func handleDeleteACLs(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	code, msg := c.aclRefusal()
	for range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode, r.ErrorMessage = code, msg
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
