package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/waggle-mq/waggle/command"
)

func init() { register(kmsg.InitProducerID.Int16(), 0, 5, answerNow(handleInitProducerID)) }

// handleInitProducerID gives an idempotent producer its id, on any broker
// (librdkafka asks whichever it is connected to). A new producer
// gets a fresh id from the replicated counter with epoch 0; a producer that
// names its current id and epoch (KIP-360, v3+) keeps the id with the epoch
// bumped, and must then restart its sequences at 0. A transactional
// producer gets its transactional id's producer id with a new epoch, which
// fences its earlier incarnations (KIP-98).
func handleInitProducerID(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	switch {
	case req.TransactionalID != nil && c.writesNowhere():
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case req.TransactionalID != nil && !c.s.topic(*req.TransactionalID).IsLeader():
		resp.ErrorCode = kerr.NotCoordinator.Code
	case req.TransactionalID != nil:
		id, epoch := int64(-1), int16(-1)
		if req.Version >= 3 {
			id, epoch = req.ProducerID, req.ProducerEpoch
		}
		res, err := c.s.topic(*req.TransactionalID).InitTxnProducer(*req.TransactionalID, req.TransactionTimeoutMillis, id, epoch)
		switch {
		case err != nil:
			resp.ErrorCode = txnCallCode(err)
		case res.Outcome != command.TopicOK:
			resp.ErrorCode = txnCode(res.Outcome, req.Version, 4)
		default:
			resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.Epoch
		}
	case c.writesNowhere():
		// An idempotent producer needs the right to write somewhere (KIP-679).
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	case req.ProducerID >= 0 && req.ProducerEpoch >= 0:
		if req.ProducerEpoch == 1<<15-1 { // epoch exhausted: a new id
			return newProducer(c, resp), nil
		}
		resp.ProducerID, resp.ProducerEpoch = req.ProducerID, req.ProducerEpoch+1
	default:
		return newProducer(c, resp), nil
	}
	return resp, nil
}

// newProducer mints a producer id in group 0, whichever broker is asked:
// an idempotent producer may ask any (a follower forwards to the leader).
func newProducer(c *conn, resp *kmsg.InitProducerIDResponse) *kmsg.InitProducerIDResponse {
	id, err := c.s.writer(0).NewProducerID()
	if err != nil {
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
}
