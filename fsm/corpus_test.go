package fsm

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

// The golden corpus (testdata/corpus/format-N) holds, per log format, one
// scenario of raft entries that covers every command type the format
// writes, as the bytes a raft log holds, with what applying them answers
// and leaves behind, and a snapshot of that state. Entry files are written
// once by this test (-update-corpus writes the ones missing) and never
// changed: a binary must go on applying every format's entries, and
// restoring its snapshot, exactly as recorded. The expectation files may
// be rewritten with -update-corpus when the store's own records change
// (review the diff).
var updateCorpus = flag.Bool("update-corpus", false, "write the corpus of a log format that has none, and rewrite the expectations")

const corpusDir = "testdata/corpus"

// corpusExpect is what applying a format's entries must give.
type corpusExpect struct {
	Answers []json.RawMessage `json:"answers"` // one per entry, in order
	// State is the SHA-256 of the snapshot stream of the state afterwards.
	State string `json:"state"`
	// Restored is the same of the state snapshot.bin restores to: the
	// state after the entries the corpus had when it was written.
	Restored string `json:"restored"`
	// StateDigest is the state machine's digest after the entries (see
	// fsm.StateDigest). Replicas of two versions compare digests during
	// a rolling upgrade, so the way it is computed must never change.
	StateDigest string `json:"stateDigest"`
}

// corpusEntry is one named command of the scenario.
type corpusEntry struct {
	name string
	cmd  command.Command
}

