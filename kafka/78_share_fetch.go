package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
)

func init() { register(kmsg.ShareFetch.Int16(), 1, 2, answerNow(handleShareFetch)) }

// shareCaller checks the group and member a ShareFetch or
// ShareAcknowledge names, and the principal's right to the group; a code
// refuses the request.
func (c *conn) shareCaller(groupID, memberID *string) (group, member string, code int16, msg string) {
	group, member = derefString(groupID), derefString(memberID)
	if group == "" || member == "" || len(member) > maxMemberIDLen {
		return group, member, kerr.InvalidRequest.Code, "GroupId and MemberId must be given."
	}
	return group, member, c.groupDenied(auth.Read, group), ""
}

// defaultShareMaxRecords is what a share fetch that names no MaxRecords
// acquires at most.
const defaultShareMaxRecords = 500

// handleShareFetch serves a share group member's fetch (KIP-932): it
// moves the member's share session on, applies the acknowledgements it
// carries, then acquires records from the session's partitions under
// leases and answers them with their delivery counts. When nothing can be
// acquired it waits, up to MaxWaitMillis, for an append. Session errors
// are answered at the top level, where clients reset their session.
func handleShareFetch(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
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
	var adds, forgets []sharePart
	var acks []partAcks
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			sp := sharePart{t.TopicID, p.Partition}
			adds = append(adds, sp)
			if len(p.AcknowledgementBatches) > 0 {
				pa := partAcks{part: sp}
				for _, b := range p.AcknowledgementBatches {
					pa.batches = append(pa.batches, ackBatch{b.FirstOffset, b.LastOffset, b.AcknowledgeTypes})
				}
				acks = append(acks, pa)
			}
		}
	}
	for _, t := range req.ForgottenTopicsData {
		for _, p := range t.Partitions {
			forgets = append(forgets, sharePart{t.TopicID, p})
		}
	}
	cfg, err := c.shareSettingsOf(group)
	if err != nil {
		return fail(lookupCode(err), "")
	}
	resp.AcquisitionLockTimeoutMillis = int32(cfg.LeaseMs)
	k := shareSessionKey{group, member}
	var parts []sharePart
	switch req.ShareSessionEpoch {
	case 0:
		if len(acks) > 0 {
			return fail(kerr.InvalidRequest.Code, "Acknowledgements need an open share session.")
		}
		parts, code = c.s.shares.open(k, c, adds)
	case -1:
		parts, code = c.s.shares.close(k)
	default:
		parts, code = c.s.shares.next(k, req.ShareSessionEpoch, adds, forgets)
	}
	if code != 0 {
		return fail(code, "")
	}
	out := newShareFetchAnswer(c)
	for p, o := range c.acknowledge(group, member, acks, req.IsRenewAck, cfg.LeaseMs) {
		e := out.entry(p)
		e.AcknowledgeErrorCode = o.code
		if o.msg != "" {
			e.AcknowledgeErrorMessage = kmsg.StringPtr(o.msg)
		}
	}
	switch {
	case req.ShareSessionEpoch == -1:
		c.s.releaseShareParts(k, parts) // after the acks it carried
		return out.fill(resp), nil
	case req.IsRenewAck:
		return out.fill(resp), nil
	}
	budget := int(req.MaxRecords)
	if req.Version < 1 {
		budget = defaultShareMaxRecords
	}
	if budget <= 0 {
		return out.fill(resp), nil
	}
	deadline := time.Now().Add(min(time.Duration(req.MaxWaitMillis)*time.Millisecond, maxFetchWait))
	for {
		got, signals, refused := c.acquireFromSession(group, member, parts, budget, cfg, out)
		remaining := time.Until(deadline)
		if got > 0 || refused || len(acks) > 0 || remaining <= 0 || len(signals) == 0 || !waitAny(c, signals, remaining) {
			return out.fill(resp), nil
		}
	}
}

