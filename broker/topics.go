package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

// TopicInfo is a queue as Kafka sees it.
type TopicInfo struct {
	ID                 uint64 // the queue's numeric id, never reused
	Name               string
	Partitions         int32
	DedupWindowSeconds int64
	// RetentionMs is the retention in force (-1: for ever), the topic's
	// own when RetentionSet, else the node's default for Kafka topics.
	RetentionMs     int64
	RetentionSet    bool
	RetentionBytes  int64 // per partition; 0: no limit
	MaxMessageBytes int32 // 0: the default
	// SegmentBytes and SegmentMs are in force, set by the topic or not.
	SegmentBytes, SegmentMs       int64
	SegmentBytesSet, SegmentMsSet bool
	// Compaction configs in force (store.Queue has their meaning), and
	// which the topic set.
	CleanupPolicy             int64 // store.PolicyDelete, PolicyCompact, PolicyCompactDelete
	MinCompactionLagMs        int64
	DeleteRetentionMs         int64
	MinCleanableDirtyPPM      int64
	CleanupPolicySet          bool
	MinCompactionLagMsSet     bool
	DeleteRetentionMsSet      bool
	MinCleanableDirtyRatioSet bool
	// Configs are the topic configs of log format 8 it sets
	// (store.Queue.Configs; shared, not to be changed).
	Configs map[string]int64
}

// Config is a format 8 config's value, or def when the topic sets none.
func (t TopicInfo) Config(name string, def int64) int64 {
	if v, ok := t.Configs[name]; ok {
		return v
	}
	return def
}

// Compacts reports whether the topic's cleanup.policy compacts.
func (t TopicInfo) Compacts() bool {
	return t.CleanupPolicy == store.PolicyCompact || t.CleanupPolicy == store.PolicyCompactDelete
}

// DefaultMaxMessageBytes is Kafka's default max.message.bytes.
const DefaultMaxMessageBytes = 1048588

// MaxTopicMessageBytes is the largest max.message.bytes a topic may have.
// One produce to a partition is one raft entry; its batches go to the raft
// log and the segment files, never into a badger transaction, so what
// bounds it is memory: raft keeps its newest 64 entries cached, and a
// Kafka connection at most 64 MiB of requests in flight.
const MaxTopicMessageBytes = 16 << 20

// ProduceLimit is the most record bytes one produce to a partition of t
// may carry.
func ProduceLimit(t TopicInfo) int {
	if t.MaxMessageBytes > 0 {
		return int(min(t.MaxMessageBytes, MaxTopicMessageBytes))
	}
	return DefaultMaxMessageBytes
}

// ValidTopicName reports whether name is a legal topic (and queue) name.
func ValidTopicName(name string) bool { return validateQueueName(name) == nil }

func (s *Service) topicInfo(q store.Queue) TopicInfo {
	retention := command.RetentionMs(q, s.KafkaRetentionMs)
	if retention <= 0 {
		retention = -1
	}
	t := TopicInfo{ID: q.ID, Name: q.Name, Partitions: max(q.KafkaPartitions, 1), DedupWindowSeconds: q.DedupWindowSeconds,
		RetentionMs: retention, RetentionSet: q.RetentionMs != 0, RetentionBytes: q.RetentionBytes,
		MaxMessageBytes: q.MaxMessageBytes, Configs: q.Configs}
	segBytes, segMs := store.SegmentLimits(q)
	t.SegmentBytes, t.SegmentMs = int64(segBytes), segMs
	t.SegmentBytesSet, t.SegmentMsSet = q.SegmentBytes != 0, q.SegmentMs != 0
	t.CleanupPolicy, t.CleanupPolicySet = max(q.CleanupPolicy, store.PolicyDelete), q.CleanupPolicy != 0
	t.MinCompactionLagMs, t.MinCompactionLagMsSet = max(q.MinCompactionLagMs, 0), q.MinCompactionLagMs != 0
	t.DeleteRetentionMs, t.DeleteRetentionMsSet = q.DeleteRetention(), q.DeleteRetentionMs != 0
	t.MinCleanableDirtyPPM, t.MinCleanableDirtyRatioSet = q.MinCleanableDirtyRatio(), q.MinCleanableDirtyPPM != 0
	return t
}

// TopicDefaults is what a Kafka topic that sets no config has in force:
// the broker defaults DescribeConfigs reports as synonyms.
func (s *Service) TopicDefaults() TopicInfo { return s.topicInfo(store.Queue{KafkaCreated: true}) }

