package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.ShareAcknowledge.Int16(), 1, 2, answerNow(handleShareAcknowledge)) }

// handleShareAcknowledge applies a share group member's acknowledgements
// outside a fetch. Epoch 0 is refused (acks need an open session), -1
// closes the session after the acks, releasing what the member still
// holds in it; any other epoch must be the session's and moves it on.
func handleShareAcknowledge(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	fail := func(code int16, msg string) (kmsg.Response, error) {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp, nil
	}
	group, member, code, msg := c.shareCaller(req.GroupID, req.MemberID)
	if code != 0 {
		return fail(code, msg)
	}
	k := shareSessionKey{group, member}
	var parts []sharePart
	switch req.ShareSessionEpoch {
	case 0:
		return fail(kerr.InvalidShareSessionEpoch.Code, "Acknowledgements need an open share session.")
	case -1:
		parts, code = c.s.shares.close(k)
	default:
		_, code = c.s.shares.next(k, req.ShareSessionEpoch, nil, nil)
	}
	if code != 0 {
		return fail(code, "")
	}
	cfg, err := c.shareSettingsOf(group)
	if err != nil {
		return fail(lookupCode(err), "")
	}
	resp.AcquisitionLockTimeoutMillis = int32(cfg.LeaseMs)
	var acks []partAcks
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			pa := partAcks{part: sharePart{t.TopicID, p.Partition}}
			for _, b := range p.AcknowledgementBatches {
				pa.batches = append(pa.batches, ackBatch{b.FirstOffset, b.LastOffset, b.AcknowledgeTypes})
			}
			acks = append(acks, pa)
		}
	}
	outcomes := c.acknowledge(group, member, acks, req.IsRenewAck, cfg.LeaseMs)
	if req.ShareSessionEpoch == -1 {
		c.s.releaseShareParts(k, parts)
	}
	index := map[[16]byte]int{}
	for _, pa := range acks {
		i, ok := index[pa.part.topicID]
		if !ok {
			i = len(resp.Topics)
			index[pa.part.topicID] = i
			t := kmsg.NewShareAcknowledgeResponseTopic()
			t.TopicID = pa.part.topicID
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewShareAcknowledgeResponseTopicPartition()
		p.Partition = pa.part.partition
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
		o := outcomes[pa.part]
		p.ErrorCode = o.code
		if o.msg != "" {
			p.ErrorMessage = kmsg.StringPtr(o.msg)
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
	}
	return resp, nil
}
