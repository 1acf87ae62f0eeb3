package broker

import (
	"strconv"

	"github.com/waggle-mq/waggle/raftfsm"
	"github.com/waggle-mq/waggle/store"
)

// OffsetCommit is a consumer group's position in one partition.
type OffsetCommit = raftfsm.OffsetCommit

// CommitOffsets stores a group's committed offsets through raft, so they
// survive failover; one outcome per offset.
func (s *Service) CommitOffsets(group string, offsets []OffsetCommit) ([]TopicOutcome, error) {
	cmd := raftfsm.CommitOffsetsCommand{NowMs: s.now().UnixMilli(), Group: group, Offsets: offsets}
	answer, err := s.apply(cmd.Encode())
	if err != nil {
		return nil, err
	}
	return answer.([]TopicOutcome), nil
}

// DeleteOffsets forgets a group's committed offsets (all of them, or the
// listed partitions) and reports how many were removed.
func (s *Service) DeleteOffsets(group string, all bool, offsets []OffsetCommit) (int, error) {
	cmd := raftfsm.DeleteOffsetsCommand{Group: group, All: all, Offsets: offsets}
	answer, err := s.apply(cmd.Encode())
	if err != nil {
		return 0, err
	}
	return answer.(int), nil
}

// GroupOffsets lists a group's committed offsets with their topic names;
// offsets of deleted topics are left out.
func (s *Service) GroupOffsets(group string) ([]OffsetCommit, error) {
	var out []OffsetCommit
	err := s.store.View(func(tx *store.Tx) error {
		committed, err := tx.GroupOffsets(group)
		if err != nil || len(committed) == 0 {
			return err
		}
		queues, err := tx.Queues()
		if err != nil {
			return err
		}
		names := make(map[uint64]string, len(queues))
		for _, q := range queues {
			names[q.ID] = q.Name
		}
		for _, c := range committed {
			if name, ok := names[c.QueueID]; ok {
				out = append(out, OffsetCommit{Topic: name, Partition: c.Partition, Offset: c.Offset, LeaderEpoch: c.LeaderEpoch, Metadata: c.Metadata})
			}
		}
		return nil
	})
	return out, err
}

// OffsetGroups lists every group that has committed offsets.
func (s *Service) OffsetGroups() ([]string, error) {
	var out []string
	err := s.store.View(func(tx *store.Tx) error {
		var err error
		out, err = tx.OffsetGroups()
		return err
	})
	return out, err
}

// Cursor is a consumer group's committed position in one queue partition.
type Cursor struct {
	Queue         string
	Partition     string
	Committed     int64 // the next offset the group will read
	HighWatermark int64
}

// Lag is how many messages the group has yet to read.
func (c Cursor) Lag() int64 { return max(c.HighWatermark-c.Committed, 0) }

// GroupCursors lists a group's committed positions with each partition's
// high watermark. Kafka groups and HTTP groups share these cursors: a
// Kafka partition n is the queue partition "n".
func (s *Service) GroupCursors(group string) ([]Cursor, error) {
	offsets, err := s.GroupOffsets(group)
	if err != nil || len(offsets) == 0 {
		return nil, err
	}
	out := make([]Cursor, 0, len(offsets))
	err = s.store.View(func(tx *store.Tx) error {
		for _, o := range offsets {
			_, p, _, err := kafkaPartition(tx, o.Topic, o.Partition)
			if err != nil {
				return err
			}
			out = append(out, Cursor{Queue: o.Topic, Partition: strconv.Itoa(int(o.Partition)), Committed: o.Offset, HighWatermark: int64(p.NextOffset)})
		}
		return nil
	})
	return out, err
}