// Topics describes the named topics (all topics when names is nil); a name
// with no queue is absent from the answer.
func (s *Service) Topics(names []string) ([]TopicInfo, error) {
	var out []TopicInfo
	err := s.store.View(func(tx *store.Tx) error {
		if names == nil {
			qs, err := tx.Queues()
			for _, q := range qs {
				out = append(out, s.topicInfo(q))
			}
			return err
		}
		for _, n := range names {
			q, err := tx.Queue(n)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			out = append(out, s.topicInfo(q))
		}
		return nil
	})
	return out, err
}

// TopicNames lists every topic's name in order (store.Store.QueueNames:
// shared, not to be changed).
func (s *Service) TopicNames() []string { return s.store.QueueNames() }

// TopicByID describes the topic whose KIP-516 topic id is id
// (store.Queue.TopicID); found is false when there is none.
func (s *Service) TopicByID(id [16]byte) (t TopicInfo, found bool, err error) {
	err = s.store.View(func(tx *store.Tx) error {
		q, err := tx.QueueByTopicID(id)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		t, found = s.topicInfo(q), true
		return nil
	})
	return t, found, err
}

// MinSegmentBytes is the smallest segment.bytes a topic may set.
const MinSegmentBytes = store.MinSegmentBytes

// CreateTopic creates a queue from Kafka, with dedup window 0 and the
// topic configs in settings (those left out take their defaults).
func (s *Service) CreateTopic(name string, partitions int32, settings []command.TopicSetting) (command.TopicOutcome, error) {
	if err := validateQueueName(name); err != nil {
		return 0, err
	}
	var cfg store.Queue
	if !command.ApplyTopicSettings(&cfg, settings) {
		return 0, fmt.Errorf("%w: a setting names no topic config", ErrInvalid)
	}
	if cfg.MaxMessageBytes < 0 || cfg.MaxMessageBytes > MaxTopicMessageBytes {
		return 0, fmt.Errorf("%w: max.message.bytes must be between 1 and %d", ErrInvalid, MaxTopicMessageBytes)
	}
	if cfg.SegmentBytes != 0 && cfg.SegmentBytes < MinSegmentBytes {
		return 0, fmt.Errorf("%w: segment.bytes must be at least %d", ErrInvalid, MinSegmentBytes)
	}
	cmd := command.CreateTopicCommand{NowMs: s.now().UnixMilli(), Name: name, Partitions: partitions,
		RetentionMs: cfg.RetentionMs, MaxMessageBytes: cfg.MaxMessageBytes, SegmentBytes: cfg.SegmentBytes, SegmentMs: cfg.SegmentMs,
		RetentionBytes: cfg.RetentionBytes}
	for _, st := range settings {
		switch st.Name {
		case command.ConfigRetentionMs, command.ConfigMaxMessageBytes, command.ConfigSegmentBytes, command.ConfigSegmentMs, command.ConfigRetentionBytes:
			// carried in the command's own fields
		default:
			if st.Value == 0 || (st.Name == command.ConfigCleanupPolicy && st.Value == store.PolicyDelete) {
				continue // the default: a format 1 cluster creates it too
			}
			// Log format 2, or 8 for the newer configs (ErrUpgradeInProgress before).
			cmd.Settings = append(cmd.Settings, st)
		}
	}
	return apply(s, &cmd)
}

// AlterTopic changes a topic's configs live; the caller has checked each
// value (a value of 0 returns a config to its default). The cluster must
// be at log format 2 (ErrUpgradeInProgress before).
func (s *Service) AlterTopic(name string, settings []command.TopicSetting) (command.TopicOutcome, error) {
	return apply(s, &command.AlterTopicCommand{Name: name, Settings: settings})
}

// DeleteRecords moves partitions' log start offsets forward, all in one
// entry: at most command.MaxOffsetsPerEntry partitions, each named once.
// Results follow the request's order. Format 2 (ErrUpgradeInProgress
// before).
func (s *Service) DeleteRecords(topic string, before []command.RecordsBefore) ([]command.DeleteRecordsResult, error) {
	if len(before) > command.MaxOffsetsPerEntry {
		return nil, fmt.Errorf("%w: at most %d partitions in one DeleteRecords", ErrInvalid, command.MaxOffsetsPerEntry)
	}
	seen := map[int32]bool{}
	for _, b := range before {
		if seen[b.Partition] {
			return nil, fmt.Errorf("%w: partition %d is named twice", ErrInvalid, b.Partition)
		}
		seen[b.Partition] = true
	}
	return apply(s, &command.DeleteRecordsCommand{Topic: topic, Partitions: before})
}

// AddPartitions grows a topic to count partitions.
func (s *Service) AddPartitions(name string, count int32) (command.TopicOutcome, error) {
	cmd := command.AddPartitionsCommand{Name: name, Count: count}
	return apply(s, &cmd)
}

