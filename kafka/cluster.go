package kafka

import (
	"cmp"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/store"
)

// clusterID names the cluster in Metadata and DescribeCluster.
const clusterID = "waggle"

// kafkaBroker is a member as Kafka clients see it.
type kafkaBroker struct {
	id   int32
	host string
	port int32
}

// brokers lists the members that registered a Kafka address, and the
// leader's node id (-1 when none is known). With one raft group the raft
// leader leads every partition and coordinates every group.
func (c *conn) brokers() ([]kafkaBroker, int32) {
	members, err := c.s.svc.Members()
	if err != nil {
		return nil, -1
	}
	var out []kafkaBroker
	self := c.s.svc.NodeID()
	for _, m := range members {
		addr := m.KafkaAddr
		if m.ID == self {
			addr = c.s.cfg.AdvertisedAddr
		}
		if b, ok := parseBroker(m.ID, addr); ok {
			out = append(out, b)
		}
	}
	leader, _ := c.leader()
	return out, leader
}

// leader returns the raft leader's node id and its leader epoch (the raft
// term, broker.Service.LeaderEpoch), or -1 and -1 when no leader is known.
// The term is read on both sides of the leader so the pair is from one
// term: a leader named with an epoch from before its election would be
// fenced by the next request that carries the epoch.
func (c *conn) leader() (id, epoch int32) { return c.leaderOf(c.s.svc) }

// leaderOf is leader for the raft group b serves.
func (c *conn) leaderOf(b Broker) (id, epoch int32) {
	for range 3 {
		before := b.LeaderEpoch()
		_, lid := b.LeaderWithID()
		if lid == "" {
			return -1, -1
		}
		n, err := strconv.ParseInt(lid, 10, 32)
		if err != nil {
			return -1, -1
		}
		if b.LeaderEpoch() == before {
			return int32(n), before
		}
	}
	return -1, -1 // elections in quick succession: the client asks again
}

// leaderEpochCode is Kafka's check of the current leader epoch a request
// carries (KIP-320, Partition.checkCurrentLeaderEpoch): -1 skips it; an
// epoch older than this node's is FENCED_LEADER_EPOCH (the client's
// metadata is stale), a newer one UNKNOWN_LEADER_EPOCH (this node has not
// yet seen that term). Both make clients refresh metadata and retry.
func leaderEpochCode(requested, current int32) int16 {
	switch {
	case requested == -1 || requested == current:
		return 0
	case requested < current:
		return kerr.FencedLeaderEpoch.Code
	default:
		return kerr.UnknownLeaderEpoch.Code
	}
}

// topicID is a topic's KIP-516 id (store.Queue.TopicID).
func topicID(t broker.TopicInfo) [16]byte { return store.Queue{ID: t.ID}.TopicID() }

// topicByID finds the topic a request names by id (Fetch v13+, Produce
// v13, Metadata v10+, DeleteTopics v6+), in whichever raft group holds
// it: one lookup in each group's catalog, whatever the number of topics.
func (c *conn) topicByID(id [16]byte) (broker.TopicInfo, bool, error) { return c.s.topicByID(id) }

func (s *Server) topicByID(id [16]byte) (broker.TopicInfo, bool, error) {
	if id == internalTopicID {
		return internalTopic(), true, nil
	}
	// The groups this broker replicates first: a Produce or Fetch sent to
	// the right leader then never asks another node.
	// A group whose replicas do not answer is passed over: another may
	// hold the id; the error is answered only when none does.
	var failed error
	for _, remote := range []bool{false, true} {
		for _, b := range s.everyGroup() {
			if _, isRemote := b.(*Remote); isRemote != remote {
				continue
			}
			t, found, err := b.TopicByID(id)
			switch {
			case err != nil:
				failed = cmp.Or(failed, err)
			case found && !isInternalTopic(t.Name):
				return t, true, nil
			}
		}
	}
	return broker.TopicInfo{}, false, failed
}

func parseBroker(nodeID, addr string) (kafkaBroker, bool) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return kafkaBroker{}, false
	}
	id, err1 := strconv.ParseInt(nodeID, 10, 32)
	port, err2 := strconv.ParseInt(portStr, 10, 32)
	if err1 != nil || err2 != nil {
		return kafkaBroker{}, false
	}
	return kafkaBroker{id: int32(id), host: host, port: int32(port)}, true
}
