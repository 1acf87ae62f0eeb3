package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"hash/crc32"
	"path/filepath"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

// batch is a valid uncompressed batch of one record per key ("" for a
// null key), as a producer sends it.
func batch(keys ...string) []byte {
	var recs []recordbatch.Record
	for i, k := range keys {
		r := recordbatch.Record{Offset: int64(i), TimestampMs: 1_700_000_000_000, Value: []byte("value")}
		if k != "" {
			r.Key = []byte(k)
		}
		recs = append(recs, r)
	}
	return recordbatch.Build(0, recs)
}

// idempotent marks raw as an idempotent producer's batch and signs it again.
func idempotent(raw []byte, producerID int64, epoch int16, sequence int32) []byte {
	raw = slices.Clone(raw)
	binary.BigEndian.PutUint64(raw[43:], uint64(producerID))
	binary.BigEndian.PutUint16(raw[51:], uint16(epoch))
	binary.BigEndian.PutUint32(raw[53:], uint32(sequence))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

func produceRequest(version, acks int16, topic string, partition int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = version, acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// produceOne sends one partition's records and returns its answer.
func produceOne(t *testing.T, c *conn, acks int16, topic string, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	resp := roundTrip(t, c, produceRequest(9, acks, topic, 0, records))
	if resp == nil {
		t.Fatal("no answer")
	}
	r := resp.(*kmsg.ProduceResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("answer %+v, want one partition", r.Topics)
	}
	return r.Topics[0].Partitions[0]
}

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).Error()
}

// TestProduceValidationOrder: each check answers its Kafka error code, in
// Kafka's order (acks, topic name, leadership, size, batch framing, then
// the broker's answer), and a refused partition never reaches the broker.
func TestProduceValidationOrder(t *testing.T) {
	corrupt := batch("k")
	corrupt[len(corrupt)-1] ^= 0xff // a record byte: the CRC no longer matches
	big := slices.Repeat(batch("k"), 20)
	corruptBig := slices.Clone(big)
	corruptBig[20] ^= 0xff // the first batch's CRC
	for _, tc := range []struct {
		name       string
		setup      func(*fakeBroker)
		acks       int16
		topic      string
		records    []byte
		want       int16
		wantBroker bool // the broker was asked to append
	}{
		{name: "accepted", topic: "orders", records: batch("k"), acks: -1, wantBroker: true},
		{name: "acks 2", topic: "orders", records: batch("k"), acks: 2, want: kerr.InvalidRequiredAcks.Code},
		{name: "acks checked before the name and leadership", topic: "bad name", records: corrupt, acks: 5,
			setup: func(f *fakeBroker) { f.leaderID = "2" }, want: kerr.InvalidRequiredAcks.Code},
		{name: "invalid topic name", topic: "bad name", records: batch("k"), acks: 1, want: kerr.InvalidTopicException.Code},
		{name: "internal topic, even on a follower", topic: consumerOffsetsTopic, records: batch("k"), acks: 1,
			setup: func(f *fakeBroker) { f.leaderID = "2" }, want: kerr.InvalidTopicException.Code},
		{name: "follower", topic: "orders", records: batch("k"), acks: 1,
			setup: func(f *fakeBroker) { f.leaderID = "2" }, want: kerr.NotLeaderForPartition.Code},
		{name: "no leader known", topic: "orders", records: batch("k"), acks: 1,
			setup: func(f *fakeBroker) { f.leaderID = "" }, want: kerr.NotLeaderForPartition.Code},
		{name: "unknown topic, auto-create off", topic: "nope", records: batch("k"), acks: 1,
			want: kerr.UnknownTopicOrPartition.Code, wantBroker: true},
		{name: "corrupt CRC", topic: "orders", records: corrupt, acks: 1, want: kerr.CorruptMessage.Code},
		{name: "truncated batch", topic: "orders", records: batch("k")[:40], acks: 1, want: kerr.CorruptMessage.Code},
		{name: "no batch", topic: "orders", records: nil, acks: 1, want: kerr.CorruptMessage.Code},
		{name: "control batch", topic: "orders", records: recordbatch.BuildControl(0, 9, 0, true, 1), acks: 1, want: kerr.InvalidRecord.Code},
		{name: "larger than max.message.bytes", topic: "small", records: big, acks: 1, want: kerr.MessageTooLarge.Code},
		{name: "size checked before the CRC", topic: "small", records: corruptBig, acks: 1, want: kerr.MessageTooLarge.Code},
		{name: "keyless record on a compacted topic", topic: "compacted", records: batch("a", ""), acks: 1, want: kerr.InvalidRecord.Code},
		{name: "keyed records on a compacted topic", topic: "compacted", records: batch("a", "b"), acks: 1, wantBroker: true},
		{name: "sequence gap (broker's answer)", topic: "orders", records: idempotent(batch("k"), 4, 0, 9), acks: -1,
			setup: func(f *fakeBroker) {
				f.produce = func(string, int32, []recordbatch.Batch) (command.ProduceResult, error) {
					return command.ProduceResult{Outcome: command.SequenceOutOfOrder}, nil
				}
			}, want: kerr.OutOfOrderSequenceNumber.Code, wantBroker: true},
		{name: "stale producer epoch (broker's answer)", topic: "orders", records: idempotent(batch("k"), 4, 0, 0), acks: -1,
			setup: func(f *fakeBroker) {
				f.produce = func(string, int32, []recordbatch.Batch) (command.ProduceResult, error) {
					return command.ProduceResult{Outcome: command.ProducerFenced}, nil
				}
			}, want: kerr.InvalidProducerEpoch.Code, wantBroker: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := newFakeBroker()
			fb.topics["small"] = broker.TopicInfo{ID: 8, Name: "small", Partitions: 1, MaxMessageBytes: 200}
			fb.topics["compacted"] = broker.TopicInfo{ID: 9, Name: "compacted", Partitions: 1, CleanupPolicy: store.PolicyCompact}
			if tc.setup != nil {
				tc.setup(fb)
			}
			cfg := DefaultConfig()
			cfg.AutoCreateTopics = false
			c := newTestConn(t, newTestServer(t, fb, cfg), nil)
			p := produceOne(t, c, tc.acks, tc.topic, tc.records)
			if p.ErrorCode != tc.want {
				t.Fatalf("error %s, want %s", codeName(p.ErrorCode), codeName(tc.want))
			}
			if tc.want != 0 && p.BaseOffset != -1 {
				t.Errorf("refused with base offset %d, want -1", p.BaseOffset)
			}
			if asked := len(fb.produced) > 0; asked != tc.wantBroker {
				t.Fatalf("broker asked to append: %v, want %v", asked, tc.wantBroker)
			}
		})
	}
}

