package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.InitProducerID.Int16(), 0, 5, answerNow(handleInitProducerID)) }

// handleInitProducerID gives an idempotent producer its id. A new producer
// gets a fresh id from the replicated counter with epoch 0; a producer that
// names its current id and epoch (KIP-360, v3+) keeps the id with the epoch
// bumped, and must then restart its sequences at 0. Transactions are not
// supported, so a transactional id is refused.
func handleInitProducerID(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	switch {
	case req.TransactionalID != nil:
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case c.s.cfg.Auth.Enabled && !c.principal.AllowsAnyWrite():
		// An idempotent producer needs the right to write somewhere (KIP-679).
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	case !c.s.svc.IsLeader():
		resp.ErrorCode = kerr.NotCoordinator.Code
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

func newProducer(c *conn, resp *kmsg.InitProducerIDResponse) *kmsg.InitProducerIDResponse {
	id, err := c.s.svc.NewProducerID()
	if err != nil {
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
}
