package kafka

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
)

func init() {
	register(kmsg.DescribeShareGroupOffsets.Int16(), 0, 1, answerNow(handleDescribeShareGroupOffsets))
}

// handleDescribeShareGroupOffsets answers each share-partition's start
// offset: the group's position in the partition, the first record it has
// not finished (the position a share consumer and an HTTP consumer of the
// group share). A partition the group never read answers -1. Without
// topics, every partition the group has a position in.
func handleDescribeShareGroupOffsets(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	for _, rg := range req.Groups {
		g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		g.GroupID = rg.GroupID
		if g.ErrorCode = c.shareAdminDenied(rg.GroupID, auth.Read); g.ErrorCode != 0 {
			resp.Groups = append(resp.Groups, g)
			continue
		}
		offsets, err := c.s.groupOffsets(rg.GroupID)
		if err != nil {
			g.ErrorCode = lookupCode(err)
			resp.Groups = append(resp.Groups, g)
			continue
		}
		at := map[string]map[int32]int64{}
		for _, o := range offsets {
			if at[o.Topic] == nil {
				at[o.Topic] = map[int32]int64{}
			}
			at[o.Topic][o.Partition] = o.Offset
		}
		topics := rg.Topics
		if topics == nil {
			for _, name := range slices.Sorted(maps.Keys(at)) {
				t := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
				t.Topic = name
				t.Partitions = slices.Sorted(maps.Keys(at[name]))
				topics = append(topics, t)
			}
		}
		for _, rt := range topics {
			t := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			t.Topic = rt.Topic
			info, ok, err := c.s.lookupTopic(rt.Topic)
			if err == nil && ok {
				t.TopicID = topicID(info)
			}
			for _, p := range rt.Partitions {
				rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = p, -1, -1, -1
				switch {
				case err != nil:
					rp.ErrorCode = lookupCode(err)
				case !ok || c.topicDenied(auth.Read, rt.Topic) != 0:
				default:
					if o, has := at[rt.Topic][p]; has {
						rp.StartOffset = o
						_, rp.LeaderEpoch = c.leaderOf(c.s.topic(rt.Topic))
					}
				}
				t.Partitions = append(t.Partitions, rp)
			}
			g.Topics = append(g.Topics, t)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

// shareAdminDenied checks a share-group admin request: the caller's
// permission on the group, and that this node coordinates it.
func (c *conn) shareAdminDenied(group string, action auth.Action) int16 {
	if code := c.groupDenied(action, group); code != 0 {
		return code
	}
	if _, coordinating := c.coordinator(group); !coordinating {
		return kerr.NotCoordinator.Code
	}
	return 0
}

// shareOffsetsRefusal refuses to change the positions of a share group
// the principal may not manage, of one with members (NON_EMPTY_GROUP) or
// of a group of another kind (GROUP_ID_NOT_FOUND), with a message.
func (c *conn) shareOffsetsRefusal(group string) (int16, *string) {
	if code := c.shareAdminDenied(group, auth.Manage); code != 0 {
		return code, nil
	}
	co, _ := c.coordinator(group)
	co.mu.Lock()
	defer co.mu.Unlock()
	switch {
	case co.consumers[group] != nil || co.groups[group] != nil && len(co.groups[group].members) > 0:
		return kerr.GroupIDNotFound.Code, kmsg.StringPtr("Group " + group + " is not a share group.")
	case co.shares[group] != nil && len(co.shares[group].members) > 0:
		return kerr.NonEmptyGroup.Code, kmsg.StringPtr("The share group has members.")
	}
	return 0, nil
}
