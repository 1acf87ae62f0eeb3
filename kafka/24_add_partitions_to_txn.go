package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/store"
)

// Versions 4+ are the broker-to-broker batches of KIP-890; clients use 0–3.
func init() {
	register(kmsg.AddPartitionsToTxn.Int16(), 0, 3, answerNow(handleAddPartitionsToTxn))
}

// handleAddPartitionsToTxn adds partitions to the producer's transaction
// (starting it), all or none: if one partition is refused the others
// answer OPERATION_NOT_ATTEMPTED.
func handleAddPartitionsToTxn(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	var parts []store.TxnPartition
	denied := false
	for _, rt := range req.Topics {
		for _, p := range rt.Partitions {
			parts = append(parts, store.TxnPartition{Topic: rt.Topic, Partition: p})
		}
		denied = denied || c.topicDenied(auth.Write, rt.Topic) != 0
	}
	codes := make([]int16, len(parts))
	fill := func(code int16) {
		for i := range codes {
			codes[i] = code
		}
	}
	switch {
	case c.writesNowhere():
		fill(kerr.TransactionalIDAuthorizationFailed.Code)
	case denied:
		for i, p := range parts {
			codes[i] = kerr.OperationNotAttempted.Code
			if c.topicDenied(auth.Write, p.Topic) != 0 {
				codes[i] = kerr.TopicAuthorizationFailed.Code
			}
		}
	case !c.s.topic(req.TransactionalID).IsLeader():
		fill(kerr.NotCoordinator.Code)
	case c.s.outsideTxnGroup(req.TransactionalID, parts) >= 0:
		// A transaction is one raft group's: its commit markers are
		// written in one entry.
		for i, p := range parts {
			codes[i] = kerr.OperationNotAttempted.Code
			if c.s.placedIn(p.Topic) != c.s.placedIn(req.TransactionalID) {
				codes[i] = kerr.InvalidTxnState.Code
			}
		}
	default:
		res, err := c.s.topic(req.TransactionalID).AddToTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts, nil)
		if err != nil {
			fill(txnCallCode(err))
			break
		}
		for i, o := range res.Partitions {
			codes[i] = txnCode(o, req.Version, 2)
		}
	}
	i := 0
	for _, rt := range req.Topics {
		t := kmsg.NewAddPartitionsToTxnResponseTopic()
		t.Topic = rt.Topic
		for _, p := range rt.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, codes[i]
			i++
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}
