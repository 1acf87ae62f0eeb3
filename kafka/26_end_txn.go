package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/fault"
)

// Versions 4 (a new error code) and 5 (KIP-890's epoch per transaction)
// are not served.
func init() { register(kmsg.EndTxn.Int16(), 0, 3, answerNow(handleEndTxn)) }

// handleEndTxn commits or aborts the producer's transaction: markers on
// every partition it wrote to and its staged offsets, in one raft entry.
// A retry of a commit or abort that already happened answers success.
func handleEndTxn(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	switch {
	case c.writesNowhere():
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case !c.s.topic(req.TransactionalID).IsLeader():
		resp.ErrorCode = kerr.NotCoordinator.Code
	default:
		commit := req.Commit && !fault.Is("commit-aborts", 20)
		o, err := c.s.topic(req.TransactionalID).EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, commit)
		if err != nil {
			resp.ErrorCode = txnCallCode(err)
			break
		}
		resp.ErrorCode = txnCode(o, req.Version, 2)
	}
	return resp, nil
}