// corpusScenario is the scenario every format's corpus records: each
// command type once at least, in an order where each does real work.
func corpusScenario() []corpusEntry {
	now := int64(1_767_225_600_000) // 2026-01-01, a leader's stamp
	window := int64(3600)
	batch := func(producer int64, seq int32, values ...string) command.ProduceBatch {
		var recs []recordbatch.Record
		for i, v := range values {
			recs = append(recs, recordbatch.Record{Offset: int64(i), Key: []byte("k"), Value: []byte(v)})
		}
		return command.ProduceBatch{NumRecords: int32(len(values)), MaxTimestamp: now, ProducerID: producer, FirstSequence: seq,
			Raw: recordbatch.Build(now, recs)}
	}
	msg := func(tx string, tag byte, payload string) command.PushItem {
		return command.PushItem{Queue: "orders", Partition: "p1", TransactionID: tx, MessageID: [16]byte{0xa, tag}, Payload: []byte(payload)}
	}
	zero, maxCount := int64(0), int64(100)
	later, noRetries := now+7_500_000+command.TxnIDExpirationMs, int32(0)
	return []corpusEntry{
		{"configure-queue", &command.ConfigureQueueCommand{NowMs: now, Queue: "orders", Options: command.QueueOptions{DedupWindowSeconds: &window}}},
		{"push", &command.PushCommand{NowMs: now + 1, Items: []command.PushItem{msg("tx-1", 1, `{"n":1}`), msg("tx-2", 2, `{"n":2}`)}}},
		{"push-retried", &command.PushCommand{NowMs: now + 2, Items: []command.PushItem{msg("tx-1", 3, `{"n":1}`)}}},
		{"register-node", &command.RegisterNodeCommand{Node: store.Node{ID: "2", HTTPAddr: "10.0.0.2:6632", KafkaAddr: "10.0.0.2:9092", LogFormat: uint32(command.LogFormat2)}}},
		{"register-node-3", &command.RegisterNodeCommand{Node: store.Node{ID: "3", HTTPAddr: "10.0.0.3:6632", KafkaAddr: "10.0.0.3:9092"}}},
		{"forget-node", &command.ForgetNodeCommand{ID: "3"}},
		{"create-topic", &command.CreateTopicCommand{NowMs: now + 3, Name: "events", Partitions: 2, RetentionMs: 3_600_000, MaxMessageBytes: 1 << 20}},
		{"new-producer-id", &command.NewProducerIDCommand{}},
		{"produce", &command.ProduceCommand{NowMs: now + 4, Topic: "events", Partition: 0, Batches: []command.ProduceBatch{batch(1, 0, "a", "b")}}},
		{"produce-resent", &command.ProduceCommand{NowMs: now + 5, Topic: "events", Partition: 0, Batches: []command.ProduceBatch{batch(1, 0, "a", "b")}}},
		{"add-partitions", &command.AddPartitionsCommand{Name: "events", Count: 3}},
		{"commit-offsets", &command.CommitOffsetsCommand{NowMs: now + 6, Group: "readers", Offsets: []command.OffsetCommit{{Topic: "events", Partition: 0, Offset: 2, LeaderEpoch: 1, Metadata: "m"}}}},
		{"delete-offsets", &command.DeleteOffsetsCommand{Group: "readers", Offsets: []command.OffsetCommit{{Topic: "events", Partition: 0}}}},
		{"pop", &command.PopCommand{NowMs: now + 7, Group: "workers", Queue: "orders", Batch: 1, LeaseID: "lease-1"}},
		{"extend-lease", &command.ExtendLeaseCommand{NowMs: now + 8, LeaseID: "lease-1", Seconds: 120}},
		{"ack", &command.AckCommand{NowMs: now + 9, Group: "workers", Acks: []command.Ack{{PartitionID: 2, LeaseID: "lease-1", TransactionID: "tx-1", Status: command.AckCompleted}}}},
		{"seek", &command.SeekCommand{NowMs: now + 10, Group: "replay", Queue: "orders", Offset: 1}},
		{"kv", &command.KVCommand{NowMs: now + 11, Ops: []command.KVOp{
			{Op: command.KVPut, NS: "app", Key: "config", Value: json.RawMessage(`{"on":true}`), Forever: true, Expect: &zero},
			{Op: command.KVIncr, NS: "app", Key: "count", Value: json.RawMessage(`5`), TTLSeconds: 600},
		}}},
		{"transaction", &command.TransactionCommand{NowMs: now + 12, TxnID: "txn-1",
			Ops: []command.TxnOp{
				{Type: "push", Items: []command.PushItem{{Queue: "invoices", Partition: "p", TransactionID: "inv-1", MessageID: [16]byte{0xb, 1}, Payload: []byte(`"x"`)}}},
			},
			KV:     []command.KVOp{{Op: command.KVPutIfAbsent, NS: "app", Key: "once", Value: json.RawMessage(`1`), Forever: true}},
			Timers: []command.TimerOp{{Op: command.TimerSchedule, Queue: "orders", TimerKey: "remind", Partition: "p1", DelayMs: 1000, Txn: "t-remind", Payload: json.RawMessage(`"later"`)}},
		}},
		{"timers", &command.TimersCommand{NowMs: now + 13, Ops: []command.TimerOp{
			{Op: command.TimerSchedule, Queue: "orders", TimerKey: "other", DelayMs: 60_000, Payload: json.RawMessage(`2`)},
			{Op: command.TimerCancel, Queue: "orders", TimerKey: "other"},
		}}},
		{"tick", &command.TickCommand{NowMs: now + 5_000, Limit: 100}},
		{"prune-dedup", &command.PruneDedupCommand{NowMs: now + 7_200_000, Limit: 100}},
		{"retain", &command.RetainCommand{NowMs: now + 7_200_000, QueueID: 1, Pos: 1, CutoffMs: now}},
		{"delete-queue", &command.DeleteQueueCommand{Name: "invoices"}},
		{"cleanup", &command.CleanupCommand{MaxWrites: command.MaxCleanupWrites}},
		{"set-log-format", &command.SetLogFormatCommand{Format: command.LogFormat2}},
		{"alter-topic", &command.AlterTopicCommand{Name: "events", Settings: []command.TopicSetting{{Name: command.ConfigRetentionMs, Value: 60_000}, {Name: command.ConfigSegmentBytes, Value: 0}}}},
		{"delete-records", &command.DeleteRecordsCommand{Topic: "events", Partitions: []command.RecordsBefore{{Partition: 0, Offset: 1}, {Partition: 1, Offset: -1}, {Partition: 0, Offset: 9}}}},
		// Every field of the KV and transaction layouts set, so a field
		// written or read in another place changes the bytes or the answers.
		{"kv-every-field", &command.KVCommand{NowMs: now + 20, Ops: []command.KVOp{
			{Op: command.KVIncr, NS: "app", Key: "count", Value: json.RawMessage(`2`), TTLSeconds: 600, Max: &maxCount, Required: true},
			{Op: command.KVGetMany, NS: "app", Keys: []string{"config", "count", "none"}},
			{Op: command.KVGetPrefix, NS: "app", Prefix: "c", After: "config", Limit: 5},
		}}},
		{"transaction-with-ack", &command.TransactionCommand{NowMs: now + 21, TxnID: "txn-2",
			Ops: []command.TxnOp{
				{Type: "ack", Group: "workers", Ack: &command.Ack{PartitionID: 2, LeaseID: "lease-2", TransactionID: "tx-2", Status: command.AckFailed, Error: "boom"}},
				{Type: "push", Items: []command.PushItem{{Queue: "orders", Partition: "p1", TransactionID: "tx-9", MessageID: [16]byte{0xa, 9}, Payload: []byte(`9`)}}},
			},
			Timers: []command.TimerOp{{Op: command.TimerSchedule, Queue: "orders", TimerKey: "t2", DelayMs: 5, Txn: "t-2", Payload: json.RawMessage(`{}`)}},
		}},
		// A Kafka transaction that commits a record and an offset, then one
		// that aborts.
		{"init-txn-producer", &command.InitTxnProducerCommand{NowMs: now + 30, TransactionalID: "etl", TimeoutMs: 60_000, ProducerID: -1, Epoch: -1}},
		{"add-to-txn", &command.AddToTxnCommand{NowMs: now + 31, TransactionalID: "etl", ProducerID: txnPID, Partitions: []store.TxnPartition{{Topic: "events", Partition: 1}}, Groups: []string{"readers"}}},
		{"produce-transactional", &command.ProduceCommand{NowMs: now + 32, Topic: "events", Partition: 1, Batches: []command.ProduceBatch{txnBatch(txnPID, 0, 0, 2)}}},
		{"txn-offset-commit", &command.TxnOffsetCommitCommand{NowMs: now + 33, TransactionalID: "etl", ProducerID: txnPID, Group: "readers", Offsets: []command.OffsetCommit{{Topic: "events", Partition: 0, Offset: 1, LeaderEpoch: 2, Metadata: "t"}}}},
		{"end-txn-commit", &command.EndTxnCommand{NowMs: now + 34, TransactionalID: "etl", ProducerID: txnPID, Commit: true}},
		{"add-to-txn-2", &command.AddToTxnCommand{NowMs: now + 35, TransactionalID: "etl", ProducerID: txnPID, Partitions: []store.TxnPartition{{Topic: "events", Partition: 1}}}},
		{"produce-transactional-2", &command.ProduceCommand{NowMs: now + 36, Topic: "events", Partition: 1, Batches: []command.ProduceBatch{txnBatch(txnPID, 0, 2, 1)}}},
		{"end-txn-timed-out", &command.EndTxnCommand{NowMs: now + 7_300_000, TransactionalID: "etl", ProducerID: txnPID, TimedOut: true}},
		// A compacted topic: created with settings, two updates of key
		// "k", then a compaction pass that seals the active segment and
		// keeps the newer.
		{"create-topic-compacted", &command.CreateTopicCommand{NowMs: now + 30, Name: "latest", Partitions: 1, SegmentMs: 1000,
			Settings: []command.TopicSetting{{Name: command.ConfigCleanupPolicy, Value: store.PolicyCompact}, {Name: command.ConfigDeleteRetentionMs, Value: -1}}}},
		{"produce-keyed", &command.ProduceCommand{NowMs: now + 31, Topic: "latest", Partition: 0, Batches: []command.ProduceBatch{batch(-1, 0, "old", "new")}}},
		{"compact", &command.CompactCommand{NowMs: now + 7_400_000, QueueID: corpusCompactedQueueID, Seal: true}},
		{"forget-txns", &command.ForgetTxnsCommand{NowMs: now + 7_400_000 + command.TxnIDExpirationMs, IDs: []string{"etl", "none"}}},
		// A message dead-lettered (retry limit 0), replayed twice (the
		// second answers the first copy), then deleted.
		{"dlq-configure", &command.ConfigureQueueCommand{NowMs: later, Queue: "jobs", Options: command.QueueOptions{RetryLimit: &noRetries}}},
		{"dlq-push", &command.PushCommand{NowMs: later + 1, Items: []command.PushItem{{Queue: "jobs", Partition: "p", TransactionID: "job-1", MessageID: [16]byte{0xc, 1}, Payload: []byte(`"work"`)}}}},
		{"dlq-pop", &command.PopCommand{NowMs: later + 2, Group: "workers", Queue: "jobs", Batch: 1, LeaseID: "lease-dlq"}},
		{"dlq-ack-failed", &command.AckCommand{NowMs: later + 3, Group: "workers", Acks: []command.Ack{{PartitionID: corpusJobsPartitionID, LeaseID: "lease-dlq", TransactionID: "job-1", Status: command.AckFailed, Error: "bad input"}}}},
		{"dlq-replay", &command.ReplayDeadLetterCommand{NowMs: later + 4, ID: corpusDeadLetterID, MessageID: [16]byte{0xc, 2}}},
		{"dlq-replay-again", &command.ReplayDeadLetterCommand{NowMs: later + 5, ID: corpusDeadLetterID, MessageID: [16]byte{0xc, 3}}},
		{"dlq-delete", &command.DeleteDeadLettersCommand{IDs: []uint64{corpusDeadLetterID, 999}}},
		// A keyed incr, its retry (answered from the record, applied
		// once), the key reused for another request (refused), then the
		// outcome pruned once its window passed.
		{"keyed-incr", &command.KeyedCommand{NowMs: later + 6, Key: "req-1", BodyHash: [32]byte{1}, WindowMs: 600_000,
			Inner: (&command.KVCommand{NowMs: later + 6, Ops: []command.KVOp{{Op: command.KVIncr, NS: "app", Key: "keyed", Forever: true}}}).Encode()}},
		{"keyed-incr-retried", &command.KeyedCommand{NowMs: later + 7, Key: "req-1", BodyHash: [32]byte{1}, WindowMs: 600_000,
			Inner: (&command.KVCommand{NowMs: later + 7, Ops: []command.KVOp{{Op: command.KVIncr, NS: "app", Key: "keyed", Forever: true}}}).Encode()}},
		{"keyed-reused", &command.KeyedCommand{NowMs: later + 8, Key: "req-1", BodyHash: [32]byte{2}, WindowMs: 600_000,
			Inner: (&command.KVCommand{NowMs: later + 8, Ops: []command.KVOp{{Op: command.KVIncr, NS: "app", Key: "keyed", Forever: true}}}).Encode()}},
		{"prune-requests", &command.PruneRequestsCommand{NowMs: later + 700_000, Limit: 100}},
		// A data group's first entry: its ids from then on are its own.
		{"seed-ids", &command.SeedIDsCommand{Base: 1 << 44}},
		// An operator moves group 2's leadership to node 3, then back.
		{"prefer-leader", &command.PreferLeaderCommand{Group: 2, Node: "3"}},
		{"prefer-leader-cleared", &command.PreferLeaderCommand{Group: 2}},
		// Format 3: a push stores one batch per partition. One to two
		// partitions with an id repeated inside it, a retry, a pop across
		// single messages and a batch, an ack by transactionId inside the
		// batch, then the batch's dedup records pruned.
		{"f3-set-log-format", &command.SetLogFormatCommand{Format: command.LogFormat3}},
		{"f3-push-batched", &command.PushCommand{NowMs: later + 800_000, Items: []command.PushItem{
			msg("b-1", 0x21, `{"b":1}`), msg("b-2", 0x22, `{"b":2}`), msg("b-1", 0x23, `{"b":1}`),
			{Queue: "orders", Partition: "p2", TransactionID: "b-3", MessageID: [16]byte{0xa, 0x24}, Payload: []byte(`{"b":3}`)},
			msg("b-4", 0x25, `{"b":4}`),
		}}},
		{"f3-push-batched-retried", &command.PushCommand{NowMs: later + 800_001, Items: []command.PushItem{msg("b-2", 0x26, `{"b":2}`), msg("b-5", 0x27, `{"b":5}`)}}},
		{"f3-pop", &command.PopCommand{NowMs: later + 800_002, Group: "batchers", Queue: "orders", Batch: 10, LeaseID: "lease-f3"}},
		{"f3-ack", &command.AckCommand{NowMs: later + 800_003, Group: "batchers", Acks: []command.Ack{
			{PartitionID: 2, LeaseID: "lease-f3", TransactionID: "b-2", Status: command.AckCompleted},
			{PartitionID: 2, LeaseID: "lease-f3", TransactionID: "b-4", Status: command.AckCompleted},
		}}},
		{"f3-prune-dedup", &command.PruneDedupCommand{NowMs: later + 800_000 + 8_000_000, Limit: 100}},
		// Left in the snapshot: a batch and its group of dedup records.
		{"f3-push-kept", &command.PushCommand{NowMs: later + 800_000 + 8_000_001, Items: []command.PushItem{msg("k-1", 0x28, `1`), msg("k-2", 0x29, `2`)}}},
		// Format 4: a push's ids go to the dedup log. Ids stored at format
		// 3 still answer as duplicates ("k-1"), ids repeated inside the
		// push and retried after it answer from the log, and a prune a
		// window later drops the log's expired segment.
		{"f4-set-log-format", &command.SetLogFormatCommand{Format: command.LogFormat4}},
		{"f4-push-logged", &command.PushCommand{NowMs: later + 9_000_000, Items: []command.PushItem{
			msg("l-1", 0x31, `{"l":1}`), msg("k-1", 0x32, `{"k":1}`), msg("l-2", 0x33, `{"l":2}`), msg("l-1", 0x34, `{"l":1}`),
			{Queue: "orders", Partition: "p2", TransactionID: "l-3", MessageID: [16]byte{0xa, 0x35}, Payload: []byte(`{"l":3}`)},
		}}},
		{"f4-push-logged-retried", &command.PushCommand{NowMs: later + 9_000_001, Items: []command.PushItem{msg("l-2", 0x36, `{"l":2}`), msg("l-4", 0x37, `{"l":4}`)}}},
		{"f4-prune-dedup", &command.PruneDedupCommand{NowMs: later + 9_000_001 + 8_000_000, Limit: 100}},
		{"f4-push-after-window", &command.PushCommand{NowMs: later + 9_000_001 + 8_000_001, Items: []command.PushItem{msg("l-2", 0x38, `{"l":2}`), msg("l-5", 0x39, `5`)}}},
		// Format 5: Kafka batches stay in the raft log, the segment holds
		// refs to them; a resent batch is still a duplicate, and one entry
		// may carry several batches.
		{"f5-set-log-format", &command.SetLogFormatCommand{Format: command.LogFormat5}},
		{"f5-produce-in-log", &command.ProduceCommand{NowMs: later + 17_000_010, Topic: "events", Partition: 0, Batches: []command.ProduceBatch{batch(1, 2, "c", "d")}}},
		{"f5-produce-in-log-resent", &command.ProduceCommand{NowMs: later + 17_000_011, Topic: "events", Partition: 0, Batches: []command.ProduceBatch{batch(1, 2, "c", "d")}}},
		{"f5-produce-two-batches", &command.ProduceCommand{NowMs: later + 17_000_012, Topic: "events", Partition: 1, Batches: []command.ProduceBatch{batch(-1, 0, "e"), batch(-1, 0, "f", "g")}}},
		// Pushed payloads stay in the raft log too; ids still answer.
		{"f5-push-in-log", &command.PushCommand{NowMs: later + 17_000_013, Items: []command.PushItem{
			msg("m-1", 0x41, `{"m":1}`), msg("m-2", 0x42, `{"m":2}`),
			{Queue: "orders", Partition: "p2", TransactionID: "m-3", MessageID: [16]byte{0xa, 0x43}, Payload: []byte(`{"m":3}`)},
		}}},
		{"f5-push-in-log-retried", &command.PushCommand{NowMs: later + 17_000_014, Items: []command.PushItem{msg("m-2", 0x44, `{"m":2}`), msg("m-4", 0x45, `{"m":4}`)}}},
		// Format 6: classic Kafka groups' membership is recorded; a save
		// of an older generation landing late changes nothing, and
		// deleting a group removes its record.
		{"f6-set-log-format", &command.SetLogFormatCommand{Format: command.LogFormat6}},
		{"f6-save-classic-group", &command.SaveClassicGroupCommand{Group: classicGroup("workers", 3, "w-1", "w-2")}},
		{"f6-save-classic-group-late", &command.SaveClassicGroupCommand{Group: classicGroup("workers", 2, "w-1")}},
		{"f6-save-classic-group-gone", &command.SaveClassicGroupCommand{Group: classicGroup("gone", 1, "x-1")}},
		{"f6-delete-group-gone", &command.DeleteOffsetsCommand{Group: "gone", All: true}},
		// Format 7: group configs are set, changed and removed, replaced
		// whole, and go with their group.
		{"f7-set-log-format", &command.SetLogFormatCommand{Format: command.LogFormat7}},
		{"f7-alter-group-config", &command.AlterGroupConfigCommand{Group: "workers", Changes: []command.GroupConfigChange{
			{Name: "share.auto.offset.reset", Value: "earliest"}, {Name: "share.record.lock.duration.ms", Value: "15000"}}}},
		{"f7-alter-group-config-remove", &command.AlterGroupConfigCommand{Group: "workers", Changes: []command.GroupConfigChange{
			{Name: "share.record.lock.duration.ms", Remove: true}, {Name: "consumer.session.timeout.ms", Value: "30000"}}}},
		{"f7-alter-group-config-replace", &command.AlterGroupConfigCommand{Group: "readers", Replace: true, Changes: []command.GroupConfigChange{
			{Name: "consumer.heartbeat.interval.ms", Value: "3000"}}}},
		{"f7-delete-group-readers", &command.DeleteOffsetsCommand{Group: "readers", All: true}},
		// Share groups: records acquired under a lease per partition.
		{"f7-share-acquire", &command.ShareAcquireCommand{NowMs: later + 18_000_000, Group: "sharers", Queue: "events", Partitions: []string{"0", "1"},
			LeaseIDs: []string{command.ShareLeaseID("m-1", "s-0"), command.ShareLeaseID("m-1", "s-1")}, Batch: 10, LeaseMs: 30_000, MaxDeliveries: 2}},
		// Accepted, rejected, renewed, refused (not acquired), released;
		// records released past the delivery limit are archived.
		{"f7-share-ack", &command.ShareAckCommand{NowMs: later + 18_000_001, Group: "sharers", Acks: []command.ShareAck{
			{Queue: "events", Partition: "0", Holder: "m-1", First: 1, Last: 2, Kind: command.ShareAccept},
			{Queue: "events", Partition: "1", Holder: "m-1", Kind: command.ShareRenew, RenewMs: 60_000},
			{Queue: "events", Partition: "1", Holder: "m-1", First: 0, Last: 5, Kind: command.ShareAccept},
			{Queue: "events", Partition: "1", Holder: "m-2", First: 0, Last: 0, Kind: command.ShareAccept},
			{Queue: "events", Partition: "0", Holder: "m-1", First: 3, Last: 3, Kind: command.ShareReject},
			{Queue: "events", Partition: "1", Holder: "m-1", Kind: command.ShareRelease, Rest: true},
		}}},
		{"f7-share-acquire-again", &command.ShareAcquireCommand{NowMs: later + 18_000_002, Group: "sharers", Queue: "events", Partitions: []string{"1"},
			LeaseIDs: []string{command.ShareLeaseID("m-2", "s-2")}, Batch: 10, LeaseMs: 30_000, MaxDeliveries: 2}},
		{"f7-share-release", &command.ShareAckCommand{NowMs: later + 18_000_003, Group: "sharers", Acks: []command.ShareAck{
			{Queue: "events", Partition: "1", Holder: "m-2", Kind: command.ShareRelease, Rest: true}}}},
		{"f7-share-acquire-by-time", &command.ShareAcquireCommand{NowMs: later + 18_000_005, Group: "sharers-late", Queue: "events", Partitions: []string{"0"},
			LeaseIDs: []string{command.ShareLeaseID("m-3", "s-4")}, Batch: 10, LeaseMs: 30_000, FromMs: now}},
		{"f7-share-acquire-archives", &command.ShareAcquireCommand{NowMs: later + 18_000_004, Group: "sharers", Queue: "events", Partitions: []string{"1"},
			LeaseIDs: []string{command.ShareLeaseID("m-1", "s-3")}, Batch: 10, LeaseMs: 30_000, MaxDeliveries: 2}},
		// Format 8: the rest of Kafka's topic configs, set at creation,
		// changed and returned to their defaults.
		{"f8-set-log-format", &command.SetLogFormatCommand{Format: command.LogFormat8}},
		{"f8-create-topic-configured", &command.CreateTopicCommand{NowMs: later + 19_000_000, Name: "shaped", Partitions: 1, Settings: []command.TopicSetting{
			{Name: command.ConfigCompressionType, Value: 5}, {Name: command.ConfigTimestampType, Value: 1},
			{Name: command.ConfigMinInsyncReplicas, Value: 2}, {Name: command.ConfigPreallocate, Value: -1}}}},
		{"f8-alter-topic-configs", &command.AlterTopicCommand{Name: "shaped", Settings: []command.TopicSetting{
			{Name: command.ConfigCompressionType, Value: 0}, {Name: command.ConfigMaxCompactionLagMs, Value: 60_000},
			{Name: command.ConfigFlushMs, Value: -1}, {Name: command.ConfigCompressionZstdLvl, Value: -7}}}},
		// Format 9: transaction version 2 ends a transaction and moves
		// the producer to its next epoch; the retry is answered again.
		{"f9-set-log-format", &command.SetLogFormatCommand{Format: command.LogFormat9}},
		{"f9-init-txn-producer", &command.InitTxnProducerCommand{NowMs: later + 20_000_000, TransactionalID: "etl-2", TimeoutMs: 60_000, ProducerID: -1, Epoch: -1}},
		{"f9-add-to-txn", &command.AddToTxnCommand{NowMs: later + 20_000_001, TransactionalID: "etl-2", ProducerID: txn2PID, Partitions: []store.TxnPartition{{Topic: "events", Partition: 0}}}},
		{"f9-produce-transactional", &command.ProduceCommand{NowMs: later + 20_000_002, Topic: "events", Partition: 0, Batches: []command.ProduceBatch{txnBatch(txn2PID, 0, 0, 2)}}},
		{"f9-end-txn-bump", &command.EndTxnBumpCommand{NowMs: later + 20_000_003, TransactionalID: "etl-2", ProducerID: txn2PID, Commit: true}},
		{"f9-end-txn-bump-retried", &command.EndTxnBumpCommand{NowMs: later + 20_000_004, TransactionalID: "etl-2", ProducerID: txn2PID, Commit: true}},
		{"f9-end-txn-bump-empty-abort", &command.EndTxnBumpCommand{NowMs: later + 20_000_005, TransactionalID: "etl-2", ProducerID: txn2PID, Epoch: 1}},
		// Format 10: Kafka ACL bindings created (one twice) and deleted
		// (one of them not there).
		{"f10-set-log-format", &command.SetLogFormatCommand{Format: command.LogFormat10}},
		{"f10-create-acls", &command.AlterACLsCommand{Create: []store.ACL{
			{ResourceType: auth.ResourceTopic, ResourceName: "audit-", PatternType: auth.PatternPrefixed, Principal: "User:ann", Host: "*",
				Operation: auth.OperationWrite, Permission: auth.PermissionAllow},
			{ResourceType: auth.ResourceGroup, ResourceName: "*", PatternType: auth.PatternLiteral, Principal: "User:*", Host: "10.0.0.9",
				Operation: auth.OperationRead, Permission: auth.PermissionDeny},
			{ResourceType: auth.ResourceTopic, ResourceName: "audit-", PatternType: auth.PatternPrefixed, Principal: "User:ann", Host: "*",
				Operation: auth.OperationWrite, Permission: auth.PermissionAllow}}}},
		{"f10-delete-acls", &command.AlterACLsCommand{Delete: []store.ACL{
			{ResourceType: auth.ResourceGroup, ResourceName: "*", PatternType: auth.PatternLiteral, Principal: "User:*", Host: "10.0.0.9",
				Operation: auth.OperationRead, Permission: auth.PermissionDeny},
			{ResourceType: auth.ResourceCluster, ResourceName: auth.ClusterResource, PatternType: auth.PatternLiteral, Principal: "User:bob", Host: "*",
				Operation: auth.OperationAlter, Permission: auth.PermissionAllow}}}},
		// Format 11: share group members hold one partition's records side
		// by side; acks name the member's leases; expired leases are
		// settled by the next acquisition; read_uncommitted takes an open
		// transaction's records.
		{"f11-set-log-format", &command.SetLogFormatCommand{Format: command.LogFormat11}},
		{"f11-share-acquire-first", sharedAcquire(later+21_000_000, "m-1", "t-0", "0", 2, false)},
		{"f11-share-acquire-beside", sharedAcquire(later+21_000_001, "m-2", "t-1", "0", 3, false)},
		{"f11-share-ack-beside", &command.ShareAckCommand{NowMs: later + 21_000_002, Group: "sharers-2", Acks: []command.ShareAck{
			{Queue: "events", Partition: "0", Holder: "m-1", First: 1, Last: 1, Kind: command.ShareAccept},
			{Queue: "events", Partition: "0", Holder: "m-1", First: 2, Last: 2, Kind: command.ShareRelease},
			{Queue: "events", Partition: "0", Holder: "m-2", Kind: command.ShareRenew, RenewMs: 60_000},
			{Queue: "events", Partition: "0", Holder: "m-2", First: 2, Last: 3, Kind: command.ShareAccept},
		}}},
		{"f11-share-acquire-released", sharedAcquire(later+21_000_003, "m-3", "t-2", "0", 10, false)},
		{"f11-share-acquire-after-expiry", sharedAcquire(later+21_100_000, "m-1", "t-3", "0", 10, false)},
		{"f11-add-to-txn", &command.AddToTxnCommand{NowMs: later + 21_100_001, TransactionalID: "etl-2", ProducerID: txn2PID, Epoch: 2,
			Partitions: []store.TxnPartition{{Topic: "events", Partition: 1}}}},
		{"f11-produce-open-txn", &command.ProduceCommand{NowMs: later + 21_100_002, Topic: "events", Partition: 1, Batches: []command.ProduceBatch{txnBatch(txn2PID, 2, 0, 2)}}},
		{"f11-share-acquire-committed", sharedAcquire(later+21_100_003, "m-4", "t-4", "1", 100, false)},
		{"f11-share-acquire-uncommitted", sharedAcquire(later+21_100_004, "m-5", "t-5", "1", 100, true)},
		// Format 12: group 0 records where data groups' replicas go.
		{"f12-set-log-format", &command.SetLogFormatCommand{Format: command.LogFormat12}},
		{"f12-set-replicas", &command.SetReplicasCommand{Group: 3, Replicas: []string{"4", "2", "5"}}},
		{"f12-set-replicas-again", &command.SetReplicasCommand{Group: 5, Replicas: []string{"1", "6", "3"}}},
		{"f12-forget-replicas", &command.SetReplicasCommand{Group: 3}},
	}
}

