package raftfsm

import (
	"reflect"
	"testing"
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

// FuzzDecodePush: any bytes either decode or return an error; never a
// panic, and never an allocation sized by a count the bytes cannot hold.
func FuzzDecodePush(f *testing.F) {
	f.Add(push(1, item("q", "p", "a", 1))[1:])
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodePush(b)
		if err != nil {
			return
		}
		again, err := decodePush(c.Encode()[1:])
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("re-encoding a decoded command changed it: %v", err)
		}
	})
}

// FuzzDecodeCommands: every command decoder returns an error or a value
// for any bytes, never a panic (the FSM panics on an error on purpose, so
// the decoders themselves must not).
func FuzzDecodeCommands(f *testing.F) {
	f.Add((&ProduceCommand{Topic: "t", Batches: []ProduceBatch{{NumRecords: 1, Raw: make([]byte, 61)}}}).Encode()[1:])
	f.Add((&AckCommand{Group: "g", Acks: []Ack{{PartitionID: 1, LeaseID: "l", TransactionID: "t", Status: "completed"}}}).Encode()[1:])
	f.Add((&PopCommand{Group: "g", Queue: "q", Batch: 1}).Encode()[1:])
	f.Add((&SeekCommand{Group: "g", Queue: "q", ToEnd: true}).Encode()[1:])
	f.Add((&TransactionCommand{TxnID: "x", Ops: []TxnOp{{Type: "push"}}}).Encode()[1:])
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeProduce(b)
		decodeAck(b)
		decodePop(b)
		decodeSeek(b)
		decodeConfigureQueue(b)
		decodeCommitOffsets(b)
		decodeExtendLease(b)
		decodeJSONCommand[TransactionCommand](b)
		decodeJSONCommand[KVCommand](b)
	})
}
