package kafka

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
)

// AlterPartitionAssignments (Kafka's AlterPartitionReassignments, KIP-455)
// v0–1; v1 adds AllowReplicationFactorChange (KIP-860). It needs ALTER on
// the cluster (waggle's Manage), as the ACL APIs do.
func init() {
	register(kmsg.AlterPartitionAssignments.Int16(), 0, 1, answerNow(handleAlterPartitionAssignments))
}

// partitionAsk is one partition of an AlterPartitionAssignments request
// and its answer in the response.
type partitionAsk struct {
	topic     string
	partition int32
	replicas  []int32 // the brokers asked for, the preferred leader first; nil cancels
	answer    *kmsg.AlterPartitionAssignmentsResponseTopicPartition
}

// handleAlterPartitionAssignments moves the raft groups of the partitions
// named (reassignments.go): a replica list becomes the new replicas of the
// partition's group, recorded in group 0 by its leader, the controller
// Metadata names; a null list cancels the group's move where it is. The
// answer comes once the record is written; the move goes on in the
// background, as Kafka's does (ListPartitionReassignments follows it).
func handleAlterPartitionAssignments(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	for _, rt := range req.Topics {
		t := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			p.Partition = rp.Partition
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	var asks []partitionAsk
	for i, rt := range req.Topics {
		for j, rp := range rt.Partitions {
			asks = append(asks, partitionAsk{topic: rt.Topic, partition: rp.Partition, replicas: rp.Replicas, answer: &resp.Topics[i].Partitions[j]})
		}
	}
	// A request refused as a whole is answered as Kafka does: the error at
	// the top and on every partition.
	refuseAll := func(code int16) (kmsg.Response, error) {
		resp.ErrorCode = code
		for _, a := range asks {
			a.answer.ErrorCode = code
		}
		return resp, nil
	}
	if !c.may(auth.Manage, auth.Cluster, "") {
		return refuseAll(kerr.ClusterAuthorizationFailed.Code)
	}

	deadline := waitUntil(req.TimeoutMillis)
	type found struct {
		info broker.TopicInfo
		ok   bool
		err  error
	}
	topics := map[string]found{}
	byGroup := map[uint32][]partitionAsk{}
	for _, a := range asks {
		f, seen := topics[a.topic]
		switch {
		case seen:
		case isInternalTopic(a.topic):
			f = found{info: internalTopic(), ok: true}
		default:
			f.info, f.ok, f.err = c.s.lookupTopicUntil(a.topic, deadline)
			topics[a.topic] = f
		}
		// fixed: why this partition's replicas cannot move at all.
		fixed := ""
		switch {
		case f.err != nil:
			refuseAsk(a, lookupCode(f.err), f.err.Error())
			continue
		case !f.ok || a.partition < 0 || a.partition >= f.info.Partitions:
			refuseAsk(a, kerr.UnknownTopicOrPartition.Code, "")
			continue
		case isInternalTopic(a.topic):
			fixed = consumerOffsetsTopic + " is replicated state of raft group 0, on every broker: it does not move"
		case c.s.views == nil:
			fixed = "every broker replicates every partition: replicas move only in a cluster started with --replication-factor"
		}
		if fixed != "" {
			if a.replicas == nil {
				refuseAsk(a, kerr.NoReassignmentInProgress.Code, "")
			} else {
				// INVALID_REQUEST, not UNSUPPORTED_VERSION (no other
				// version would do) nor INVALID_REPLICA_ASSIGNMENT (no
				// other list would): nothing can move this partition,
				// which the message says; clients do not retry it.
				refuseAsk(a, kerr.InvalidRequest.Code, fixed)
			}
			continue
		}
		g := c.s.placedIn(a.topic)
		byGroup[g] = append(byGroup[g], a)
	}
	allowRFChange := req.Version < 1 || req.AllowReplicationFactorChange
	for _, g := range slices.Sorted(maps.Keys(byGroup)) {
		c.reassignGroup(g, byGroup[g], allowRFChange, deadline)
	}
	return resp, nil
}

// refuseAsk answers one partition with code and, when not empty, msg.
func refuseAsk(a partitionAsk, code int16, msg string) {
	a.answer.ErrorCode = code
	if msg != "" {
		a.answer.ErrorMessage = kmsg.StringPtr(msg)
	}
}

// reassignGroup answers the partitions of data group g a request names,
// and records the group's new replicas when they all ask for the same.
func (c *conn) reassignGroup(g uint32, asks []partitionAsk, allowRFChange bool, deadline time.Time) {
	answer := func(code int16, msg string) {
		for _, a := range asks {
			refuseAsk(a, code, msg)
		}
	}
	want := asks[0].replicas
	for _, a := range asks[1:] {
		if (a.replicas == nil) != (want == nil) || !slices.Equal(a.replicas, want) {
			answer(kerr.InvalidReplicaAssignment.Code, conflict(g, asks))
			return
		}
	}
	var nodes []string
	if want == nil {
		mv, ok := c.s.moveOf(g, deadline)
		switch {
		case !ok:
			answer(kerr.RequestTimedOut.Code, errNoGroupLeader(g))
			return
		case !mv.moving():
			answer(kerr.NoReassignmentInProgress.Code, "")
			return
		}
		nodes = mv.stopped()
	} else {
		voters, err := c.s.voters()
		if err != nil {
			answer(errCode(err), err.Error())
			return
		}
		if msg := checkReplicas(want, voters); msg != "" {
			answer(kerr.InvalidReplicaAssignment.Code, msg)
			return
		}
		if now := c.s.views[g].Replicas(); !allowRFChange && len(want) != len(now) {
			answer(kerr.InvalidReplicationFactor.Code, fmt.Sprintf("the partition has %d replicas, the request asks for %d and forbids a change of replication factor", len(now), len(want)))
			return
		}
		for _, id := range want {
			nodes = append(nodes, strconv.Itoa(int(id)))
		}
	}
	// Any broker takes it: the write goes to group 0's leader (KIP-590).
	if err := c.s.writer(0).SetReplicas(g, nodes); err != nil {
		answer(setReplicasCode(err), err.Error())
	}
}

// conflict explains why partitions of one group asking for different
// replicas are all refused.
func conflict(g uint32, asks []partitionAsk) string {
	var topics, wanted []string
	for _, a := range asks {
		if !slices.Contains(topics, a.topic) {
			topics = append(topics, a.topic)
		}
		w := "a cancel"
		if a.replicas != nil {
			w = fmt.Sprint(a.replicas)
		}
		if !slices.Contains(wanted, w) {
			wanted = append(wanted, w)
		}
	}
	slices.Sort(topics)
	return fmt.Sprintf("the partitions of %s all live in raft group %d and share its replicas, which move together: "+
		"ask for one replica list (or a cancel) for all of them, not %s", strings.Join(topics, ", "), g, strings.Join(wanted, " and "))
}
