package kafka

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
)

// ListPartitionReassignments (KIP-455) v0. It needs DESCRIBE on the
// cluster: waggle's Read on it, which the HTTP listing of the groups'
// replicas needs too, or its Manage (Kafka's ALTER implies DESCRIBE).
func init() {
	register(kmsg.ListPartitionReassignments.Int16(), 0, 0, answerNow(handleListPartitionReassignments))
}

// handleListPartitionReassignments lists the partitions of the topics
// named (null: every topic) whose raft group is moving: its members as its
// leader reports them are not the replicas group 0 records. Replicas are
// both, AddingReplicas the recorded replicas not yet members,
// RemovingReplicas the members not recorded. A partition not moving is
// left out, as are unknown topics and partitions, as Kafka does.
func handleListPartitionReassignments(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !c.may(auth.Read, auth.Cluster, "") && !c.may(auth.Manage, auth.Cluster, "") {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	if c.s.views == nil {
		return resp, nil // every broker replicates every partition: nothing moves
	}

	deadline := waitUntil(req.TimeoutMillis)
	type listed struct {
		info       broker.TopicInfo
		partitions []int32 // nil: all
	}
	var topics []listed
	if req.Topics == nil {
		all, err := c.s.topics(nil)
		if err != nil {
			return nil, err
		}
		for _, t := range all {
			if !isInternalTopic(t.Name) {
				topics = append(topics, listed{info: t})
			}
		}
	}
	for _, rt := range req.Topics {
		if isInternalTopic(rt.Topic) {
			continue // group 0's, on every broker: it never moves
		}
		info, ok, err := c.s.lookupTopicUntil(rt.Topic, deadline)
		if err != nil {
			resp.ErrorCode, resp.ErrorMessage = lookupCode(err), kmsg.StringPtr(err.Error())
			return resp, nil
		}
		if ok {
			topics = append(topics, listed{info: info, partitions: nonNil(rt.Partitions)})
		}
	}

	moves := map[uint32]groupMove{}
	for _, t := range topics {
		g := c.s.placedIn(t.info.Name)
		mv, read := moves[g]
		if !read {
			var ok bool
			if mv, ok = c.s.moveOf(g, deadline); !ok {
				// Kafka's answer to a request it could not finish in time,
				// which clients retry.
				resp.ErrorCode, resp.ErrorMessage = kerr.RequestTimedOut.Code, kmsg.StringPtr(errNoGroupLeader(g))
				resp.Topics = nil
				return resp, nil
			}
			moves[g] = mv
		}
		if !mv.moving() {
			continue
		}
		rt := kmsg.NewListPartitionReassignmentsResponseTopic()
		rt.Topic = t.info.Name
		for _, p := range listedPartitions(t.info, t.partitions) {
			rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			rp.Partition = p
			rp.Replicas, rp.AddingReplicas, rp.RemovingReplicas = brokerIDs(mv.replicas()), brokerIDs(mv.adding()), brokerIDs(mv.removing())
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) > 0 {
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return resp, nil
}

// nonNil is ps, an empty list rather than nil: a topic named with no
// partitions asks for none.
func nonNil(ps []int32) []int32 {
	if ps == nil {
		return []int32{}
	}
	return ps
}

// listedPartitions are the partitions of t among wanted (nil: all of them),
// each once, in the order asked.
func listedPartitions(t broker.TopicInfo, wanted []int32) []int32 {
	if wanted == nil {
		out := make([]int32, 0, t.Partitions)
		for p := range t.Partitions {
			out = append(out, p)
		}
		return out
	}
	var out []int32
	for _, p := range wanted {
		if p >= 0 && p < t.Partitions && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}
