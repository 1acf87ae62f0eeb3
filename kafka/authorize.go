package kafka

import (
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
)

// may reports whether the connection's principal may do action on the
// named resource, by its role and the cluster's ACLs (auth.ACLSet.Allows,
// the HTTP listener's authorizer too); always true with auth off.
func (c *conn) may(action auth.Action, kind auth.Kind, name string) bool {
	return !c.s.cfg.Auth.Enabled || c.s.svc.ACLSet().Allows(c.principal, c.host(), action, kind, name)
}

// host is the client's IP address, which ACL bindings may name.
func (c *conn) host() string {
	if a, ok := c.nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return ""
}

// topicDenied is TOPIC_AUTHORIZATION_FAILED when the principal may not do
// action on topic, else 0.
func (c *conn) topicDenied(action auth.Action, topic string) int16 {
	if c.may(action, auth.Queue, topic) {
		return 0
	}
	return kerr.TopicAuthorizationFailed.Code
}

// groupDenied is GROUP_AUTHORIZATION_FAILED when the principal may not use
// group, else 0.
func (c *conn) groupDenied(action auth.Action, group string) int16 {
	if c.may(action, auth.Group, group) {
		return 0
	}
	return kerr.GroupAuthorizationFailed.Code
}

// describable reports whether Metadata may show topic: the principal may
// read or write it (Kafka's DESCRIBE is implied by both).
func (c *conn) describable(topic string) bool {
	return c.may(auth.Read, auth.Queue, topic) || c.may(auth.Write, auth.Queue, topic)
}

// groupDenial answers a group-membership or offset-commit request whose
// principal may not use the group, or returns nil to let it through.
func (c *conn) groupDenial(req kmsg.Request) kmsg.Response {
	if !c.s.cfg.Auth.Enabled {
		return nil
	}
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		return c.refuseGroup(auth.Read, r.Group, func(code int16) kmsg.Response {
			resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode, resp.MemberID = code, r.MemberID
			return resp
		})
	case *kmsg.SyncGroupRequest:
		return c.refuseGroup(auth.Read, r.Group, func(code int16) kmsg.Response {
			return &kmsg.SyncGroupResponse{Version: r.Version, ErrorCode: code}
		})
	case *kmsg.HeartbeatRequest:
		return c.refuseGroup(auth.Read, r.Group, func(code int16) kmsg.Response {
			return &kmsg.HeartbeatResponse{Version: r.Version, ErrorCode: code}
		})
	case *kmsg.LeaveGroupRequest:
		return c.refuseGroup(auth.Read, r.Group, func(code int16) kmsg.Response {
			return &kmsg.LeaveGroupResponse{Version: r.Version, ErrorCode: code}
		})
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return c.refuseGroup(auth.Read, r.Group, func(code int16) kmsg.Response {
			return heartbeatError(r, code, "")
		})
	case *kmsg.OffsetDeleteRequest:
		return c.refuseGroup(auth.Manage, r.Group, func(code int16) kmsg.Response {
			return &kmsg.OffsetDeleteResponse{Version: r.Version, ErrorCode: code}
		})
	case *kmsg.OffsetCommitRequest:
		return c.refuseGroup(auth.Read, r.Group, func(code int16) kmsg.Response {
			return offsetCommitErrors(r, r.Topics, code)
		})
	}
	return nil
}

// refuseGroup returns answer's response when the principal may not do
// action on group, else nil.
func (c *conn) refuseGroup(action auth.Action, group string, answer func(code int16) kmsg.Response) kmsg.Response {
	if code := c.groupDenied(action, group); code != 0 {
		return answer(code)
	}
	return nil
}

// withoutDeniedTopics splits an OffsetCommit into the topics the principal
// may read, which go on, and the others, answered TOPIC_AUTHORIZATION_FAILED
// by the returned function adding them to the response.
func (c *conn) withoutDeniedTopics(req kmsg.Request) (kmsg.Request, func(kmsg.Response)) {
	r, ok := req.(*kmsg.OffsetCommitRequest)
	if !ok || !c.s.cfg.Auth.Enabled {
		return req, nil
	}
	var allowed, denied []kmsg.OffsetCommitRequestTopic
	for _, t := range r.Topics {
		if c.topicDenied(auth.Read, t.Topic) != 0 {
			denied = append(denied, t)
		} else {
			allowed = append(allowed, t)
		}
	}
	if len(denied) == 0 {
		return req, nil
	}
	rest := *r
	rest.Topics = allowed
	return &rest, func(resp kmsg.Response) {
		out := resp.(*kmsg.OffsetCommitResponse)
		out.Topics = append(out.Topics, offsetCommitErrors(r, denied, kerr.TopicAuthorizationFailed.Code).Topics...)
	}
}

// offsetCommitErrors answers every partition of topics with code.
func offsetCommitErrors(r *kmsg.OffsetCommitRequest, topics []kmsg.OffsetCommitRequestTopic, code int16) *kmsg.OffsetCommitResponse {
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, rt := range topics {
		t := kmsg.NewOffsetCommitResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetCommitResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
