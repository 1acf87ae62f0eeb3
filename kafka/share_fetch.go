package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/recordbatch"
)

// What ShareFetch and ShareAcknowledge share: acknowledging records by
// offset, and acquiring records with the group's settings.

// ackBatch is one acknowledgement batch of a request: offsets First..Last
// with one type for all, or one type per offset.
type ackBatch struct {
	first, last int64
	types       []int8
}

// partAcks is one partition's acknowledgement batches.
type partAcks struct {
	part    sharePart
	batches []ackBatch
}

// ackOutcome is what acknowledging a partition came to.
type ackOutcome struct {
	code int16
	msg  string
}

// KIP-932 acknowledgement types on the wire.
var ackKinds = []string{command.ShareGap, command.ShareAccept, command.ShareRelease, command.ShareReject, command.ShareRenew}

const ackTypeRenew = 4

// shareSettingsOf reads a share group's configs (the defaults where
// unset) as an acquisition applies them.
func (c *conn) shareSettingsOf(group string) (broker.ShareTerms, error) {
	set, err := c.s.groupConfig(group)
	if err != nil {
		return broker.ShareTerms{}, err
	}
	value := func(name string) string {
		if v, ok := set[name]; ok {
			return v
		}
		def, _ := groupConfigDefOf(name)
		return def.def(c.s)
	}
	number := func(name string) int64 { n, _ := strconv.ParseInt(value(name), 10, 64); return n }
	start := broker.ShareFromEnd
	switch reset := value("share.auto.offset.reset"); {
	case reset == "earliest":
		start = broker.ShareFromStart
	case strings.HasPrefix(reset, "by_duration:"):
		if d, err := parseISODuration(strings.TrimPrefix(reset, "by_duration:")); err == nil && d > 0 {
			start = d // else a zero duration: from now on, as latest
		}
	}
	return broker.ShareTerms{LeaseMs: number("share.record.lock.duration.ms"), MaxDeliveries: int32(number("share.delivery.count.limit")),
		Start: start, MaxLocks: int(number("share.partition.max.record.locks")),
		ReadUncommitted: value("share.isolation.level") == "read_uncommitted"}, nil
}

// checkAckBatches refuses a partition's batches that overlap, go
// backwards or carry types that do not fit (Kafka's INVALID_REQUEST).
func checkAckBatches(batches []ackBatch, renew bool) string {
	maxType := int8(ackTypeRenew - 1)
	if renew {
		maxType = ackTypeRenew
	}
	prev := int64(-1)
	for i, b := range batches {
		switch {
		case b.first > b.last:
			return "an acknowledgement batch ends before it starts"
		case i > 0 && b.first <= prev:
			return "acknowledgement batches overlap or are out of order"
		case len(b.types) == 0:
			return "an acknowledgement batch has no type"
		case len(b.types) > 1 && int64(len(b.types)) != b.last-b.first+1:
			return "an acknowledgement batch has a type count that is neither 1 nor its length"
		}
		for _, t := range b.types {
			if t < 0 || t > maxType {
				return fmt.Sprintf("acknowledgement type %d is not valid here", t)
			}
		}
		prev = b.last
	}
	return ""
}

// shareAcks turns a partition's batches into acks of runs of one type.
func shareAcks(queue, holder string, p partAcks, renewMs int64) []command.ShareAck {
	var out []command.ShareAck
	part := strconv.Itoa(int(p.part.partition))
	for _, b := range p.batches {
		typeAt := func(o int64) int8 {
			if len(b.types) == 1 {
				return b.types[0]
			}
			return b.types[o-b.first]
		}
		for o := b.first; o <= b.last; {
			t, end := typeAt(o), o
			for end < b.last && typeAt(end+1) == t {
				end++
			}
			a := command.ShareAck{Queue: queue, Partition: part, Holder: holder, First: o, Last: end, Kind: ackKinds[t]}
			if t == ackTypeRenew {
				a.RenewMs = renewMs
			}
			out = append(out, a)
			o = end + 1
		}
	}
	return out
}

// acknowledge applies a member's acknowledgements, one raft entry per
// topic, and answers each partition's outcome.
func (c *conn) acknowledge(group, member string, acks []partAcks, renew bool, renewMs int64) map[sharePart]ackOutcome {
	out := make(map[sharePart]ackOutcome, len(acks))
	byTopic := map[string][]command.ShareAck{}
	parts := map[string][]sharePart{} // per topic, the partition of each ack
	var topics []string
	for _, pa := range acks {
		if msg := checkAckBatches(pa.batches, renew); msg != "" {
			out[pa.part] = ackOutcome{kerr.InvalidRequest.Code, msg}
			continue
		}
		info, ok, err := c.topicByID(pa.part.topicID)
		switch {
		case err != nil:
			out[pa.part] = ackOutcome{lookupCode(err), err.Error()}
			continue
		case !ok:
			out[pa.part] = ackOutcome{kerr.UnknownTopicID.Code, ""}
			continue
		case c.topicDenied(auth.Read, info.Name) != 0:
			out[pa.part] = ackOutcome{kerr.TopicAuthorizationFailed.Code, ""}
			continue
		case !c.s.topic(info.Name).IsLeader():
			out[pa.part] = ackOutcome{kerr.NotLeaderForPartition.Code, ""}
			continue
		}
		if _, seen := byTopic[info.Name]; !seen {
			topics = append(topics, info.Name)
		}
		for _, a := range shareAcks(info.Name, member, pa, renewMs) {
			byTopic[info.Name] = append(byTopic[info.Name], a)
			parts[info.Name] = append(parts[info.Name], pa.part)
		}
		out[pa.part] = ackOutcome{}
	}
	for _, name := range topics {
		results, err := c.s.topic(name).ShareAck(group, byTopic[name])
		for i, p := range parts[name] {
			switch {
			case err != nil:
				out[p] = ackOutcome{errCode(err), err.Error()}
			case i < len(results) && results[i].Error != "" && out[p].code == 0:
				out[p] = ackOutcome{kerr.InvalidRecordState.Code, results[i].Error}
			}
		}
	}
	return out
}

