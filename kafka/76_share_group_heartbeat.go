package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
)

func init() {
	register(kmsg.ShareGroupHeartbeat.Int16(), 1, 1, answerNow(handleShareGroupHeartbeat))
}

// handleShareGroupHeartbeat serves share-group membership (KIP-932):
// join, heartbeat and leave. The subscribed topics are looked up first,
// outside the coordinator's lock, so topics created and partitions added
// later reach the members' assignments. A member that leaves also closes
// its share sessions on this node, releasing the records it holds.
func handleShareGroupHeartbeat(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareGroupHeartbeatRequest)
	co, coordinating := c.coordinator(req.GroupID)
	if !coordinating {
		return shareHeartbeatError(req, kerr.NotCoordinator.Code, ""), nil
	}
	if code := c.groupDenied(auth.Read, req.GroupID); code != 0 {
		return shareHeartbeatError(req, code, ""), nil
	}
	for _, t := range req.SubscribedTopicNames {
		if code := c.topicDenied(auth.Read, t); code != 0 {
			return shareHeartbeatError(req, code, "Not authorized to read topic "+t+"."), nil
		}
	}
	if code, msg := checkShareHeartbeat(req); code != 0 {
		return shareHeartbeatError(req, code, msg), nil
	}
	var fetched map[string]*topicMeta
	var session, heartbeat int64
	if req.MemberEpoch >= 0 {
		set, err := c.s.groupConfig(req.GroupID)
		if err != nil {
			return shareHeartbeatError(req, kerr.CoordinatorNotAvailable.Code, ""), nil
		}
		session, heartbeat = configMillis(set, "share.session.timeout.ms"), configMillis(set, "share.heartbeat.interval.ms")
		names := co.shareTopicNames(req.GroupID, req.SubscribedTopicNames)
		infos, err := c.s.topics(names)
		if err != nil {
			return shareHeartbeatError(req, kerr.CoordinatorNotAvailable.Code, ""), nil
		}
		fetched = make(map[string]*topicMeta, len(names))
		for _, n := range names {
			fetched[n] = nil
		}
		for _, t := range infos {
			fetched[t.Name] = &topicMeta{id: topicID(t), partitions: t.Partitions}
		}
	}
	resp := co.shareHeartbeat(req, c.clientID, c.nc.RemoteAddr().String(), fetched, millisDuration(session), millisDuration(heartbeat))
	if req.MemberEpoch == epochLeave && resp.ErrorCode == 0 {
		c.s.shares.closeMember(c.s, req.GroupID, req.MemberID)
	}
	return resp, nil
}
