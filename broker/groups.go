package broker

import (
	"errors"
	"slices"
	"strconv"

	"github.com/waggle-mq/waggle/raftfsm"
	"github.com/waggle-mq/waggle/store"
)

// OffsetCommit is a consumer group's position in one partition.
type OffsetCommit = raftfsm.OffsetCommit

// CommitOffsets stores a group's committed offsets through raft, so they
// survive failover; one outcome per offset.
// A request with more than raftfsm.MaxOffsetsPerEntry offsets becomes
// several entries (Kafka commits each partition's offset on its own).
func (s *Service) CommitOffsets(group string, offsets []OffsetCommit) ([]TopicOutcome, error) {
	var out []TopicOutcome
	for chunk := range slices.Chunk(offsets, raftfsm.MaxOffsetsPerEntry) {
		cmd := raftfsm.CommitOffsetsCommand{NowMs: s.now().UnixMilli(), Group: group, Offsets: chunk}
		answer, err := s.apply(cmd.Encode())
		if err != nil {
			return nil, err
		}
		out = append(out, answer.([]TopicOutcome)...)
	}
	return out, nil
}

// DeleteOffsets forgets a group's committed offsets (the whole group, or
// the listed partitions) and reports how many were removed (1 for a whole
// group that had positions).
func (s *Service) DeleteOffsets(group string, all bool, offsets []OffsetCommit) (int, error) {
	if all {
		offsets = nil
	}
	n := 0
	for first := true; first || len(offsets) > 0; first = false {
		chunk := offsets[:min(len(offsets), raftfsm.MaxOffsetsPerEntry)]
		offsets = offsets[len(chunk):]
		cmd := raftfsm.DeleteOffsetsCommand{Group: group, All: all, Offsets: chunk}
		answer, err := s.apply(cmd.Encode())
		if err != nil {
			return n, err
		}
		n += answer.(int)
	}
	return n, nil
}

// GroupOffsets lists a group's committed offsets in Kafka partitions (queue
// partitions named "0", "1", …) with their topic names; offsets of deleted
// topics are left out.
func (s *Service) GroupOffsets(group string) ([]OffsetCommit, error) {
	cursors, err := s.GroupCursors(group)
	var out []OffsetCommit
	for _, c := range cursors {
		if n, err := strconv.ParseInt(c.Partition, 10, 32); err == nil && strconv.Itoa(int(n)) == c.Partition {
			out = append(out, OffsetCommit{Topic: c.Queue, Partition: int32(n), Offset: c.Committed, LeaderEpoch: c.LeaderEpoch, Metadata: c.Metadata})
		}
	}
	return out, err
}

// OffsetGroups lists every group that has committed positions.
func (s *Service) OffsetGroups() ([]string, error) {
	var out []string
	err := s.store.View(func(tx *store.Tx) error {
		var err error
		out, err = tx.CursorGroups()
		return err
	})
	return out, err
}

// Cursor is a consumer group's committed position in one queue partition.
type Cursor struct {
	Queue         string
	Partition     string
	Committed     int64 // the next offset the group will read
	LeaderEpoch   int32
	Metadata      string
	HighWatermark int64
}

// Lag is how many messages the group has yet to read.
func (c Cursor) Lag() int64 { return max(c.HighWatermark-c.Committed, 0) }

// GroupCursors lists a group's positions with each partition's high
// watermark. Kafka groups and HTTP groups share these cursors: a Kafka
// partition n is the queue partition "n".
func (s *Service) GroupCursors(group string) ([]Cursor, error) {
	var out []Cursor
	err := s.store.View(func(tx *store.Tx) error {
		cursors, err := tx.GroupPositions(group)
		if err != nil || len(cursors) == 0 {
			return err
		}
		queues, err := tx.Queues()
		if err != nil {
			return err
		}
		byID := make(map[uint64]store.Queue, len(queues))
		for _, q := range queues {
			byID[q.ID] = q
		}
		for _, c := range cursors {
			q, ok := byID[c.QueueID]
			if !ok {
				continue // the queue was deleted
			}
			cur := Cursor{Queue: q.Name, Partition: c.Partition, Committed: c.Offset, LeaderEpoch: c.LeaderEpoch, Metadata: c.Metadata}
			p, err := tx.Partition(q.ID, c.Partition)
			if err == nil {
				cur.HighWatermark = int64(p.NextOffset)
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
			out = append(out, cur)
		}
		return nil
	})
	return out, err
}
