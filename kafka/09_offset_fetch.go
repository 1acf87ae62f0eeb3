package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/command"
)

func init() { register(kmsg.OffsetFetch.Int16(), 0, 9, answerNow(handleOffsetFetch)) }

// handleOffsetFetch answers committed offsets from the replicated state;
// a partition (or group) with none answers offset -1, not an error.
func handleOffsetFetch(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version < 8 {
		if code := c.groupDenied(auth.Read, req.Group); code != 0 {
			resp.ErrorCode = code
			return resp, nil
		}
		topics, code := c.fetchGroupOffsets(req.Group, asGroupTopics(req.Topics), req.RequireStable)
		resp.ErrorCode = code
		for _, t := range topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	for _, g := range req.Groups {
		rg := kmsg.NewOffsetFetchResponseGroup()
		rg.Group = g.Group
		if rg.ErrorCode = c.groupDenied(auth.Read, g.Group); rg.ErrorCode == 0 {
			rg.Topics, rg.ErrorCode = c.fetchGroupOffsets(g.Group, g.Topics, req.RequireStable)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

func asGroupTopics(ts []kmsg.OffsetFetchRequestTopic) []kmsg.OffsetFetchRequestGroupTopic {
	if ts == nil {
		return nil // null: every topic
	}
	out := make([]kmsg.OffsetFetchRequestGroupTopic, len(ts))
	for i, t := range ts {
		out[i] = kmsg.NewOffsetFetchRequestGroupTopic()
		out[i].Topic, out[i].Partitions = t.Topic, t.Partitions
	}
	return out
}

// fetchGroupOffsets answers the requested partitions (all committed ones
// when topics is nil), once this coordinator has loaded every commit
// acknowledged before it (offsetsLoaded). With requireStable (KIP-447) a partition whose
// offset a transaction in progress has staged answers
// UNSTABLE_OFFSET_COMMIT, and the consumer asks again.
func (c *conn) fetchGroupOffsets(group string, topics []kmsg.OffsetFetchRequestGroupTopic, requireStable bool) ([]kmsg.OffsetFetchResponseGroupTopic, int16) {
	if _, coordinating := c.coordinator(group); !coordinating {
		return nil, kerr.NotCoordinator.Code
	}
	if !c.s.offsetsLoaded() {
		return nil, kerr.CoordinatorLoadInProgress.Code // retriable
	}
	committed, err := c.s.groupOffsets(group)
	if err != nil {
		return nil, lookupCode(err)
	}
	type tp struct {
		topic     string
		partition int32
	}
	byTP := map[tp]command.OffsetCommit{}
	for _, o := range committed {
		byTP[tp{o.Topic, o.Partition}] = o
	}
	unstable := map[tp]bool{}
	if requireStable {
		pending, err := c.s.pendingTxnOffsets(group)
		if err != nil {
			return nil, kerr.UnknownServerError.Code
		}
		for _, o := range pending {
			unstable[tp{o.Topic, o.Partition}] = true
		}
	}
	if topics == nil {
		index := map[string]int{}
		for _, o := range committed {
			if _, ok := index[o.Topic]; !ok {
				index[o.Topic] = len(topics)
				t := kmsg.NewOffsetFetchRequestGroupTopic()
				t.Topic = o.Topic
				topics = append(topics, t)
			}
			t := &topics[index[o.Topic]]
			t.Partitions = append(t.Partitions, o.Partition)
		}
	}
	var out []kmsg.OffsetFetchResponseGroupTopic
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
			if o, ok := byTP[tp{t.Topic, p}]; ok {
				rp.Offset, rp.LeaderEpoch, rp.Metadata = o.Offset, o.LeaderEpoch, kmsg.StringPtr(o.Metadata)
			}
			if unstable[tp{t.Topic, p}] {
				rp.Offset, rp.ErrorCode = -1, kerr.UnstableOffsetCommit.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out, 0
}