// sharedAcquire is a format 11 acquisition by member of group sharers-2
// in one partition of events.
func sharedAcquire(nowMs int64, member, lease, partition string, batch int, uncommitted bool) *command.ShareAcquireCommand {
	return &command.ShareAcquireCommand{NowMs: nowMs, Group: "sharers-2", Queue: "events", Partitions: []string{partition},
		LeaseIDs: []string{command.SharedLeaseID(member, lease)}, Batch: batch, LeaseMs: 30_000, MaxDeliveries: 3, MaxLocks: 100,
		ReadUncommitted: uncommitted}
}

// classicGroup is generation gen of a classic group of the given members,
// the first leading.
func classicGroup(name string, gen int32, members ...string) store.ClassicGroup {
	g := store.ClassicGroup{Name: name, ProtocolType: "consumer", Protocol: "range", Generation: gen, Leader: members[0]}
	for _, m := range members {
		g.Members = append(g.Members, store.ClassicMember{ID: m, ClientID: "client", ClientHost: "/10.0.0.9",
			SessionTimeoutMs: 45_000, RebalanceTimeoutMs: 60_000,
			Protocols: []store.ClassicProtocol{{Name: "range", Metadata: []byte("subscription of " + m)}}, Assignment: []byte("assignment of " + m)})
	}
	return g
}