// DeleteTopic deletes a queue and its partitions.
func (s *Service) DeleteTopic(ctx context.Context, name string) (command.TopicOutcome, error) {
	cmd := command.DeleteQueueCommand{Name: name}
	return applyFor(ctx, s, &cmd)
}

// command.ProduceResult answers a produce to one partition.

// ProduceAsync hands batches for one partition to raft and returns a
// function that waits for the answer, which exists only once they are
// committed and applied. Calls made one after another are appended in that
// order. autoCreate > 0 creates a missing topic with that many partitions.
func (s *Service) ProduceAsync(topic string, partition, autoCreate int32, batches []recordbatch.Batch) func() (command.ProduceResult, error) {
	if err := s.admitGrowth(); err != nil {
		return func() (command.ProduceResult, error) { return command.ProduceResult{}, err }
	}
	cmd := command.ProduceCommand{NowMs: s.now().UnixMilli(), Topic: topic, Partition: partition, AutoCreatePartitions: autoCreate}
	for _, b := range batches {
		cmd.Batches = append(cmd.Batches, command.ProduceBatch{
			NumRecords: b.NumRecords, MaxTimestamp: b.MaxTimestamp,
			ProducerID: b.ProducerID, ProducerEpoch: b.ProducerEpoch, FirstSequence: b.FirstSequence,
			Raw: b.Raw,
		})
	}
	wait := applyAsync(s, &cmd)
	return func() (command.ProduceResult, error) {
		answer, err := wait()
		if err != nil {
			return command.ProduceResult{}, err
		}
		return answer, nil
	}
}

// PartitionLog is what a Kafka fetch reads from one partition.
type PartitionLog struct {
	Outcome       command.TopicOutcome
	HighWatermark int64
	LogStart      int64
	// LastStable is the first offset of the oldest transaction still in
	// progress, or the high watermark (KIP-98's last stable offset).
	LastStable int64
	// Aborted lists, for a read_committed read, the aborted transactions
	// whose records may be among Batches: clients drop those records.
	Aborted []store.AbortedTxn
	// Batches are record batches in offset order; the first may start
	// before the requested offset (clients skip the records before it).
	Batches [][]byte
	// Appended is closed when the partition next gets an append, for a
	// long-polling fetch that found nothing new.
	Appended <-chan struct{}
}

// ReadPartition reads record batches from offset on, up to about maxBytes
// (the first batch whole, whatever its size). Messages pushed over HTTP are
// turned into keyless records whose value is the JSON payload, consecutive
// ones sharing a batch.
//
// The append signal is taken before the read transaction opens: an append
// committed before the read's snapshot is in it, one committed after fires
// the signal. Taken inside the read (after badger fixed the snapshot), an
// append landing in between was neither seen nor signalled, and a long-poll
// fetch slept until its MaxWait with data there. So the partition id is
// looked up first, the signal taken, and the read done in a new transaction.
//
// With readCommitted the read stops at the last stable offset and lists
// the aborted transactions among what it read (Kafka's read_committed).
func (s *Service) ReadPartition(topic string, partition int32, offset int64, maxBytes int, readCommitted bool) (PartitionLog, error) {
	var q store.Queue
	var p store.Partition
	var outcome command.TopicOutcome
	err := s.store.View(func(tx *store.Tx) (err error) {
		q, p, outcome, err = kafkaPartition(tx, topic, partition)
		return err
	})
	if err != nil || outcome != command.TopicOK {
		return PartitionLog{Outcome: outcome}, err
	}
	// A partition not written yet is signalled through its queue when it
	// is created (and on every append to the queue after that).
	appended := s.node.FSM.AppendSignal(cmp.Or(p.ID, q.ID))
	out, seen, err := s.readPartition(topic, partition, offset, maxBytes, readCommitted)
	out.Appended = appended
	if seen.queue != q.ID || (p.ID != 0 && seen.partition != p.ID) {
		// Deleted and created again in between: the signal guards ids no
		// longer read; the caller reads again at once.
		out.Appended = alreadyAppended
	}
	return out, err
}

// alreadyAppended is a closed append signal.
var alreadyAppended = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// afterReadSnapshot, when set (by tests only), runs inside ReadPartition's
// read transaction, after its snapshot is fixed.
var afterReadSnapshot func()

// partitionIDs are the queue and partition ids a read found (partition 0:
// not written yet).
type partitionIDs struct{ queue, partition uint64 }

