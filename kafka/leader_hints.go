package kafka

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-951 leader discovery: a Produce (v10+) or Fetch (v12+) partition
// refused with NOT_LEADER_OR_FOLLOWER (or, for Fetch, FENCED_LEADER_EPOCH)
// carries the current leader and its epoch, and the response lists that
// leader's endpoint, so the client moves there without a Metadata round
// trip.

// leaderHints collects the leaders named in one response.
type leaderHints struct {
	c   *conn
	ids []int32
}

// movedAway reports whether a partition's error code is one KIP-951 hints.
func movedAway(code int16) bool {
	return code == kerr.NotLeaderForPartition.Code || code == kerr.FencedLeaderEpoch.Code
}

// leader names the leader of topic's raft group and its epoch, -1 and -1
// when none is known, and remembers it for endpoints.
func (h *leaderHints) leader(topic string) (id, epoch int32) {
	id, epoch = h.c.leaderOf(h.c.s.topic(topic))
	if id >= 0 && !slices.Contains(h.ids, id) {
		h.ids = append(h.ids, id)
	}
	return id, epoch
}

// endpoints lists the named leaders that registered a Kafka address.
func (h *leaderHints) endpoints() []kafkaBroker {
	if len(h.ids) == 0 {
		return nil
	}
	brokers, _ := h.c.brokers()
	return slices.DeleteFunc(brokers, func(b kafkaBroker) bool { return !slices.Contains(h.ids, b.id) })
}

// hintProduceLeaders fills the hints of a Produce response whose topics
// are named by names, in order.
func (c *conn) hintProduceLeaders(resp *kmsg.ProduceResponse, names []string) {
	h := leaderHints{c: c}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			p := &resp.Topics[i].Partitions[j]
			if p.ErrorCode == kerr.NotLeaderForPartition.Code && names[i] != "" {
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = h.leader(names[i])
			}
		}
	}
	for _, b := range h.endpoints() {
		resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: b.id, Host: b.host, Port: b.port})
	}
}

// hintFetchLeaders fills the hints of a Fetch response; topicName names a
// response topic ("" when unknown).
func (c *conn) hintFetchLeaders(resp *kmsg.FetchResponse, topicName func(kmsg.FetchResponseTopic) string) {
	h := leaderHints{c: c}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			p := &resp.Topics[i].Partitions[j]
			if !movedAway(p.ErrorCode) {
				continue
			}
			if name := topicName(resp.Topics[i]); name != "" {
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = h.leader(name)
			}
		}
	}
	for _, b := range h.endpoints() {
		resp.Brokers = append(resp.Brokers, kmsg.FetchResponseBroker{NodeID: b.id, Host: b.host, Port: b.port})
	}
}
