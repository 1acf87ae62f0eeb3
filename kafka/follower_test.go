package kafka

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/broker"
)

// A broker that does not lead answers as one of Kafka's followers would:
// what it can learn from the leader it learns, and what it cannot serve it
// answers with a code Kafka clients retry on.

// TestFollowerCatchesUpOnATopicCreatedElsewhere reproduces issue 30's
// UNKNOWN_TOPIC_OR_PARTITION right after CreateTopics: a topic the leader
// has created and this follower has not applied yet is found once the
// follower caught up, by Metadata and DescribeConfigs alike; a topic the
// leader does not have either stays unknown.
func TestFollowerCatchesUpOnATopicCreatedElsewhere(t *testing.T) {
	fb := newFakeBroker()
	fb.leaderID = "2"
	fb.behind = map[string]broker.TopicInfo{"fresh": {ID: 9, Name: "fresh", Partitions: 2}}
	c := newTestConn(t, newTestServer(t, fb, DefaultConfig()), nil)

	mt := roundTrip(t, c, metadataRequest(false, "fresh")).(*kmsg.MetadataResponse).Topics[0]
	if mt.ErrorCode != 0 || len(mt.Partitions) != 2 {
		t.Fatalf("metadata of a topic created elsewhere: %s, %d partitions", codeName(mt.ErrorCode), len(mt.Partitions))
	}
	if fb.catchUps != 1 {
		t.Fatalf("%d catch-ups, want 1", fb.catchUps)
	}

	fb.behind = map[string]broker.TopicInfo{"fresh2": {ID: 10, Name: "fresh2", Partitions: 1}}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "fresh2"
	dc.Resources = append(dc.Resources, r)
	got := roundTrip(t, c, dc).(*kmsg.DescribeConfigsResponse).Resources[0]
	if got.ErrorCode != 0 || len(got.Configs) == 0 {
		t.Fatalf("configs of a topic created elsewhere: %s, %d configs", codeName(got.ErrorCode), len(got.Configs))
	}

	mt = roundTrip(t, c, metadataRequest(false, "nowhere")).(*kmsg.MetadataResponse).Topics[0]
	if mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("a topic no node has: %s, want UNKNOWN_TOPIC_OR_PARTITION", codeName(mt.ErrorCode))
	}

	// Before a topic is found, only a miss asks the leader.
	before := fb.catchUps
	roundTrip(t, c, metadataRequest(false, "orders"))
	if fb.catchUps != before {
		t.Fatalf("a known topic caught up with the leader")
	}
}

// TestFollowerThatCannotCatchUpAnswersRetriably: with no leader to catch up
// with, a topic this node does not know is neither "unknown" (a client
// could give up on it) nor an internal error, but LEADER_NOT_AVAILABLE.
func TestFollowerThatCannotCatchUpAnswersRetriably(t *testing.T) {
	fb := newFakeBroker()
	fb.leaderID = ""
	fb.catchUpErr = broker.ErrNotLeader
	c := newTestConn(t, newTestServer(t, fb, DefaultConfig()), nil)
	mt := roundTrip(t, c, metadataRequest(true, "fresh")).(*kmsg.MetadataResponse).Topics[0]
	if mt.ErrorCode != kerr.LeaderNotAvailable.Code {
		t.Fatalf("metadata without a leader: %s, want LEADER_NOT_AVAILABLE", codeName(mt.ErrorCode))
	}
	if _, exists := fb.topics["fresh"]; exists {
		t.Fatal("a topic was created without a leader")
	}
	if !kerr.IsRetriable(kerr.ErrorForCode(mt.ErrorCode)) {
		t.Fatalf("%s is not retriable", codeName(mt.ErrorCode))
	}
	if lookupCode(errors.New("disk")) != kerr.UnknownServerError.Code {
		t.Fatal("a store error answered as retriable")
	}
}

// TestFollowerListsNoGroupsWithoutError reproduces issue 30's ListGroups
// NOT_COORDINATOR: admin clients send ListGroups (and ListTransactions) to
// every broker and fail on an error; a broker that coordinates nothing
// answers an empty list, as Kafka's do.
func TestFollowerListsNoGroupsWithoutError(t *testing.T) {
	fb := newFakeBroker()
	fb.leaderID = "2"
	c := newTestConn(t, newTestServer(t, fb, DefaultConfig()), nil)
	lg := roundTrip(t, c, kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)
	if lg.ErrorCode != 0 || len(lg.Groups) != 0 {
		t.Fatalf("ListGroups on a follower: %s, %d groups", codeName(lg.ErrorCode), len(lg.Groups))
	}
	lt := roundTrip(t, c, kmsg.NewPtrListTransactionsRequest()).(*kmsg.ListTransactionsResponse)
	if lt.ErrorCode != 0 || len(lt.TransactionStates) != 0 {
		t.Fatalf("ListTransactions on a follower: %s, %d transactions", codeName(lt.ErrorCode), len(lt.TransactionStates))
	}
}

// TestFollowerForwardsTopicCreation reproduces issue 30's CreateTopics
// NOT_CONTROLLER through a follower: any broker takes it (KIP-590) and the
// write goes to the leader through Config.Forwarding.
func TestFollowerForwardsTopicCreation(t *testing.T) {
	follower, leader := newFakeBroker(), newFakeBroker()
	follower.leaderID = "2"
	leader.nodeID, leader.leaderID = "2", "2"
	cfg := DefaultConfig()
	cfg.Groups, cfg.Forwarding = []Broker{follower}, []Broker{leader}
	c := newTestConn(t, newTestServer(t, follower, cfg), nil)

	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "made-elsewhere", 4, -1
	req.Topics = append(req.Topics, rt)
	got := roundTrip(t, c, req).(*kmsg.CreateTopicsResponse).Topics[0]
	if got.ErrorCode != 0 {
		t.Fatalf("CreateTopics through a follower: %s", codeName(got.ErrorCode))
	}
	if made, ok := leader.topics["made-elsewhere"]; !ok || made.Partitions != 4 {
		t.Fatalf("the leader has %+v (%v), want the topic with 4 partitions", made, ok)
	}
}

// TestFollowerDescribesConfigsAlteredElsewhere: DescribeConfigs on a
// follower right after AlterConfigs through the leader showed the old
// value (found running the single-node suite through a follower); the
// follower catches up first, even for a topic it knows.
func TestFollowerDescribesConfigsAlteredElsewhere(t *testing.T) {
	fb := newFakeBroker()
	fb.leaderID = "2"
	altered := fb.topics["orders"]
	altered.MaxMessageBytes = 1024
	fb.behind = map[string]broker.TopicInfo{"orders": altered}
	c := newTestConn(t, newTestServer(t, fb, DefaultConfig()), nil)
	dc := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeTopic, "orders", []string{"max.message.bytes"}
	dc.Resources = append(dc.Resources, r)
	got := roundTrip(t, c, dc).(*kmsg.DescribeConfigsResponse).Resources[0]
	if got.ErrorCode != 0 || len(got.Configs) != 1 || got.Configs[0].Value == nil || *got.Configs[0].Value != "1024" {
		t.Fatalf("max.message.bytes on a follower after the alter: %+v", got)
	}
}
