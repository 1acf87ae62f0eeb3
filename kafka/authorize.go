package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
)

// may reports whether the connection's principal may do action on the
// named resource; always true with auth off.
func (c *conn) may(action auth.Action, kind auth.Kind, name string) bool {
	return !c.s.cfg.Auth.Enabled || (c.principal != nil && c.principal.Allows(action, kind, name))
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
	code := int16(0)
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		if code = c.groupDenied(auth.Read, r.Group); code != 0 {
			resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode, resp.MemberID = code, r.MemberID
			return resp
		}
	case *kmsg.SyncGroupRequest:
		if code = c.groupDenied(auth.Read, r.Group); code != 0 {
			resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ErrorCode = code
			return resp
		}
	case *kmsg.HeartbeatRequest:
		if code = c.groupDenied(auth.Read, r.Group); code != 0 {
			resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
			resp.ErrorCode = code
			return resp
		}
	case *kmsg.LeaveGroupRequest:
		if code = c.groupDenied(auth.Read, r.Group); code != 0 {
			resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
			resp.ErrorCode = code
			return resp
		}
	case *kmsg.OffsetDeleteRequest:
		if code = c.groupDenied(auth.Manage, r.Group); code != 0 {
			resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
			resp.ErrorCode = code
			return resp
		}
	case *kmsg.OffsetCommitRequest:
		// Committing needs the group, and reading each topic committed.
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		denied := c.groupDenied(auth.Read, r.Group) != 0
		for _, rt := range r.Topics {
			t := kmsg.NewOffsetCommitResponseTopic()
			t.Topic = rt.Topic
			code := kerr.GroupAuthorizationFailed.Code
			if !denied {
				code = c.topicDenied(auth.Read, rt.Topic)
			}
			denied = denied || code != 0
			for _, rp := range rt.Partitions {
				p := kmsg.NewOffsetCommitResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		if denied {
			return resp // nothing committed: a commit is all its partitions or none
		}
	}
	return nil
}