// readPartition is ReadPartition's read transaction, without the signal.
func (s *Service) readPartition(topic string, partition int32, offset int64, maxBytes int, readCommitted bool) (PartitionLog, partitionIDs, error) {
	var out PartitionLog
	var ids partitionIDs
	err := s.store.View(func(tx *store.Tx) error {
		if afterReadSnapshot != nil {
			afterReadSnapshot()
		}
		q, p, outcome, err := kafkaPartition(tx, topic, partition)
		if err != nil || outcome != command.TopicOK {
			out.Outcome = outcome
			return err
		}
		ids = partitionIDs{q.ID, p.ID}
		out.HighWatermark, out.LogStart, out.LastStable = int64(p.NextOffset), int64(p.StartOffset), int64(p.NextOffset)
		if p.ID != 0 {
			lso, err := tx.StableOffset(p.ID, p.NextOffset)
			if err != nil {
				return err
			}
			out.LastStable = int64(lso)
		}
		end := out.HighWatermark
		if readCommitted {
			end = out.LastStable
		}
		if p.ID == 0 || offset < 0 || offset >= end || offset < out.LogStart {
			return nil
		}
		entries, err := tx.Entries(p.ID, uint64(offset), maxBytes, maxFetchRecords)
		if err != nil {
			return err
		}
		if readCommitted {
			// An open transaction starts a batch, so the entries below
			// the last stable offset are whole batches, all decided.
			entries = slices.DeleteFunc(entries, func(e store.Entry) bool { return e.Offset >= uint64(end) })
			if len(entries) > 0 {
				last := entries[len(entries)-1]
				if out.Aborted, err = tx.AbortedTxns(p.ID, entries[0].Offset, last.Offset+uint64(last.Count), store.MaxAbortedScan); err != nil {
					return err
				}
			}
		}
		out.Batches = kafkaBatches(entries)
		return nil
	})
	return out, ids, err
}

// kafkaBatches turns stored entries into record batches.
func kafkaBatches(entries []store.Entry) [][]byte {
	var out [][]byte
	var run []recordbatch.Record // consecutive HTTP messages
	flush := func() {
		if len(run) > 0 {
			out = append(out, recordbatch.Build(run[0].Offset, run))
			run = nil
		}
	}
	for _, e := range entries {
		if m := e.Message; m != nil {
			run = append(run, recordbatch.Record{Offset: int64(m.Offset), TimestampMs: m.TimestampMs, Value: m.Payload})
			continue
		}
		flush()
		out = append(out, e.Batch)
	}
	flush()
	return out
}

func kafkaPartition(tx *store.Tx, topic string, partition int32) (store.Queue, store.Partition, command.TopicOutcome, error) {
	q, err := tx.Queue(topic)
	if errors.Is(err, store.ErrNotFound) {
		return q, store.Partition{}, command.TopicUnknown, nil
	}
	if err != nil {
		return q, store.Partition{}, 0, err
	}
	if partition < 0 || partition >= max(q.KafkaPartitions, 1) {
		return q, store.Partition{}, command.TopicUnknownPartition, nil
	}
	p, err := tx.Partition(q.ID, strconv.Itoa(int(partition)))
	if errors.Is(err, store.ErrNotFound) {
		return q, store.Partition{}, command.TopicOK, nil // exists in Kafka's view, nothing written yet
	}
	return q, p, command.TopicOK, err
}

// OffsetForTime finds the first offset whose record timestamp is at least
// timestampMs (Kafka's ListOffsets by time); -1 when there is none.
func (s *Service) OffsetForTime(topic string, partition int32, timestampMs int64) (offset, foundTimestamp int64, outcome command.TopicOutcome, err error) {
	offset, foundTimestamp = -1, -1
	err = s.store.View(func(tx *store.Tx) error {
		_, p, o, err := kafkaPartition(tx, topic, partition)
		outcome = o
		if err != nil || o != command.TopicOK || p.ID == 0 {
			return err
		}
		e, found, err := tx.FirstEntryAtOrAfter(p, timestampMs)
		if err != nil || !found {
			return err
		}
		return firstAtOrAfter(e, timestampMs, &offset, &foundTimestamp)
	})
	return offset, foundTimestamp, outcome, err
}

func firstAtOrAfter(e store.Entry, ts int64, offset, found *int64) error {
	if e.Message != nil {
		*offset, *found = int64(e.Offset), e.Message.TimestampMs
		return nil
	}
	recs, err := recordbatch.Records(e.Batch, maxDecompressedBatch)
	if err != nil {
		return fmt.Errorf("stored batch at offset %d: %w", e.Offset, err)
	}
	for _, r := range recs {
		if r.TimestampMs >= ts {
			*offset, *found = r.Offset, r.TimestampMs
			return nil
		}
	}
	return nil
}

// NewProducerID allocates a Kafka producer id from the replicated counter.
func (s *Service) NewProducerID() (int64, error) {
	cmd := command.NewProducerIDCommand{}
	return apply(s, &cmd)
}
