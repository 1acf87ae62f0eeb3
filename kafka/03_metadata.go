package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"strconv"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
)

func init() { register(kmsg.Metadata.Int16(), 0, 12, answerNow(handleMetadata)) }

func handleMetadata(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	brokers, _ := c.brokers()
	leader, epoch := c.leader()
	for _, b := range brokers {
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = b.id, b.host, b.port
		if rack, ok := c.s.cfg.Racks[strconv.Itoa(int(b.id))]; ok {
			mb.Rack = kmsg.StringPtr(rack) // broker.rack
		}
		resp.Brokers = append(resp.Brokers, mb)
	}
	resp.ClusterID = kmsg.StringPtr(clusterID)
	resp.ControllerID = leader

	// Null topics (v1+) or an empty list (v0) ask for every topic.
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		topics, err := c.s.topics(nil)
		if err != nil {
			return nil, err
		}
		for _, t := range topics {
			if c.describable(t.Name) && !isInternalTopic(t.Name) { // others are left out, as Kafka does
				resp.Topics = append(resp.Topics, c.topicMetadata(t))
			}
		}
		if c.describable(consumerOffsetsTopic) {
			resp.Topics = append(resp.Topics, internalTopicMetadata(leader, epoch))
		}
		return resp, nil
	}
	for _, rt := range req.Topics {
		if rt.Topic == nil { // named by id (v10+)
			t, ok, err := c.topicByID(rt.TopicID)
			if err != nil {
				return nil, err
			}
			if !ok {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID, mt.ErrorCode = rt.TopicID, kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			if !c.describable(t.Name) {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID, mt.ErrorCode = rt.TopicID, kerr.TopicAuthorizationFailed.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			if isInternalTopic(t.Name) {
				resp.Topics = append(resp.Topics, internalTopicMetadata(leader, epoch))
			} else {
				resp.Topics = append(resp.Topics, c.topicMetadata(t))
			}
			continue
		}
		if !c.describable(*rt.Topic) {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.ErrorCode = rt.Topic, kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		if isInternalTopic(*rt.Topic) { // listed, never auto-created
			resp.Topics = append(resp.Topics, internalTopicMetadata(leader, epoch))
			continue
		}
		// Creating a topic on the fly takes the right to manage it.
		create := (req.AllowAutoTopicCreation || req.Version < 4) && c.may(auth.Manage, auth.Queue, *rt.Topic)
		resp.Topics = append(resp.Topics, c.namedTopicMetadata(*rt.Topic, create))
	}
	return resp, nil
}

// namedTopicMetadata describes one topic, creating it first when allowed.
func (c *conn) namedTopicMetadata(name string, allowCreate bool) kmsg.MetadataResponseTopic {
	missing := kmsg.NewMetadataResponseTopic()
	missing.Topic = kmsg.StringPtr(name)
	if !broker.ValidTopicName(name) {
		missing.ErrorCode = kerr.InvalidTopicException.Code
		return missing
	}
	t, ok, err := c.s.lookupTopic(name)
	if err != nil {
		missing.ErrorCode = lookupCode(err)
		return missing
	}
	if !ok && allowCreate && c.s.cfg.AutoCreateTopics {
		// Created by the leader of the topic's raft group, forwarded there
		// from a follower; with no leader, LEADER_NOT_AVAILABLE makes the
		// client ask again.
		if _, err := c.s.writer(c.s.placedIn(name)).CreateTopic(name, c.s.cfg.DefaultPartitions, nil); err != nil {
			c.s.log.Warn("kafka: creating a topic on the fly", "topic", name, "err", err)
			missing.ErrorCode = kerr.LeaderNotAvailable.Code
			return missing
		}
		if t, ok, err = c.s.lookupTopic(name); err != nil {
			missing.ErrorCode = lookupCode(err)
			return missing
		}
	}
	if !ok {
		missing.ErrorCode = kerr.UnknownTopicOrPartition.Code
		return missing
	}
	return c.topicMetadata(t)
}

// topicMetadata describes a topic, led by the leader of its raft group.
func (c *conn) topicMetadata(t broker.TopicInfo) kmsg.MetadataResponseTopic {
	leader, epoch := c.leaderOf(c.s.topic(t.Name))
	mt := topicMetadata(t, leader, epoch)
	if dir := c.s.cfg.Directory; dir != nil && leader >= 0 {
		group := dir[c.s.placedIn(t.Name)]
		isr := c.s.topic(t.Name).InSync() // this node leads, or asks the leader
		if len(isr) == 0 {
			isr = group.Leader().InSync // a follower here: the leader's view
		}
		replicas, inSync := replicaIDs(group.Replicas(), leader), replicaIDs(isr, leader)
		for i := range mt.Partitions {
			mt.Partitions[i].Replicas, mt.Partitions[i].ISR = replicas, inSync
		}
	}
	return mt
}

// replicaIDs are node ids as Kafka broker ids, the leader first and
// always among them.
func replicaIDs(nodes []string, leader int32) []int32 {
	out := []int32{leader}
	for _, n := range nodes {
		if id, err := strconv.ParseInt(n, 10, 32); err == nil && int32(id) != leader {
			out = append(out, int32(id))
		}
	}
	return out
}

// topicMetadata describes a topic whose partitions the raft leader leads
// at epoch, its term (v7+, KIP-320; broker.Service.LeaderEpoch).
func topicMetadata(t broker.TopicInfo, leader, epoch int32) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.Name)
	mt.TopicID = topicID(t)
	for p := int32(0); p < t.Partitions; p++ {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p
		mp.Leader = leader
		mp.LeaderEpoch = epoch
		if leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		} else {
			mp.Replicas, mp.ISR = []int32{leader}, []int32{leader}
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
