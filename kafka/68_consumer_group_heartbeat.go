package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
)

func init() {
	register(kmsg.ConsumerGroupHeartbeat.Int16(), 0, 1, answerNow(handleConsumerGroupHeartbeat))
}

// handleConsumerGroupHeartbeat serves the KIP-848 consumer protocol: join,
// heartbeat and leave in one request, the assignment computed here. The
// subscribed topics are looked up first, outside the coordinator's lock,
// so partitions added and topics created later are assigned.
func handleConsumerGroupHeartbeat(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	co, coordinating := c.coordinator(req.Group)
	if !coordinating {
		return heartbeatError(req, kerr.NotCoordinator.Code, ""), nil
	}
	for _, t := range req.SubscribedTopicNames {
		if code := c.topicDenied(auth.Read, t); code != 0 {
			return heartbeatError(req, code, "Not authorized to read topic "+t+"."), nil
		}
	}
	if code, msg := checkHeartbeat(req); code != 0 {
		return heartbeatError(req, code, msg), nil
	}
	var fetched map[string]*topicMeta
	if req.MemberEpoch >= 0 {
		names := co.consumerTopicNames(req.Group, req.SubscribedTopicNames)
		infos, err := c.s.topics(names)
		if err != nil {
			return heartbeatError(req, kerr.CoordinatorNotAvailable.Code, ""), nil
		}
		fetched = make(map[string]*topicMeta, len(names))
		for _, n := range names {
			fetched[n] = nil
		}
		for _, t := range infos {
			fetched[t.Name] = &topicMeta{id: topicID(t), partitions: t.Partitions}
		}
	}
	return co.consumerHeartbeat(req, c.clientID, c.nc.RemoteAddr().String(), fetched), nil
}
