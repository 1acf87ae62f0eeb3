package command

import (
	"errors"
	"reflect"
	"testing"

	"github.com/waggle-mq/waggle/store"
)

func TestPushCommandRoundTrip(t *testing.T) {
	c := PushCommand{NowMs: -5, Items: []PushItem{
		{Queue: "q", Partition: "p", TransactionID: "t", MessageID: [16]byte{1, 2}, Payload: []byte(`[1]`)},
		{Queue: "q2", Partition: "", TransactionID: "", Payload: []byte{}},
	}}
	got, err := decodePush(c.Encode()[1:])
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, c) {
		t.Fatalf("round trip: got %+v, want %+v", *got, c)
	}
}

func TestConfigureCommandRoundTrip(t *testing.T) {
	w, dlq := int64(60), false
	for _, c := range []ConfigureQueueCommand{{NowMs: 1, Queue: "a"}, {NowMs: 2, Queue: "b", Options: QueueOptions{DedupWindowSeconds: &w, DeadLetterQueue: &dlq}}} {
		got, err := decodeConfigureQueue(c.Encode()[1:])
		if err != nil || !reflect.DeepEqual(*got, c) {
			t.Fatalf("round trip of %+v: %+v, %v", c, got, err)
		}
	}
}

// The binary layouts of format 2 give back every field the JSON of format
// 1 carried, so an entry means the same whichever format wrote it.
func TestFormat2LayoutsRoundTripLikeFormat1(t *testing.T) {
	expect, max := int64(0), int64(9)
	kv := []KVOp{
		{Op: KVPut, NS: "ns", Key: "k", Value: []byte(`{"a":1}`), TTLSeconds: 30, Expect: &expect, Required: true},
		{Op: KVIncr, NS: "ns", Key: "n", Value: []byte(`2`), Forever: true, Max: &max},
		{Op: KVGetPrefix, NS: "ns", Prefix: "p/", After: "p/a", Limit: 10},
		{Op: KVGet, NS: "ns", Keys: []string{"a", "b"}},
	}
	timers := []TimerOp{
		{Op: "schedule", Queue: "q", TimerKey: "t", Partition: "p", DelayMs: 500, Txn: "x", Payload: []byte(`"hi"`)},
		{Op: TimerCancel, Queue: "q", TimerKey: "u"},
	}
	txn := TransactionCommand{NowMs: 7, TxnID: "txn", KV: kv, Timers: timers, Ops: []TxnOp{
		{Type: "ack", Group: "g", Ack: &Ack{PartitionID: 3, LeaseID: "l", TransactionID: "m", Status: "completed"}},
		{Type: "push", Items: []PushItem{{Queue: "q", Partition: "p", TransactionID: "t", MessageID: [16]byte{9}, Payload: []byte(`[]`)}}},
	}}
	check := func(name string, c Command, decode func([]byte) (any, error), legacy func([]byte) (any, error)) {
		t.Helper()
		bin, err := decode(c.Encode()[1:])
		if err != nil {
			t.Fatalf("%s: decode format 2: %v", name, err)
		}
		js, err := legacy(c.(olderLayout).encodeAs(LogFormat1)[1:])
		if err != nil {
			t.Fatalf("%s: decode format 1: %v", name, err)
		}
		if !reflect.DeepEqual(bin, js) {
			t.Fatalf("%s: format 2 gives %+v, format 1 %+v", name, bin, js)
		}
	}
	check("kv", &KVCommand{NowMs: 5, Ops: kv}, anyOf(decodeKV), anyOf(decodeJSONCommand[KVCommand]))
	check("timers", &TimersCommand{NowMs: 5, Ops: timers}, anyOf(decodeTimers), anyOf(decodeJSONCommand[TimersCommand]))
	check("tick", &TickCommand{NowMs: 5, Limit: 100}, anyOf(decodeTick), anyOf(decodeJSONCommand[TickCommand]))
	check("transaction", &txn, anyOf(decodeTransaction), anyOf(decodeJSONCommand[TransactionCommand]))
	check("empty transaction", &TransactionCommand{NowMs: 1, TxnID: "e"}, anyOf(decodeTransaction), anyOf(decodeJSONCommand[TransactionCommand]))
}

