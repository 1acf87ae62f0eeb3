package broker

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// command.OffsetCommit is a consumer group's position in one partition.

// MaxOffsetMetadata bounds the metadata string of one committed offset in
// bytes: Kafka's default offset.metadata.max.bytes. It is stored in the
// cursor, and a commit writes one cursor per offset.
const MaxOffsetMetadata = 4096

// offsetEntryBytes bounds the bytes the offsets of one commit or delete
// entry may write, as estimated by offsetBytes: the FSM's open transaction
// may already hold 4 MiB, and badger refuses one of about 9.6 MB.
const offsetEntryBytes = 1 << 20

// offsetBytes estimates what one offset of group writes: a cursor key with
// the group and partition names, and a cursor value with the metadata.
func offsetBytes(group string, o command.OffsetCommit) int {
	return 2*len(group) + len(o.Topic) + len(o.Metadata) + 512
}

// offsetChunks splits offsets into entries of at most
// command.MaxOffsetsPerEntry offsets and about offsetEntryBytes bytes.
func offsetChunks(group string, offsets []command.OffsetCommit) [][]command.OffsetCommit {
	var out [][]command.OffsetCommit
	start, bytes := 0, 0
	for i, o := range offsets {
		b := offsetBytes(group, o)
		if i > start && (i-start == command.MaxOffsetsPerEntry || bytes+b > offsetEntryBytes) {
			out = append(out, offsets[start:i])
			start, bytes = i, 0
		}
		bytes += b
	}
	if start < len(offsets) {
		out = append(out, offsets[start:])
	}
	return out
}

// validateOffsets refuses a group name, topic name or metadata that could
// not be stored; nothing is written.
func validateOffsets(group string, offsets []command.OffsetCommit) error {
	if err := validateGroupName(group); err != nil {
		return err
	}
	for i, o := range offsets {
		if err := validateQueueName(o.Topic); err != nil {
			return fmt.Errorf("offsets[%d]: %w", i, err)
		}
		if len(o.Metadata) > MaxOffsetMetadata {
			return fmt.Errorf("offsets[%d]: %w: metadata is %d bytes; at most %d", i, ErrInvalid, len(o.Metadata), MaxOffsetMetadata)
		}
	}
	return nil
}

// CommitOffsets stores a group's committed offsets through raft, so they
// survive failover; one outcome per offset.
// A large request becomes several entries, each of at most
// command.MaxOffsetsPerEntry offsets and about offsetEntryBytes bytes
// (Kafka commits each partition's offset on its own).
func (s *Service) CommitOffsets(group string, offsets []command.OffsetCommit) ([]command.TopicOutcome, error) {
	if err := validateOffsets(group, offsets); err != nil {
		return nil, err
	}
	var out []command.TopicOutcome
	for _, chunk := range offsetChunks(group, offsets) {
		cmd := command.CommitOffsetsCommand{NowMs: s.now().UnixMilli(), Group: group, Offsets: chunk}
		answer, err := apply(s, &cmd)
		if err != nil {
			return nil, err
		}
		out = append(out, answer...)
	}
	return out, nil
}

// DeleteOffsets forgets a group's committed offsets (the whole group, or
// the listed partitions) and reports how many were removed (1 for a whole
// group that had positions).
func (s *Service) DeleteOffsets(group string, all bool, offsets []command.OffsetCommit) (int, error) {
	if all {
		offsets = nil
	}
	if err := validateOffsets(group, offsets); err != nil {
		return 0, err
	}
	chunks := offsetChunks(group, offsets)
	if len(chunks) == 0 {
		chunks = [][]command.OffsetCommit{nil}
	}
	n := 0
	for _, chunk := range chunks {
		cmd := command.DeleteOffsetsCommand{Group: group, All: all, Offsets: chunk}
		answer, err := apply(s, &cmd)
		if err != nil {
			return n, err
		}
		n += answer
	}
	return n, nil
}

