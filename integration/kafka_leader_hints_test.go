package integration

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIP-951: a Produce or Fetch sent to a follower is refused with
// NOT_LEADER_OR_FOLLOWER carrying the current leader, its epoch and its
// endpoint, so a client moves without asking for Metadata.
func TestFollowerNamesTheLeaderInProduceAndFetch(t *testing.T) {
	c := startCluster(t, 3)
	leader, follower := c.leader(), c.followers()[0]
	const topic = "hinted"
	cl := kafkaClient(t, []string{leader.kafkaAddr})
	createTopic(t, cl, topic, 1, nil)
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	wantEpoch, topicID := mresp.Topics[0].Partitions[0].LeaderEpoch, mresp.Topics[0].TopicID
	host, portText, _ := net.SplitHostPort(leader.kafkaAddr)
	port, _ := strconv.Atoi(portText)
	check := func(api string, code int16, id, epoch int32, endpoints []kmsg.ProduceResponseBroker) {
		t.Helper()
		if code != kerr.NotLeaderForPartition.Code || id != int32(leader.id) || epoch != wantEpoch {
			t.Fatalf("%s on a follower: %v, leader %d epoch %d; want NOT_LEADER_OR_FOLLOWER naming %d at epoch %d",
				api, kerr.ErrorForCode(code), id, epoch, leader.id, wantEpoch)
		}
		if len(endpoints) != 1 || endpoints[0].NodeID != int32(leader.id) || endpoints[0].Host != host || endpoints[0].Port != int32(port) {
			t.Fatalf("%s on a follower: endpoints %+v, want only the leader at %s", api, endpoints, leader.kafkaAddr)
		}
	}
	to := cl.Broker(follower.id)

	produce := kmsg.NewPtrProduceRequest()
	produce.Version, produce.Acks, produce.TimeoutMillis = 12, -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic, pt.TopicID = topic, topicID // kgo sends the newest version both sides speak
	pp := kmsg.NewProduceRequestTopicPartition()
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	var presp *kmsg.ProduceResponse
	waitFor(t, 10*time.Second, func() (err error) { // until the follower has applied the topic
		if presp, err = produce.RequestWith(context.Background(), to); err == nil && presp.Topics[0].Partitions[0].ErrorCode == kerr.UnknownTopicID.Code {
			err = kerr.UnknownTopicID
		}
		return err
	})
	p := presp.Topics[0].Partitions[0]
	check("Produce", p.ErrorCode, p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch, presp.Brokers)

	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.MaxWaitMillis, fetch.MaxBytes, fetch.SessionEpoch = 16, 0, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.TopicID = topicID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.CurrentLeaderEpoch, fp.PartitionMaxBytes = -1, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	fresp, err := fetch.RequestWith(context.Background(), to)
	if err != nil {
		t.Fatal(err)
	}
	if len(fresp.Topics) != 1 || len(fresp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch answer: %+v", fresp)
	}
	f := fresp.Topics[0].Partitions[0]
	var endpoints []kmsg.ProduceResponseBroker
	for _, b := range fresp.Brokers {
		endpoints = append(endpoints, kmsg.ProduceResponseBroker{NodeID: b.NodeID, Host: b.Host, Port: b.Port})
	}
	check("Fetch", f.ErrorCode, f.CurrentLeader.LeaderID, f.CurrentLeader.LeaderEpoch, endpoints)
}