// acquireFromSession acquires from the session's partitions, topic by
// topic, up to budget records, into out. It answers how many it acquired,
// the append signals to wait on when none, and whether a partition was
// refused (answered at once, with its error).
func (c *conn) acquireFromSession(group, member string, parts []sharePart, budget int, cfg broker.ShareTerms, out *shareFetchAnswer) (got int, signals []<-chan struct{}, refused bool) {
	byTopic := map[[16]byte][]sharePart{}
	var order [][16]byte
	for _, p := range parts {
		if _, seen := byTopic[p.topicID]; !seen {
			order = append(order, p.topicID)
		}
		byTopic[p.topicID] = append(byTopic[p.topicID], p)
	}
	for _, id := range order {
		ps := byTopic[id]
		refuse := func(code int16) {
			for _, p := range ps {
				out.entry(p).ErrorCode = code
				if code == kerr.NotLeaderForPartition.Code {
					out.moved = append(out.moved, p)
				}
			}
			refused = true
		}
		info, ok, err := c.topicByID(id)
		switch {
		case err != nil:
			refuse(lookupCode(err))
			continue
		case !ok:
			refuse(kerr.UnknownTopicID.Code)
			continue
		case c.topicDenied(auth.Read, info.Name) != 0:
			refuse(kerr.TopicAuthorizationFailed.Code)
			continue
		case !c.s.topic(info.Name).IsLeader():
			out.names[id] = info.Name
			refuse(kerr.NotLeaderForPartition.Code)
			continue
		}
		if budget-got <= 0 {
			break
		}
		leased, appended, err := c.acquire(group, member, info.Name, ps, budget-got, cfg)
		if err != nil {
			refuse(acquireErrCode(err))
			continue
		}
		if appended != nil {
			signals = append(signals, appended)
		}
		for _, a := range leased {
			e := out.entry(a.part)
			e.Records, e.AcquiredRecords = a.records, a.ranges
			for _, r := range a.ranges {
				got += int(r.LastOffset - r.FirstOffset + 1)
			}
		}
	}
	return got, signals, refused
}

// shareFetchAnswer gathers a ShareFetch response's partitions.
type shareFetchAnswer struct {
	c     *conn
	order []sharePart
	parts map[sharePart]*kmsg.ShareFetchResponseTopicPartition
	moved []sharePart         // refused with NOT_LEADER_OR_FOLLOWER
	names map[[16]byte]string // topic names of moved partitions
}

func newShareFetchAnswer(c *conn) *shareFetchAnswer {
	return &shareFetchAnswer{c: c, parts: map[sharePart]*kmsg.ShareFetchResponseTopicPartition{}, names: map[[16]byte]string{}}
}

// entry is p's answer, made on first use.
func (a *shareFetchAnswer) entry(p sharePart) *kmsg.ShareFetchResponseTopicPartition {
	if e := a.parts[p]; e != nil {
		return e
	}
	e := kmsg.NewShareFetchResponseTopicPartition()
	e.Partition = p.partition
	e.CurrentLeader.LeaderID, e.CurrentLeader.LeaderEpoch = -1, -1
	a.parts[p] = &e
	a.order = append(a.order, p)
	return &e
}

// fill writes the answer into resp, topics in first-use order, with
// KIP-951 hints for moved partitions.
func (a *shareFetchAnswer) fill(resp *kmsg.ShareFetchResponse) *kmsg.ShareFetchResponse {
	h := leaderHints{c: a.c}
	for _, p := range a.moved {
		e := a.parts[p]
		e.CurrentLeader.LeaderID, e.CurrentLeader.LeaderEpoch = h.leader(a.names[p.topicID])
	}
	index := map[[16]byte]int{}
	for _, p := range a.order {
		i, ok := index[p.topicID]
		if !ok {
			i = len(resp.Topics)
			index[p.topicID] = i
			t := kmsg.NewShareFetchResponseTopic()
			t.TopicID = p.topicID
			resp.Topics = append(resp.Topics, t)
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, *a.parts[p])
	}
	for _, b := range h.endpoints() {
		resp.NodeEndpoints = append(resp.NodeEndpoints, kmsg.ShareFetchResponseNodeEndpoint{NodeID: b.id, Host: b.host, Port: b.port})
	}
	return resp
}
