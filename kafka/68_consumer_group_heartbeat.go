package kafka

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
)

func init() {
	register(kmsg.ConsumerGroupHeartbeat.Int16(), 0, 1, answerNow(handleConsumerGroupHeartbeat))
}

// handleConsumerGroupHeartbeat serves the KIP-848 consumer protocol: join,
// heartbeat and leave in one request, the assignment computed here. The
// subscribed topics, and those the member's pattern matches, are looked up
// first, outside the coordinator's lock, so partitions added and topics
// created later are assigned.
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
	var looked heartbeatLookups
	if req.MemberEpoch >= 0 {
		set, err := c.s.groupConfig(req.Group)
		if err != nil {
			return heartbeatError(req, kerr.CoordinatorNotAvailable.Code, ""), nil
		}
		looked.session, looked.heartbeat = consumerTimeouts(set)
		pattern := co.memberRegex(req.Group, req.MemberID)
		if req.SubscribedTopicRegex != nil {
			pattern = *req.SubscribedTopicRegex
		}
		if pattern != "" {
			var code int16
			var msg string
			if looked.regex, code, msg = c.resolveRegex(pattern); code != 0 {
				return heartbeatError(req, code, msg), nil
			}
		}
		extra := req.SubscribedTopicNames
		if looked.regex != nil {
			extra = append(append([]string(nil), extra...), looked.regex.topics...)
		}
		names := co.consumerTopicNames(req.Group, extra)
		infos, err := c.s.topics(names)
		if err != nil {
			return heartbeatError(req, kerr.CoordinatorNotAvailable.Code, ""), nil
		}
		looked.fetched = make(map[string]*topicMeta, len(names))
		for _, n := range names {
			looked.fetched[n] = nil
		}
		for _, t := range infos {
			looked.fetched[t.Name] = &topicMeta{id: topicID(t), partitions: t.Partitions}
		}
		if _, named := looked.fetched[consumerOffsetsTopic]; named {
			looked.fetched[consumerOffsetsTopic] = &topicMeta{id: internalTopicID, partitions: consumerOffsetsPartitions}
		}
	}
	return co.consumerHeartbeat(req, c.clientID, c.nc.RemoteAddr().String(), looked), nil
}

// resolveRegex lists the topics pattern matches that this connection's
// principal may read (Kafka leaves out the topics a member may not see).
// The internal topic is among them when the pattern matches it, as Kafka
// resolves patterns over every topic.
func (c *conn) resolveRegex(pattern string) (*regexMatch, int16, string) {
	matched, internal, err := c.s.regexes.resolve(pattern, c.s.topicNames())
	if err != nil {
		return nil, kerr.InvalidRegularExpression.Code, err.Error()
	}
	denied := func(t string) bool { return c.topicDenied(auth.Read, t) != 0 }
	readable := matched
	if slices.ContainsFunc(matched, denied) {
		readable = slices.DeleteFunc(slices.Clone(matched), denied)
	}
	if i, found := slices.BinarySearch(readable, consumerOffsetsTopic); internal && !found && !denied(consumerOffsetsTopic) {
		readable = slices.Insert(slices.Clone(readable), i, consumerOffsetsTopic)
	}
	if len(readable) > maxSubscribedTopics {
		return nil, kerr.InvalidRequest.Code, "SubscribedTopicRegex matches more than 10000 topics."
	}
	return &regexMatch{pattern: pattern, topics: readable}, 0, ""
}
