package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/waggle-mq/waggle/command"
)

// Kafka transactions (KIP-98): the raft leader is every transactional id's
// coordinator, and the coordinator's state is replicated, so after a
// leader change the new leader carries on with the transactions in
// progress. The handlers are 22 (InitProducerId with a transactional id),
// 24, 25, 26 and 28; 61, 65 and 66 describe.

// txnCode maps a transaction outcome to the error code of an API whose
// version is version; fencedSince is the first version of that API that
// answers PRODUCER_FENCED (KIP-588), older ones get INVALID_PRODUCER_EPOCH.
func txnCode(o command.TopicOutcome, version, fencedSince int16) int16 {
	if o == command.ProducerFenced && version >= fencedSince {
		return kerr.ProducerFenced.Code
	}
	return outcomeCode(o)
}

// txnCallCode is the error of a coordinator call that could not be
// applied: leadership lost or the outcome unknown send the client to find
// the coordinator again, where its retry is answered from the state.
func txnCallCode(err error) int16 {
	if code := errCode(err); code != kerr.NotLeaderForPartition.Code {
		return code
	}
	return kerr.NotCoordinator.Code
}

// writesNowhere reports a principal that may write to no queue: it gets no
// producer id, idempotent (KIP-679) or transactional (transactional ids
// have no ACLs of their own in waggle).
func (c *conn) writesNowhere() bool {
	return c.s.cfg.Auth.Enabled && !c.s.svc.ACLSet().AllowsAnyWrite(c.principal, c.host())
}
