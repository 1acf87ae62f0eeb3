package kafka

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

// joinTxn adds to the producer's transaction the partitions a Produce of
// v12+ (transaction version 2, KIP-890 part 2) writes transactional
// batches to, which the client no longer names in AddPartitionsToTxn: one
// AddToTxn entry for those not in it yet, before the produce is proposed.
// It answers the error code of each partition that could not join.
// Partitions resp already refuses are left out.
func (c *conn) joinTxn(req *kmsg.ProduceRequest, names []string, resp *kmsg.ProduceResponse) map[store.TxnPartition]int16 {
	if req.Version < 12 || req.TransactionID == nil {
		return nil
	}
	id := *req.TransactionID
	var parts []store.TxnPartition
	producerID, epoch := int64(-1), int16(-1)
	for i, rt := range req.Topics {
		for j, rp := range rt.Partitions {
			h, ok := recordbatch.ReadHeader(rp.Records)
			if !ok || !h.Transactional || names[i] == "" || resp.Topics[i].Partitions[j].ErrorCode != 0 {
				continue // refused later, or no transaction to join
			}
			producerID, epoch = h.ProducerID, h.ProducerEpoch
			parts = append(parts, store.TxnPartition{Topic: names[i], Partition: rp.Partition})
		}
	}
	if len(parts) == 0 {
		return nil
	}
	coordinator := c.s.topic(id)
	if st, found, err := coordinator.Txn(id); err == nil && found && st.Status == store.TxnOngoing &&
		st.ProducerID == producerID && st.Epoch == epoch {
		parts = slices.DeleteFunc(parts, func(p store.TxnPartition) bool { return slices.Contains(st.Partitions, p) })
		if len(parts) == 0 {
			return nil
		}
	}
	failed := map[store.TxnPartition]int16{}
	fail := func(code int16) map[store.TxnPartition]int16 {
		for _, p := range parts {
			failed[p] = code
		}
		return failed
	}
	switch {
	case c.s.outsideTxnGroup(id, parts) >= 0:
		return fail(kerr.InvalidTxnState.Code) // a transaction is one raft group's
	case !coordinator.IsLeader():
		return fail(kerr.NotLeaderForPartition.Code)
	}
	res, err := coordinator.AddToTxn(id, producerID, epoch, parts, nil)
	if err != nil {
		return fail(errCode(err))
	}
	for i, o := range res.Partitions {
		if o != command.TopicOK {
			failed[parts[i]] = outcomeCode(o)
		}
	}
	return failed
}