// corpusJobsPartitionID and corpusDeadLetterID are the ids the scenario
// gives queue "jobs"'s partition and its dead letter.
const (
	corpusJobsPartitionID = 17
	corpusDeadLetterID    = 18
)

// txnPID and txn2PID are the producer ids the corpus scenario's
// init-txn-producer and f9-init-txn-producer get.
const (
	txnPID  = 12
	txn2PID = 1<<44 + 9
)

// corpusCompactedQueueID is the id the scenario gives topic "latest".
const corpusCompactedQueueID = 13

// corpusFor encodes the scenario as a cluster at format f writes it:
// commands its members could not read are left out.
func corpusFor(t *testing.T, f command.LogFormat) (names []string, entries [][]byte) {
	t.Helper()
	for i, e := range corpusScenario() {
		if (e.name == "set-log-format" || e.name == "produce-keyed" || strings.HasPrefix(e.name, "produce-transactional") || strings.HasPrefix(e.name, "dlq-") || strings.HasPrefix(e.name, "keyed-")) && f < command.LogFormat2 {
			continue // format 1 had no such command, no compacted topics, no transactions, no dead-letter and no keyed commands
		}
		if strings.HasPrefix(e.name, "f3-") && f < command.LogFormat3 {
			continue // pushes stored in batches, from format 3
		}
		if strings.HasPrefix(e.name, "f4-") && f < command.LogFormat4 {
			continue // dedup logs, from format 4
		}
		if strings.HasPrefix(e.name, "f5-") && f < command.LogFormat5 {
			continue // batches kept in the raft log, from format 5
		}
		if strings.HasPrefix(e.name, "f6-") && f < command.LogFormat6 {
			continue // classic groups recorded, from format 6
		}
		b, err := command.EncodeAs(e.cmd, f)
		if err != nil {
			continue
		}
		names = append(names, fmt.Sprintf("%02d-%s.entry", i+1, e.name))
		entries = append(entries, command.Seal(b))
	}
	return names, entries
}