// acquired is what one acquisition leased in one partition, with the
// record batches that hold it.
type acquired struct {
	part    sharePart
	records []byte
	ranges  []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
}

// maxShareReadBytes bounds the record bytes one share fetch answers with;
// records acquired past it are released at once.
const maxShareReadBytes = 64 << 20

// shareReadChunk is what one read of a share fetch asks for: about what
// the leased records take, not the rest of the log.
const shareReadChunk = 1 << 20

// acquire leases up to budget records of a topic's partitions to the
// member and reads them. appended is closed by the topic's next append
// (for a fetch that found nothing and waits).
func (c *conn) acquire(group, member, topic string, parts []sharePart, budget int, cfg broker.ShareTerms) (got []acquired, appended <-chan struct{}, err error) {
	b := c.s.topic(topic)
	partitions := make([]int32, len(parts))
	for i, p := range parts {
		partitions[i] = p.partition
	}
	worth, subscribed, appended, err := b.ShareAcquirable(group, topic, partitions, cfg.MaxLocks)
	if err != nil || len(worth) == 0 {
		return nil, appended, err
	}
	terms := cfg
	if terms.Start != broker.ShareFromStart && !subscribed {
		// Positions set before the group first read the topic (by
		// AlterShareGroupOffsets, or a Kafka or HTTP group of the same
		// name) are where it starts, as Kafka starts an initialized
		// share-partition at its start offset whatever the reset says.
		none, err := c.s.noPositionsIn(group, topic)
		if err != nil {
			return nil, appended, err
		}
		if !none {
			terms.Start = broker.ShareFromStart
		}
	}
	leases, err := b.ShareAcquire(group, member, topic, worth, min(budget, command.MaxShareAcquireBatch), terms)
	if err != nil {
		return nil, appended, err
	}
	read := 0
	for _, l := range leases {
		partition, _ := strconv.Atoi(l.Partition)
		a := acquired{part: sharePart{topicID: parts[0].topicID, partition: int32(partition)}}
		covered := l.Offsets[0] - 1 // the last offset the records read so far cover
		last := l.Offsets[len(l.Offsets)-1]
		for _, o := range l.Offsets {
			// Leased offsets may lie apart (others hold what is between):
			// each run is read from its first offset, and only batches
			// holding a leased offset are sent.
			for o > covered && read < maxShareReadBytes {
				log, err := b.ReadPartition(topic, int32(partition), o, min(shareReadChunk, maxShareReadBytes-read), !terms.ReadUncommitted)
				if err != nil || len(log.Batches) == 0 {
					break
				}
				before := covered
				for _, batch := range log.Batches {
					base := int64(binary.BigEndian.Uint64(batch))
					if base > last {
						break
					}
					end := base + int64(recordbatch.LastOffsetDelta(batch))
					if i, _ := slices.BinarySearch(l.Offsets, base); i < len(l.Offsets) && l.Offsets[i] <= end {
						a.records = append(a.records, batch...)
						read += len(batch)
					}
					covered = max(covered, end)
				}
				if covered == before {
					break // nothing further to read
				}
			}
			if o > covered {
				break // the rest is released below
			}
		}
		var uncovered []command.ShareAck
		for i, o := range l.Offsets {
			if o > covered {
				uncovered = append(uncovered, command.ShareAck{Queue: topic, Partition: l.Partition, Holder: member, First: o, Last: o, Kind: command.ShareRelease})
				continue
			}
			n := len(a.ranges)
			if n > 0 && a.ranges[n-1].LastOffset == o-1 && a.ranges[n-1].DeliveryCount == int16(l.Attempts[i]) {
				a.ranges[n-1].LastOffset = o
				continue
			}
			r := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
			r.FirstOffset, r.LastOffset, r.DeliveryCount = o, o, int16(min(l.Attempts[i], 1<<15-1))
			a.ranges = append(a.ranges, r)
		}
		if len(uncovered) > 0 {
			if _, err := b.ShareAck(group, uncovered); err != nil {
				c.s.log.Debug("kafka: releasing share records a fetch could not carry", "group", group, "topic", topic, "err", err)
			}
		}
		if len(a.ranges) > 0 {
			got = append(got, a)
		}
	}
	return got, appended, nil
}

// acquireErrCode maps an acquisition's error to a partition error code.
func acquireErrCode(err error) int16 {
	if errors.Is(err, broker.ErrNotFound) {
		return kerr.UnknownTopicOrPartition.Code
	}
	return errCode(err)
}

// noPositionsIn reports whether a group has no position in any partition
// of topic.
func (s *Server) noPositionsIn(group, topic string) (bool, error) {
	offsets, err := s.groupOffsets(group)
	if err != nil {
		return false, err
	}
	return !slices.ContainsFunc(offsets, func(o command.OffsetCommit) bool { return o.Topic == topic }), nil
}
