package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
)

func init() { register(kmsg.OffsetCommit.Int16(), 0, 9, answerNow(handleOffsetCommit)) }

// noCommitNeeded marks a partition of an OffsetCommit answered without
// an error and without a commit.
const noCommitNeeded int16 = -2

// handleOffsetCommit checks the member's generation, then stores the
// offsets through raft: committed offsets survive a leader change.
func handleOffsetCommit(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	code := int16(0)
	generation := req.Generation
	if req.Version == 0 {
		generation = -1
	}
	co, coordinating := c.coordinator(req.Group)
	switch {
	case req.Group == "" || !broker.ValidGroupName(req.Group):
		code = kerr.InvalidGroupID.Code
	case !coordinating:
		code = kerr.NotCoordinator.Code
	default:
		if code = co.load(req.Group); code == 0 {
			code = co.checkOffsetCommit(req.Group, req.MemberID, req.InstanceID, generation, req.Version)
		}
	}
	// A partition refused on its own (metadata over Kafka's default
	// offset.metadata.max.bytes, a name no topic can have) is answered
	// without being committed; the others go on.
	var offsets []command.OffsetCommit
	var refused []int16 // per partition in request order: 0 or the code
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			o := command.OffsetCommit{Topic: rt.Topic, Partition: rp.Partition, Offset: rp.Offset, LeaderEpoch: rp.LeaderEpoch}
			if rp.Metadata != nil {
				o.Metadata = *rp.Metadata
			}
			switch {
			case isInternalTopic(rt.Topic) && rp.Partition == 0 && rp.Offset == 0:
				// The internal topic's partition is always empty: 0 is the
				// one position a consumer of it has, the position it gets
				// with no commit at all, so the commit is taken without
				// being stored (a KIP-848 pattern may assign the topic).
				refused = append(refused, noCommitNeeded)
			case !broker.ValidTopicName(rt.Topic), isInternalTopic(rt.Topic):
				refused = append(refused, kerr.UnknownTopicOrPartition.Code)
			case len(o.Metadata) > broker.MaxOffsetMetadata:
				refused = append(refused, kerr.OffsetMetadataTooLarge.Code)
			default:
				refused = append(refused, 0)
				offsets = append(offsets, o)
			}
		}
	}
	var outcomes []command.TopicOutcome
	if code == 0 && len(offsets) > 0 {
		var err error
		if outcomes, err = c.s.commitOffsets(req.Group, offsets); err != nil {
			code = kerr.NotCoordinator.Code
		}
	}
	i, j := 0, 0
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetCommitResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetCommitResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			switch {
			case code != 0:
			case refused[i] == noCommitNeeded:
			case refused[i] != 0:
				p.ErrorCode = refused[i]
			default:
				p.ErrorCode = outcomeCode(outcomes[j])
				j++
			}
			i++
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}