func TestGoldenCorpus(t *testing.T) {
	seen := map[command.CommandType]bool{}
	for f := command.LogFormat1; f <= command.MaxLogFormat; f++ {
		dir := filepath.Join(corpusDir, fmt.Sprintf("format-%d", f))
		names, entries := corpusFor(t, f)
		if *updateCorpus {
			writeMissingEntries(t, dir, names, entries)
		}
		stored, storedNames := readCorpusEntries(t, dir)
		// This binary must still write format f as it was recorded: a
		// changed layout is a new format, never an edit of an old one.
		if !slices.Equal(names, storedNames) {
			t.Errorf("format %d: this binary writes entries %v, the corpus holds %v", f, names, storedNames)
		}
		for i := range min(len(entries), len(stored)) {
			if !bytes.Equal(entries[i], stored[i]) {
				t.Errorf("format %d: %s is not what this binary writes at that format: a changed layout needs a new command type and log format", f, storedNames[i])
			}
		}
		for _, e := range stored {
			seen[command.CommandType(e[0])] = true
		}
		checkCorpusApplies(t, dir, stored)
	}
	for typ := range handlers {
		if !seen[typ] {
			t.Errorf("command type %d is in no format's corpus: add it to corpusScenario", typ)
		}
	}
}

// checkCorpusApplies applies a format's entries to an empty store and
// compares the answers and the state with the recorded ones, then restores
// the recorded snapshot and compares its state too.
func checkCorpusApplies(t *testing.T, dir string, entries [][]byte) {
	t.Helper()
	f := newFSM(t)
	answers := make([]json.RawMessage, len(entries))
	for i, e := range entries {
		a := f.ApplyBatch([]*raft.Log{{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: e}})[0]
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("%s: entry %d: answer %T: %v", dir, i+1, a, err)
		}
		answers[i] = b
	}
	snap := snapshotStream(t, f.store)
	snapPath := filepath.Join(dir, "snapshot.bin")
	if _, err := os.Stat(snapPath); os.IsNotExist(err) && *updateCorpus {
		writeFile(t, snapPath, snap)
	}
	// A snapshot taken at this format restores (to the state it held).
	restored := openStore(t, t.TempDir())
	if err := restored.Restore(bytes.NewReader(readFile(t, snapPath))); err != nil {
		t.Fatalf("%s: restore: %v", snapPath, err)
	}
	got := corpusExpect{Answers: answers, State: digest(snap), Restored: digest(snapshotStream(t, restored)),
		StateDigest: fmt.Sprintf("%016x", f.StateDigest().Applied.Digest)}
	expectPath := filepath.Join(dir, "expect.json")
	if *updateCorpus {
		writeFile(t, expectPath, indentJSON(t, got))
	}
	var want corpusExpect
	if err := json.Unmarshal(readFile(t, expectPath), &want); err != nil {
		t.Fatalf("%s: %v", expectPath, err)
	}
	for i := range max(len(got.Answers), len(want.Answers)) {
		g, w := at(got.Answers, i), at(want.Answers, i)
		if !jsonEqual(g, w) {
			t.Errorf("%s: entry %d answers %s, recorded %s", dir, i+1, g, w)
		}
	}
	if got.State != want.State {
		t.Errorf("%s: the state after the entries differs from the recorded one (snapshot digest %s, recorded %s)", dir, got.State, want.State)
	}
	if got.StateDigest != want.StateDigest {
		t.Errorf("%s: the state digest after the entries is %s, recorded %s: the digest must be computed as before", dir, got.StateDigest, want.StateDigest)
	}
	if got.Restored != want.Restored {
		t.Errorf("%s: restores to state digest %s, recorded %s", snapPath, got.Restored, want.Restored)
	}
}