func anyOf[C any](decode func([]byte) (*C, error)) func([]byte) (any, error) {
	return func(b []byte) (any, error) {
		c, err := decode(b)
		return c, err
	}
}

func TestEncodeAsFollowsTheClustersFormat(t *testing.T) {
	reg := &RegisterNodeCommand{Node: store.Node{ID: "1", HTTPAddr: "h:1", KafkaAddr: "k:1", LogFormat: uint32(MaxLogFormat)}}
	old, err := EncodeAs(reg, LogFormat1)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := decodeRegisterNode(old[1:]); err != nil || c.Node.LogFormat != 0 {
		t.Fatalf("format 1 registration carries a log format (%+v, %v): format 1 decoders refuse it", c, err)
	}
	cur, _ := EncodeAs(reg, MaxLogFormat)
	if c, err := decodeRegisterNode(cur[1:]); err != nil || c.Node != reg.Node {
		t.Fatalf("format 2 registration: %+v, %v", c, err)
	}
	for f, want := range map[LogFormat]CommandType{LogFormat1: CmdKVJSON, LogFormat2: CmdKV} {
		b, _ := EncodeAs(&KVCommand{NowMs: 1}, f)
		if CommandType(b[0]) != want {
			t.Errorf("KV at format %d: type %d, want %d", f, b[0], want)
		}
	}
	if _, err := EncodeAs(laterCommand{}, LogFormat1); !errors.Is(err, ErrLogFormatTooOld) {
		t.Fatalf("a command of a later format proposed at format 1: %v", err)
	}
}

// laterCommand stands for a command type a future format adds.
type laterCommand struct{}

func (laterCommand) Encode() []byte   { return []byte{200} }
func (laterCommand) since() LogFormat { return MaxLogFormat + 1 }

func TestSaveClassicGroupRoundTrip(t *testing.T) {
	c := SaveClassicGroupCommand{Group: store.ClassicGroup{Name: "g", ProtocolType: "consumer", Protocol: "cooperative-sticky",
		Generation: 7, Leader: "m1", Members: []store.ClassicMember{
			{ID: "m1", ClientID: "c", ClientHost: "/127.0.0.1", SessionTimeoutMs: 45_000, RebalanceTimeoutMs: 60_000,
				Protocols:  []store.ClassicProtocol{{Name: "cooperative-sticky", Metadata: []byte{0, 3}}, {Name: "range", Metadata: []byte{}}},
				Assignment: []byte{9, 9}},
			{ID: "i-1", InstanceID: "i", Protocols: []store.ClassicProtocol{{Name: "cooperative-sticky", Metadata: []byte{1}}}, Assignment: []byte{}},
		}}}
	got, err := decodeSaveClassicGroup(c.Encode()[1:])
	if err != nil || !reflect.DeepEqual(*got, c) {
		t.Fatalf("round trip of %+v: %+v, %v", c, got, err)
	}
	if _, err := EncodeAs(&c, LogFormat5); !errors.Is(err, ErrLogFormatTooOld) {
		t.Fatalf("proposed at format 5: %v, want ErrLogFormatTooOld", err)
	}
}

func TestAlterGroupConfigRoundTrip(t *testing.T) {
	c := AlterGroupConfigCommand{Group: "g", Replace: true, Changes: []GroupConfigChange{
		{Name: "share.auto.offset.reset", Value: "earliest"}, {Name: "consumer.session.timeout.ms", Remove: true}}}
	got, err := decodeAlterGroupConfig(c.Encode()[1:])
	if err != nil || !reflect.DeepEqual(*got, c) {
		t.Fatalf("round trip of %+v: %+v, %v", c, got, err)
	}
	if _, err := EncodeAs(&c, LogFormat6); !errors.Is(err, ErrLogFormatTooOld) {
		t.Fatalf("proposed at format 6: %v, want ErrLogFormatTooOld", err)
	}
}

