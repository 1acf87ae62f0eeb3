package broker

import (
	"errors"
	"math"
	"strconv"

	"github.com/waggle-mq/waggle/store"
)

// LeaderEpoch is this node's view of the Kafka leader epoch, the same for
// every partition: waggle has one raft group, whose leader leads every
// partition, so a partition's leader epoch is the raft term (KIP-101,
// KIP-320). Terms only grow, a new leader always has a higher one, and the
// state machine writes the term of the entry that appended a batch into
// the batch's partition leader epoch, as a Kafka leader does.
//
// On the leader it is the leader's term. A follower's term is that of the
// leader it follows; a candidate's is already past the last leader's, and
// a node without a leader has no partition leader to report. Reading it
// is one atomic load (raft.CurrentTerm), cheap enough for every fetch.
func (s *Service) LeaderEpoch() int32 {
	return termEpoch(s.node.Raft.CurrentTerm())
}

// termEpoch converts a raft term to a Kafka epoch (an int32). A term past
// 2^31-1, which no cluster reaches, is held at the largest epoch.
func termEpoch(term uint64) int32 {
	if term > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(term)
}

// PartitionSizes returns the bytes on disk of each Kafka partition of the
// topic, in partition order. A topic's partitions share one stream of
// segment files (store.Tx.StreamBytes), with no byte count kept per
// partition, so the stream's kept bytes are divided among the partitions
// in proportion to the offsets each keeps (its high watermark less its log
// start): exact for a topic of one partition, an estimate for several. It
// reads the stream head, one segment record and each partition's record,
// never the data.
func (s *Service) PartitionSizes(topic TopicInfo) ([]int64, error) {
	sizes := make([]int64, topic.Partitions)
	err := s.store.View(func(tx *store.Tx) error {
		q, err := tx.Queue(topic.Name)
		if errors.Is(err, store.ErrNotFound) || (err == nil && q.ID != topic.ID) {
			return nil // deleted meanwhile: nothing on disk for it
		}
		if err != nil {
			return err
		}
		total, err := tx.StreamBytes(q.ID)
		if err != nil || total == 0 {
			return err
		}
		kept := make([]uint64, len(sizes))
		var sum uint64
		for i := range kept {
			p, err := tx.Partition(q.ID, strconv.Itoa(i))
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if p.NextOffset > p.StartOffset {
				kept[i] = p.NextOffset - p.StartOffset
				sum += kept[i]
			}
		}
		shareBytes(sizes, kept, sum, total)
		return nil
	})
	return sizes, err
}

// shareBytes sets sizes[i] to total's share in proportion kept[i]/sum;
// the shares add up to total (the last partition with any takes the
// remainder). With sum 0 the bytes (a stream of markers or trimmed data
// only) go to partition 0.
func shareBytes(sizes []int64, kept []uint64, sum, total uint64) {
	if len(sizes) == 0 {
		return
	}
	if sum == 0 {
		sizes[0] = int64(min(total, math.MaxInt64))
		return
	}
	var given uint64
	last := -1
	for i, k := range kept {
		if k == 0 {
			continue
		}
		// total*k/sum without overflow: both fit in 64 bits, the product
		// may not.
		share := uint64(float64(total) * (float64(k) / float64(sum)))
		share = min(share, total-given)
		sizes[i] = int64(min(share, math.MaxInt64))
		given += share
		last = i
	}
	sizes[last] += int64(min(total-given, math.MaxInt64))
}

// LeaderWithID returns the raft leader's address and node id as this node
// knows them (empty when none is known).
func (s *Service) LeaderWithID() (addr, id string) {
	a, i := s.node.Raft.LeaderWithID()
	return string(a), string(i)
}