func snapshotStream(t *testing.T, st *store.Store) []byte {
	t.Helper()
	sn, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Release()
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// writeMissingEntries writes the entries a format's corpus lacks (a new
// format, or a command added to the scenario); it never rewrites one.
func writeMissingEntries(t *testing.T, dir string, names []string, entries [][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, name := range names {
		if _, err := os.Stat(filepath.Join(dir, name)); os.IsNotExist(err) {
			writeFile(t, filepath.Join(dir, name), entries[i])
		}
	}
}

func readCorpusEntries(t *testing.T, dir string) (entries [][]byte, names []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.entry"))
	if err != nil {
		t.Fatal(err)
	}
	// In scenario order: by the number before the first dash (a plain
	// sort puts 100 before 11).
	slices.SortFunc(files, func(a, b string) int {
		n := func(p string) int { v, _ := strconv.Atoi(strings.SplitN(filepath.Base(p), "-", 2)[0]); return v }
		return cmp.Compare(n(a), n(b))
	})
	for _, p := range files {
		entries = append(entries, readFile(t, p))
		names = append(names, filepath.Base(p))
	}
	return entries, names
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func indentJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y bytes.Buffer
	return json.Compact(&x, a) == nil && json.Compact(&y, b) == nil && x.String() == y.String()
}

func at(list []json.RawMessage, i int) json.RawMessage {
	if i < len(list) {
		return list[i]
	}
	return json.RawMessage(`"(missing)"`)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(strings.TrimSpace(err.Error()))
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
