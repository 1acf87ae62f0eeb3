package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/fault"
)

// Version 5 is transaction version 2 (KIP-890 part 2): every EndTxn moves
// the producer to a new epoch, which the answer carries.
func init() { register(kmsg.EndTxn.Int16(), 0, 5, answerNow(handleEndTxn)) }

// handleEndTxn commits or aborts the producer's transaction: markers on
// every partition it wrote to and its staged offsets, in one raft entry.
// A retry of a commit or abort that already happened answers success (at
// v5 with the epoch that call moved the producer to).
func handleEndTxn(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	switch {
	case c.writesNowhere():
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case !c.s.topic(req.TransactionalID).IsLeader():
		resp.ErrorCode = kerr.NotCoordinator.Code
	case req.Version >= 5 && c.s.topic(req.TransactionalID).LogFormat() >= command.LogFormat9:
		commit := req.Commit && !fault.Is("commit-aborts", 20)
		r, err := c.s.topic(req.TransactionalID).EndTxnBump(req.TransactionalID, req.ProducerID, req.ProducerEpoch, commit)
		if err != nil {
			resp.ErrorCode = txnCallCode(err)
			break
		}
		resp.ErrorCode = txnCode(r.Outcome, req.Version, 2)
		resp.ProducerID, resp.ProducerEpoch = r.ProducerID, r.Epoch
	default:
		// Below v5, or in a raft group not yet at format 9: the epoch
		// stays, and a v5 answer says so with producer id -1.
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