func TestShareCommandsRoundTrip(t *testing.T) {
	acq := ShareAcquireCommand{NowMs: 7, Group: "g", Queue: "q", Partitions: []string{"0", "2"}, LeaseIDs: []string{"l0", "l2"},
		Batch: 500, LeaseMs: 15_000, MaxDeliveries: 5, FromNew: true, FromMs: 12}
	got, err := decodeShareAcquire(acq.Encode()[1:])
	if err != nil || !reflect.DeepEqual(*got, acq) {
		t.Fatalf("round trip of %+v: %+v, %v", acq, got, err)
	}
	acq.Batch = MaxShareAcquireBatch + 1
	if _, err := decodeShareAcquire(acq.Encode()[1:]); err == nil {
		t.Fatal("an oversized batch decoded")
	}
	shared := acq
	shared.Batch, shared.MaxLocks, shared.ReadUncommitted = 200, 2000, true
	if _, err := decodeShareAcquireShared(shared.Encode()[1:]); err == nil {
		t.Fatal("a shared acquisition with indexed lease ids decoded")
	}
	shared.LeaseIDs = []string{SharedLeaseID("m", "l0"), SharedLeaseID("m", "l2")}
	entry := shared.Encode()
	if CommandType(entry[0]) != CmdShareAcquireShared {
		t.Fatalf("an acquisition with MaxLocks is entry type %d", entry[0])
	}
	if got, err := decodeShareAcquireShared(entry[1:]); err != nil || !reflect.DeepEqual(*got, shared) {
		t.Fatalf("round trip of %+v: %+v, %v", shared, got, err)
	}
	if _, err := EncodeAs(&shared, LogFormat10); !errors.Is(err, ErrLogFormatTooOld) {
		t.Fatalf("a shared acquisition proposed at format 10: %v", err)
	}
	shared.MaxLocks = MaxShareLocks + 1
	if _, err := decodeShareAcquireShared(shared.Encode()[1:]); err == nil {
		t.Fatal("an acquisition with too many locks decoded")
	}
	ack := ShareAckCommand{NowMs: 8, Group: "g", Acks: []ShareAck{{Queue: "q", Partition: "0", Holder: "m", First: 10, Last: 12, Kind: ShareAccept},
		{Queue: "q", Partition: "2", Holder: "m", Kind: ShareRelease, Rest: true}, {Queue: "q", Partition: "2", Holder: "m", Kind: ShareRenew, RenewMs: 30_000}}}
	gotAck, err := decodeShareAck(ack.Encode()[1:])
	if err != nil || !reflect.DeepEqual(*gotAck, ack) {
		t.Fatalf("round trip of %+v: %+v, %v", ack, gotAck, err)
	}
	if _, err := EncodeAs(&ack, LogFormat6); !errors.Is(err, ErrLogFormatTooOld) {
		t.Fatalf("proposed at format 6: %v", err)
	}
}

func TestShareLeaseIDNamesItsHolder(t *testing.T) {
	id := ShareLeaseID("m-1", "uuid")
	if !HeldBy(id, "m-1") || HeldBy(id, "m") || HeldBy(id, "m-12") || HeldBy("m-1", "m-1") || HeldBy("share:m-1", "m-1") {
		t.Fatalf("HeldBy is wrong about %q", id)
	}
	if shared := SharedLeaseID("m-1", "uuid"); !HeldBy(shared, "m-1") || HeldBy(shared, "m") || store.IndexedLease(shared) || !store.IndexedLease(id) {
		t.Fatalf("HeldBy or IndexedLease is wrong about %q", shared)
	}
}

// Format 1's CreateTopic carries retention, size and segment limits, so a
// topic created with them needs no later format (a fresh cluster creates
// topics before it raises its format); compaction needs 2, the rest 8.
func TestTopicConfigFormats(t *testing.T) {
	for name, want := range map[string]LogFormat{ConfigRetentionMs: LogFormat1, ConfigSegmentMs: LogFormat1, ConfigMaxMessageBytes: LogFormat1,
		ConfigCleanupPolicy: LogFormat2, ConfigCompressionType: LogFormat8, ConfigMinInsyncReplicas: LogFormat8} {
		if got := ConfigSince(name); got != want {
			t.Errorf("ConfigSince(%s) = %d, want %d", name, got, want)
		}
	}
}
