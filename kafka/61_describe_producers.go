package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
)

func init() { register(kmsg.DescribeProducers.Int16(), 0, 0, answerNow(handleDescribeProducers)) }

// handleDescribeProducers lists the idempotent and transactional producers
// with state on each partition, with the first offset of a transaction
// they have in progress there (what kafka-transactions.sh find-hanging
// looks for).
func handleDescribeProducers(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		tb := c.s.topic(rt.Topic)
		leader := tb.IsLeader()
		t := kmsg.NewDescribeProducersResponseTopic()
		t.Topic = rt.Topic
		for _, partition := range rt.Partitions {
			p := kmsg.NewDescribeProducersResponseTopicPartition()
			p.Partition = partition
			switch {
			case c.topicDenied(auth.Read, rt.Topic) != 0:
				p.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !leader:
				p.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				producers, outcome, complete, err := tb.PartitionProducers(rt.Topic, partition)
				if err != nil {
					p.ErrorCode = errCode(err)
					break
				}
				if p.ErrorCode = outcomeCode(outcome); p.ErrorCode != 0 {
					break
				}
				if !complete {
					p.ErrorMessage = kmsg.StringPtr("too many producers to list them all: the list is partial")
				}
				for _, ap := range producers {
					a := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					a.ProducerID, a.ProducerEpoch, a.LastSequence = ap.ProducerID, int32(ap.Epoch), ap.LastSequence
					a.LastTimestamp, a.CoordinatorEpoch, a.CurrentTxnStartOffset = ap.LastUpdateMs, 0, ap.TxnStartOffset
					p.ActiveProducers = append(p.ActiveProducers, a)
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}