// GroupOffsets lists a group's committed offsets in Kafka partitions (queue
// partitions named "0", "1", …) with their topic names; offsets of deleted
// topics are left out.
func (s *Service) GroupOffsets(group string) ([]command.OffsetCommit, error) {
	cursors, err := s.GroupCursors(group)
	var out []command.OffsetCommit
	for _, c := range cursors {
		if n, err := strconv.ParseInt(c.Partition, 10, 32); err == nil && strconv.Itoa(int(n)) == c.Partition {
			out = append(out, command.OffsetCommit{Topic: c.Queue, Partition: int32(n), Offset: c.Committed, LeaderEpoch: c.LeaderEpoch, Metadata: c.Metadata})
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
	Queue     string
	Partition string
	// Positioned is false for a partition of the group's queues where the
	// group has no position yet (GroupPartitions); Committed is then the
	// partition's log start, where it would begin.
	Positioned    bool
	Committed     int64 // the next offset the group will read
	LeaderEpoch   int32
	Metadata      string
	HighWatermark int64
	// Expired counts messages retention dropped before the group read
	// them (HTTP groups; see store.Cursor).
	Expired int64
	// InFlight counts the messages an HTTP consumer holds leased.
	InFlight int
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
			cur := Cursor{Queue: q.Name, Partition: c.Partition, Positioned: true, Committed: c.Offset, LeaderEpoch: c.LeaderEpoch,
				Metadata: c.Metadata, Expired: c.Expired}
			cur.InFlight = c.InFlight()
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

// maxDescribedPartitions bounds the partitions GroupPartitions lists per
// queue beyond those the group has positions in.
const maxDescribedPartitions = 10_000

// GroupPartitions is GroupCursors plus every other partition of the
// queues the group reads, unpositioned, so a group's lag counts what it
// has not touched yet: the lag of such a partition is everything from its
// log start.
func (s *Service) GroupPartitions(group string) ([]Cursor, error) {
	cursors, err := s.GroupCursors(group)
	if err != nil || len(cursors) == 0 {
		return cursors, err
	}
	have := map[[2]string]bool{}
	var queues []string
	for _, c := range cursors {
		if !slices.Contains(queues, c.Queue) {
			queues = append(queues, c.Queue)
		}
		have[[2]string{c.Queue, c.Partition}] = true
	}
	out := cursors
	err = s.store.View(func(tx *store.Tx) error {
		for _, name := range queues {
			q, err := tx.Queue(name)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			parts, err := tx.PartitionsAfter(q.ID, "", maxDescribedPartitions)
			if err != nil {
				return err
			}
			for _, p := range parts {
				if !have[[2]string{name, p.Name}] {
					out = append(out, Cursor{Queue: name, Partition: p.Name, Committed: int64(p.StartOffset), HighWatermark: int64(p.NextOffset)})
				}
			}
		}
		return nil
	})
	slices.SortStableFunc(out, func(a, b Cursor) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Partition, b.Partition))
	})
	return out, err
}

// KafkaGroup is a Kafka consumer group's membership as its coordinator (the
// leader) holds it in memory: classic (JoinGroup) or consumer (KIP-848).
type KafkaGroup struct {
	Type         string // "classic" or "consumer"
	State        string // Kafka's names: Stable, PreparingRebalance, Empty, …
	ProtocolType string
	Protocol     string // the chosen assignor
	Generation   int32  // the generation, or a consumer group's epoch
	Members      []KafkaGroupMember
}

// KafkaGroupMember is one member of a KafkaGroup and what it is assigned
// (nothing known for a classic group whose protocol type is not
// "consumer").
type KafkaGroupMember struct {
	MemberID, InstanceID, ClientID, ClientHost string
	Assignment                                 []TopicPartitions
}

// TopicPartitions names partitions of one topic.
type TopicPartitions struct {
	Topic      string
	Partitions []int32
}

// SaveClassicGroup records a classic Kafka group's generation (no members:
// removes the record), answering once it is committed and applied. A
// cluster below log format 6 answers command.ErrLogFormatTooOld, and a
// record larger than command.MaxClassicGroupBytes ErrInvalid: the group
// is then coordinated without one.
func (s *Service) SaveClassicGroup(g store.ClassicGroup) error {
	cmd := &command.SaveClassicGroupCommand{Group: g}
	if n := len(cmd.Encode()); n > command.MaxClassicGroupBytes {
		return fmt.Errorf("%w: classic group %q takes %d bytes to record, more than %d", ErrInvalid, g.Name, n, command.MaxClassicGroupBytes)
	}
	_, err := apply(s, cmd)
	return err
}

// ClassicGroup answers a classic Kafka group's recorded generation from
// this node's store.
func (s *Service) ClassicGroup(name string) (g store.ClassicGroup, found bool, err error) {
	err = s.store.View(func(tx *store.Tx) error {
		g, found, err = tx.ClassicGroup(name)
		return err
	})
	return g, found, err
}

// AlterGroupConfig changes a group's configs (Kafka's GROUP config
// resource), answering once the change is committed and applied. The
// caller checked names and values. A cluster below log format 7 answers
// command.ErrLogFormatTooOld.
func (s *Service) AlterGroupConfig(group string, replace bool, changes []command.GroupConfigChange) error {
	_, err := apply(s, &command.AlterGroupConfigCommand{Group: group, Replace: replace, Changes: changes})
	return err
}

// GroupConfig answers the configs set on a group (nil: none) from this
// node's store.
func (s *Service) GroupConfig(group string) (cfg map[string]string, err error) {
	err = s.store.View(func(tx *store.Tx) error {
		cfg, err = tx.GroupConfig(group)
		return err
	})
	return cfg, err
}