// TestProduceAnswersTheCommit: the answer carries the broker's base
// offset and log start, every batch of the partition goes to the broker
// in one call, and an idempotent batch's producer fields reach it.
func TestProduceAnswersTheCommit(t *testing.T) {
	fb := newFakeBroker()
	var got []recordbatch.Batch
	fb.produce = func(topic string, partition int32, batches []recordbatch.Batch) (command.ProduceResult, error) {
		got = batches
		return command.ProduceResult{BaseOffset: 42, LogStart: 7}, nil
	}
	c := newTestConn(t, newTestServer(t, fb, DefaultConfig()), nil)
	records := append(idempotent(batch("a"), 11, 3, 0), idempotent(batch("b", "c"), 11, 3, 1)...)
	resp := roundTrip(t, c, produceRequest(9, -1, "orders", 2, records)).(*kmsg.ProduceResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.BaseOffset != 42 || p.LogStartOffset != 7 || p.Partition != 2 {
		t.Fatalf("answer %+v, want partition 2 at base offset 42, log start 7", p)
	}
	if len(fb.produced) != 1 || fb.produced[0].partition != 2 || fb.produced[0].batches != 2 {
		t.Fatalf("broker calls %+v, want one of 2 batches to partition 2", fb.produced)
	}
	if got[1].ProducerID != 11 || got[1].ProducerEpoch != 3 || got[1].FirstSequence != 1 || got[1].NumRecords != 2 {
		t.Fatalf("second batch %+v, want producer 11 epoch 3 sequence 1, 2 records", got[1])
	}
}

// TestProduceAcksZeroAppendsWithoutAnswer: acks=0 is appended and answered
// with nothing at all, refused or not.
func TestProduceAcksZeroAppendsWithoutAnswer(t *testing.T) {
	for _, topic := range []string{"orders", "bad name"} {
		fb := newFakeBroker()
		c := newTestConn(t, newTestServer(t, fb, DefaultConfig()), nil)
		if resp := roundTrip(t, c, produceRequest(9, 0, topic, 0, batch("k"))); resp != nil {
			t.Fatalf("%s: acks=0 answered %+v", topic, resp)
		}
		if appended := len(fb.produced) == 1; appended != (topic == "orders") {
			t.Fatalf("%s: broker calls %+v", topic, fb.produced)
		}
	}
}

// TestProduceAutoCreate: an unknown topic is created with the configured
// partition count only when auto-creation is on and the principal may
// manage the topic.
func TestProduceAutoCreate(t *testing.T) {
	readWrite := &auth.Principal{Name: "rw", Role: auth.ReadWrite}
	admin := &auth.Principal{Name: "root", Role: auth.Admin}
	for _, tc := range []struct {
		name      string
		auto      bool
		authOn    bool
		principal *auth.Principal
		want      int32
	}{
		{"auto-create on", true, false, nil, 4},
		{"auto-create off", false, false, nil, 0},
		{"read-write principal may not create", true, true, readWrite, 0},
		{"admin may", true, true, admin, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := newFakeBroker()
			cfg := DefaultConfig()
			cfg.AutoCreateTopics, cfg.DefaultPartitions, cfg.Auth.Enabled = tc.auto, 4, tc.authOn
			c := newTestConn(t, newTestServer(t, fb, cfg), tc.principal)
			produceOne(t, c, 1, "fresh", batch("k"))
			if len(fb.produced) != 1 || fb.produced[0].autoCreate != tc.want {
				t.Fatalf("broker calls %+v, want one with autoCreate %d", fb.produced, tc.want)
			}
		})
	}
}

