package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
)

func init() { register(kmsg.AddOffsetsToTxn.Int16(), 0, 3, answerNow(handleAddOffsetsToTxn)) }

// handleAddOffsetsToTxn adds a consumer group to the producer's
// transaction, so the offsets it stages with TxnOffsetCommit commit with it.
func handleAddOffsetsToTxn(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case c.writesNowhere():
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case c.groupDenied(auth.Read, req.Group) != 0:
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
	case !broker.ValidGroupName(req.Group):
		resp.ErrorCode = kerr.InvalidGroupID.Code
	case !c.s.topic(req.TransactionalID).IsLeader():
		resp.ErrorCode = kerr.NotCoordinator.Code
	default:
		res, err := c.s.topic(req.TransactionalID).AddToTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, nil, []string{req.Group})
		if err != nil {
			resp.ErrorCode = txnCallCode(err)
			break
		}
		resp.ErrorCode = txnCode(res.Outcome, req.Version, 2)
	}
	return resp, nil
}
