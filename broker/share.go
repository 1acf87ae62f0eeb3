package broker

import (
	"fmt"
	"strconv"
	"time"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// Kafka share groups (KIP-932) on the leases of HTTP pops
// (command.ShareAcquireCommand, command.ShareAckCommand).

// MaxSharePartitions bounds the partitions one ShareAcquire pops.
const MaxSharePartitions = 1000

// Where a share group that has not read a topic starts (besides a
// positive duration back from now).
const (
	ShareFromStart time.Duration = 0
	ShareFromEnd   time.Duration = -1
)

// ShareTerms are the share group's configs an acquisition applies.
type ShareTerms struct {
	LeaseMs       int64 // share.record.lock.duration.ms
	MaxDeliveries int32 // share.delivery.count.limit; 0: no limit
	// Start is where a group that has not read the topic starts:
	// ShareFromStart, ShareFromEnd, or (a positive duration) at the first
	// record stamped that long ago or later (share.auto.offset.reset
	// earliest, latest, by_duration).
	Start           time.Duration
	MaxLocks        int  // share.partition.max.record.locks
	ReadUncommitted bool // share.isolation.level=read_uncommitted
}

// ShareAcquire leases up to batch records of a topic's partitions, in the
// order given, to a share group's member (holder), each partition under a
// lease of its own, on the group's terms. From log format 11 members
// hold a partition's records side by side: an acquisition takes the
// records no one holds or finished among the terms' MaxLocks from the
// group's position on. Before, a partition under a live lease is passed
// over, an acquisition takes at most MaxLocks records, and reads
// committed whatever the terms say. It answers what it leased, per
// partition.
func (s *Service) ShareAcquire(group, holder, topic string, partitions []int32, batch int, terms ShareTerms) ([]command.PopResult, error) {
	switch {
	case len(partitions) == 0:
		return nil, nil
	case len(partitions) > MaxSharePartitions:
		return nil, fmt.Errorf("%w: at most %d partitions per acquisition", ErrInvalid, MaxSharePartitions)
	case batch < 1 || batch > command.MaxShareAcquireBatch:
		return nil, fmt.Errorf("%w: batch must be between 1 and %d", ErrInvalid, command.MaxShareAcquireBatch)
	case terms.MaxLocks < 1 || terms.MaxLocks > command.MaxShareLocks:
		return nil, fmt.Errorf("%w: share.partition.max.record.locks must be between 1 and %d", ErrInvalid, command.MaxShareLocks)
	}
	now := s.now()
	cmd := command.ShareAcquireCommand{NowMs: now.UnixMilli(), Group: group, Queue: topic, Batch: batch, LeaseMs: terms.LeaseMs,
		MaxDeliveries: terms.MaxDeliveries, FromNew: terms.Start == ShareFromEnd}
	if terms.Start > 0 {
		cmd.FromMs = now.Add(-terms.Start).UnixMilli()
	}
	leaseID := command.ShareLeaseID
	if s.sharesSideBySide() {
		cmd.MaxLocks, cmd.ReadUncommitted, leaseID = int32(terms.MaxLocks), terms.ReadUncommitted, command.SharedLeaseID
	} else {
		cmd.Batch = min(batch, terms.MaxLocks)
	}
	for _, p := range partitions {
		cmd.Partitions = append(cmd.Partitions, strconv.Itoa(int(p)))
		cmd.LeaseIDs = append(cmd.LeaseIDs, leaseID(holder, s.newLeaseID()))
	}
	res, err := apply(s, &cmd)
	if err != nil {
		return nil, err
	}
	if res.Error != "" {
		return nil, fmt.Errorf("topic %q: %w", topic, ErrNotFound)
	}
	return res.Leases, nil
}

// sharesSideBySide reports whether share group members may hold one
// partition's records side by side (log format 11).
func (s *Service) sharesSideBySide() bool { return s.LogFormat() >= command.LogFormat11 }

// ShareAck acknowledges leased records of a share group in one raft entry.
func (s *Service) ShareAck(group string, acks []command.ShareAck) ([]command.ShareAckResult, error) {
	if len(acks) == 0 {
		return nil, nil
	}
	return apply(s, &command.ShareAckCommand{NowMs: s.now().UnixMilli(), Group: group, Acks: acks})
}

// ShareAcquirable picks, from a topic's partitions, those an acquisition
// by the share group may lease something from, as this node's store
// knows them: with a lease that expired, or with records among the
// maxLocks past the group's position that no lease holds and no one
// finished (before log format 11: not under a live lease, with records
// past the position), or a position still to be worked out. It leaves out only what
// surely has nothing, so a share fetch with nothing to take waits for an
// append instead of writing an empty entry. appended is closed by the
// topic's next append (nil when the topic does not exist); subscribed
// reports whether the group has read the topic before (an acquisition
// then no longer decides where the group starts).
func (s *Service) ShareAcquirable(group, topic string, partitions []int32, maxLocks int) (worth []int32, subscribed bool, appended <-chan struct{}, err error) {
	appended, err = s.queueSignal(topic)
	if err != nil || appended == nil {
		return nil, false, appended, err
	}
	sideBySide := s.sharesSideBySide()
	err = s.store.View(func(tx *store.Tx) error {
		meta, err := tx.Meta()
		if err != nil {
			return err
		}
		worth = worth[:0]
		for _, p := range partitions {
			q, part, outcome, err := kafkaPartition(tx, topic, p)
			if err != nil {
				return err
			}
			if outcome != command.TopicOK || part.ID == 0 {
				continue // unknown, or nothing written yet
			}
			view, err := tx.ConsumerGroupView(group, q.ID)
			if err != nil {
				return err
			}
			if !view.Subscribed {
				worth = append(worth, p) // the first acquisition subscribes the group
				continue
			}
			subscribed = true
			cur, found, err := tx.Position(view, part)
			if err != nil {
				return err
			}
			if !found {
				cur.Offset = int64(part.StartOffset)
			}
			end := min(int64(part.NextOffset), cur.Offset+int64(maxLocks))
			switch {
			case cur.HasExpiredLease(meta.ClockMs):
				worth = append(worth, p)
			case !sideBySide && !cur.HasLiveLease(meta.ClockMs) && cur.Offset < int64(part.NextOffset):
				worth = append(worth, p)
			case sideBySide && end-cur.Offset-cur.TakenBelow(end) > 0: // an offset no one holds or finished
				worth = append(worth, p)
			}
		}
		return nil
	})
	return worth, subscribed, appended, err
}