// TestProduceBrokerErrors: an error from the broker (not an outcome) maps
// to the code clients act on: leadership trouble and an unknown outcome
// send them to the leader to retry.
func TestProduceBrokerErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int16
	}{
		{broker.ErrNotLeader, kerr.NotLeaderForPartition.Code},
		{fmt.Errorf("apply: %w", broker.ErrOutcomeUnknown), kerr.NotLeaderForPartition.Code},
		{broker.ErrStorageFull, kerr.KafkaStorageError.Code},
		{fmt.Errorf("%w: no", broker.ErrInvalid), kerr.InvalidRequest.Code},
		{broker.ErrUpgradeInProgress, kerr.InvalidRequest.Code},
		{fmt.Errorf("%w: bad", recordbatch.ErrCorrupt), kerr.CorruptMessage.Code},
		{recordbatch.ErrInvalidRecord, kerr.InvalidRecord.Code},
		{errors.New("disk on fire"), kerr.UnknownServerError.Code},
	} {
		fb := newFakeBroker()
		fb.produce = func(string, int32, []recordbatch.Batch) (command.ProduceResult, error) {
			return command.ProduceResult{BaseOffset: 3}, tc.err
		}
		c := newTestConn(t, newTestServer(t, fb, DefaultConfig()), nil)
		p := produceOne(t, c, -1, "orders", batch("k"))
		if p.ErrorCode != tc.want || p.BaseOffset != -1 {
			t.Errorf("%v: error %s base offset %d, want %s and -1", tc.err, codeName(p.ErrorCode), p.BaseOffset, codeName(tc.want))
		}
		if p.ErrorMessage == nil || *p.ErrorMessage != tc.err.Error() {
			t.Errorf("%v: error message %v", tc.err, p.ErrorMessage)
		}
	}
}

// outcomeCodes is the Kafka error code of every broker outcome. A new
// outcome in package command fails TestEveryOutcomeHasACode until it is added here
// (and, if it needs its own code, to outcomeCode).
var outcomeCodes = []struct {
	name    string
	outcome command.TopicOutcome
	code    int16
}{
	{"TopicOK", command.TopicOK, 0},
	{"TopicExists", command.TopicExists, kerr.TopicAlreadyExists.Code},
	{"TopicUnknown", command.TopicUnknown, kerr.UnknownTopicOrPartition.Code},
	{"TopicUnknownPartition", command.TopicUnknownPartition, kerr.UnknownTopicOrPartition.Code},
	{"TopicInvalidPartitions", command.TopicInvalidPartitions, kerr.InvalidPartitions.Code},
	{"SequenceOutOfOrder", command.SequenceOutOfOrder, kerr.OutOfOrderSequenceNumber.Code},
	{"ProducerFenced", command.ProducerFenced, kerr.InvalidProducerEpoch.Code},
	{"TopicInvalidConfig", command.TopicInvalidConfig, kerr.InvalidConfig.Code},
	{"OffsetOutOfRange", command.OffsetOutOfRange, kerr.OffsetOutOfRange.Code},
	{"TxnInvalidState", command.TxnInvalidState, kerr.InvalidTxnState.Code},
	{"TxnUnknownProducer", command.TxnUnknownProducer, kerr.InvalidProducerIDMapping.Code},
	{"TxnInvalidTimeout", command.TxnInvalidTimeout, kerr.InvalidTransactionTimeout.Code},
	{"TxnTooLarge", command.TxnTooLarge, kerr.InvalidRequest.Code},
	{"TxnNotAttempted", command.TxnNotAttempted, kerr.OperationNotAttempted.Code},
}

