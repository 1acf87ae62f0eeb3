package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/fault"
	"github.com/waggle-mq/waggle/store"
)

func init() { register(kmsg.TxnOffsetCommit.Int16(), 0, 5, answerNow(handleTxnOffsetCommit)) }

// handleTxnOffsetCommit stages a consumer group's offsets in the producer's
// transaction. From v3 the consumer's member id and generation are checked
// as OffsetCommit checks them (KIP-447), so a consumer fenced by a
// rebalance cannot commit through a transaction either. From v5
// (transaction version 2, KIP-890) the group joins the transaction here,
// without AddOffsetsToTxn.
func handleTxnOffsetCommit(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	code := int16(0)
	co, coordinating := c.coordinator(req.Group)
	switch {
	case c.writesNowhere():
		code = kerr.TransactionalIDAuthorizationFailed.Code
	case c.groupDenied(auth.Read, req.Group) != 0:
		code = kerr.GroupAuthorizationFailed.Code
	case !broker.ValidGroupName(req.Group):
		code = kerr.InvalidGroupID.Code
	case !coordinating:
		code = kerr.NotCoordinator.Code
	case req.Version >= 3 && req.Generation >= 0:
		if code = co.load(req.Group); code == 0 {
			code = co.checkCommit(req.Group, req.MemberID, req.InstanceID, req.Generation)
		}
	}
	var offsets []command.OffsetCommit
	var noCommit []bool // per partition in request order: answered without staging
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if isInternalTopic(rt.Topic) && rp.Partition == 0 && rp.Offset == 0 {
				noCommit = append(noCommit, true) // as OffsetCommit takes it
				continue
			}
			noCommit = append(noCommit, false)
			o := command.OffsetCommit{Topic: rt.Topic, Partition: rp.Partition, Offset: rp.Offset, LeaderEpoch: rp.LeaderEpoch}
			if o.Offset > 0 && fault.Is("txn-offset-behind", 2) {
				o.Offset--
			}
			if rp.Metadata != nil {
				o.Metadata = *rp.Metadata
			}
			if code == 0 && (!broker.ValidTopicName(rt.Topic) || isInternalTopic(rt.Topic) || len(o.Metadata) > broker.MaxOffsetMetadata) {
				code = kerr.InvalidRequest.Code // the whole call: offsets stage together
			}
			offsets = append(offsets, o)
		}
	}
	if code == 0 {
		parts := make([]store.TxnPartition, len(offsets))
		for i, o := range offsets {
			parts[i] = store.TxnPartition{Topic: o.Topic, Partition: o.Partition}
		}
		if c.s.outsideTxnGroup(req.TransactionalID, parts) >= 0 {
			code = kerr.InvalidTxnState.Code // the offsets would stage in another raft group
		}
	}
	var outcomes []command.TopicOutcome
	if code == 0 && len(offsets) > 0 {
		// Staged in the transaction's raft group, whose leader may be
		// another node than this coordinator.
		txnGroup := c.s.writer(c.s.placedIn(req.TransactionalID))
		if req.Version >= 5 {
			res, err := txnGroup.AddToTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, nil, []string{req.Group})
			switch {
			case err != nil:
				code = txnCallCode(err)
			case res.Outcome != command.TopicOK:
				code = txnCode(res.Outcome, req.Version, 2)
			}
		}
		if code == 0 {
			var err error
			if outcomes, err = txnGroup.TxnOffsetCommit(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, offsets); err != nil {
				code = txnCallCode(err)
			}
		}
	}
	i, n := 0, 0
	for _, rt := range req.Topics {
		t := kmsg.NewTxnOffsetCommitResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			switch {
			case code != 0, noCommit[n]:
			default:
				p.ErrorCode = txnCode(outcomes[i], req.Version, 2)
				i++
			}
			n++
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}