// TestProduceMapsEveryOutcome: whatever outcome the broker answers a
// produce with reaches the client as its code (base offset -1 unless OK);
// an outcome nothing maps is UNKNOWN_SERVER_ERROR.
func TestProduceMapsEveryOutcome(t *testing.T) {
	cases := append(slices.Clone(outcomeCodes), struct {
		name    string
		outcome command.TopicOutcome
		code    int16
	}{"unmapped", command.TopicOutcome(200), kerr.UnknownServerError.Code})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fb := newFakeBroker()
			fb.produce = func(string, int32, []recordbatch.Batch) (command.ProduceResult, error) {
				return command.ProduceResult{Outcome: tc.outcome, BaseOffset: 5}, nil
			}
			c := newTestConn(t, newTestServer(t, fb, DefaultConfig()), nil)
			p := produceOne(t, c, 1, "orders", batch("k"))
			wantOffset := int64(5)
			if tc.code != 0 {
				wantOffset = -1
			}
			if p.ErrorCode != tc.code || p.BaseOffset != wantOffset {
				t.Fatalf("error %s base offset %d, want %s and %d", codeName(p.ErrorCode), p.BaseOffset, codeName(tc.code), wantOffset)
			}
		})
	}
}

// TestEveryOutcomeHasACode holds outcomeCodes to the TopicOutcome
// constants declared in package command, read from its source.
func TestEveryOutcomeHasACode(t *testing.T) {
	files, err := filepath.Glob("../command/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("command sources: %v", err)
	}
	var declared []string
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			typ := "" // a spec without type or value repeats the previous one's
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				if vs.Type != nil {
					typ = fmt.Sprint(vs.Type)
				} else if vs.Values != nil {
					typ = ""
				}
				if typ == "TopicOutcome" {
					for _, n := range vs.Names {
						declared = append(declared, n.Name)
					}
				}
			}
		}
	}
	var mapped []string
	for _, oc := range outcomeCodes {
		mapped = append(mapped, oc.name)
		if got := outcomeCode(oc.outcome); got != oc.code {
			t.Errorf("outcomeCode(%s) = %s, want %s", oc.name, codeName(got), codeName(oc.code))
		}
	}
	slices.Sort(declared)
	slices.Sort(mapped)
	if len(declared) < 10 || !slices.Equal(declared, mapped) {
		t.Fatalf("command declares outcomes %v; the table maps %v", declared, mapped)
	}
}

// TestTxnCodeAnswersProducerFencedFromItsVersion: a fenced producer is
// told PRODUCER_FENCED by API versions from KIP-588 on, older ones
// INVALID_PRODUCER_EPOCH; other outcomes map as everywhere.
func TestTxnCodeAnswersProducerFencedFromItsVersion(t *testing.T) {
	for _, tc := range []struct {
		outcome              command.TopicOutcome
		version, fencedSince int16
		want                 int16
	}{
		{command.ProducerFenced, 3, 3, kerr.ProducerFenced.Code},
		{command.ProducerFenced, 2, 3, kerr.InvalidProducerEpoch.Code},
		{command.TxnInvalidState, 3, 3, kerr.InvalidTxnState.Code},
		{command.TopicOK, 3, 3, 0},
	} {
		if got := txnCode(tc.outcome, tc.version, tc.fencedSince); got != tc.want {
			t.Errorf("txnCode(%d, v%d, since v%d) = %s, want %s", tc.outcome, tc.version, tc.fencedSince, codeName(got), codeName(tc.want))
		}
	}
	for _, tc := range []struct {
		err  error
		want int16
	}{
		{broker.ErrNotLeader, kerr.NotCoordinator.Code},
		{broker.ErrOutcomeUnknown, kerr.NotCoordinator.Code},
		{broker.ErrStorageFull, kerr.KafkaStorageError.Code},
		{nil, 0},
	} {
		if got := txnCallCode(tc.err); got != tc.want {
			t.Errorf("txnCallCode(%v) = %s, want %s", tc.err, codeName(got), codeName(tc.want))
		}
	}
}
