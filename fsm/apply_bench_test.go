package fsm

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

// Benchmarks of the apply path: committed entries through FSM.Apply and
// FSM.ApplyBatch into a badger store on disk, with no raft running. They
// measure what one replica spends applying an entry (unseal, decode,
// apply, commit) below the whole-process benchmarks in integration/.
// Entries are encoded and sealed outside the timer, as the leader does
// that; every answer is checked, so a refusal cannot pass for speed.

// benchChunk is how many operations are prepared, outside the timer, at a
// time.
const benchChunk = 64

// benchOp is one measured operation: FSM calls made one after another
// (Apply for a call of one entry, ApplyBatch for more), as raft would.
type benchOp [][]*raft.Log

// benchFSM is a fresh FSM at the newest log format on a store in the
// benchmark's temporary directory, with the leader's side: the raft index,
// the stamped clock and a seeded source of incompressible payloads.
type benchFSM struct {
	b     *testing.B
	f     *FSM
	index uint64
	nowMs int64
	rng   *rand.ChaCha8
}

func newBenchFSM(b *testing.B) *benchFSM {
	b.Helper()
	st, err := store.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	f, err := NewFSM(st)
	if err != nil {
		b.Fatal(err)
	}
	h := &benchFSM{b: b, f: f, nowMs: 1_700_000_000_000, rng: rand.NewChaCha8([32]byte{'w', 'a', 'g'})}
	if got := h.apply(&command.SetLogFormatCommand{Format: command.MaxLogFormat}); got != command.MaxLogFormat {
		b.Fatalf("set log format answered %v", got)
	}
	return h
}

// now stamps the next entry a millisecond after the last.
func (h *benchFSM) now() int64 {
	h.nowMs++
	return h.nowMs
}

// entry seals cmd as the next raft entry.
func (h *benchFSM) entry(cmd command.Command) *raft.Log {
	h.index++
	return &raft.Log{Index: h.index, Term: 1, Type: raft.LogCommand, Data: command.Seal(cmd.Encode())}
}

// apply applies cmd as the next entry, outside any measurement.
func (h *benchFSM) apply(cmd command.Command) any { return h.f.Apply(h.entry(cmd)) }

func (h *benchFSM) payload(n int) []byte {
	p := make([]byte, n)
	h.rng.Read(p)
	return p
}

// pushItem is a message with a fresh transaction id, a message id stamped
// from it and a random payload.
func (h *benchFSM) pushItem(queue, partition, prefix string, n, size int) command.PushItem {
	it := command.PushItem{Queue: queue, Partition: partition, TransactionID: prefix + strconv.Itoa(n), Payload: h.payload(size)}
	binary.BigEndian.PutUint64(it.MessageID[8:], uint64(n))
	copy(it.MessageID[:8], prefix)
	return it
}

// configureQueue creates a queue with the dedup window given.
func (h *benchFSM) configureQueue(name string, dedupWindowSeconds int64) {
	r, ok := h.apply(&command.ConfigureQueueCommand{NowMs: h.now(), Queue: name, Options: command.QueueOptions{DedupWindowSeconds: &dedupWindowSeconds}}).(command.ConfigureQueueResult)
	if !ok || r.Queue.DedupWindowSeconds != dedupWindowSeconds {
		h.b.Fatalf("configure %s: %+v", name, r)
	}
}

// warmUp creates the partition with one message, warm-0, before the
// timer: the measured pushes then find it.
func (h *benchFSM) warmUp(queue, partition string, size int) {
	requirePushed(h.b, h.apply(&command.PushCommand{NowMs: h.now(), Items: []command.PushItem{h.pushItem(queue, partition, "warm-", 0, size)}}), 1, 0)
}

// requirePushed fails unless answer queues every item, at offsets from
// first on.
func requirePushed(b *testing.B, answer any, items int, first uint64) {
	b.Helper()
	r, ok := answer.([]command.PushResult)
	if !ok || len(r) != items {
		b.Fatalf("push answered %T %v, want %d results", answer, answer, items)
	}
	for i, res := range r {
		if res.Status != command.PushQueued || res.Offset != first+uint64(i) {
			b.Fatalf("push item %d: %+v, want queued at %d", i, res, first+uint64(i))
		}
	}
}

// measure runs b.N operations: prepare readies the state for operations
// first..first+n-1 and returns them, and check is given each one's
// answers, both outside the timer. msgs is how many messages an operation
// carries; more than one reports the time per message too.
func (h *benchFSM) measure(msgs int, prepare func(first, n int) []benchOp, check func(op int, answers []any)) {
	b := h.b
	var ops []benchOp
	var answers []any
	first := 0
	checkChunk := func() {
		k := 0
		for i, op := range ops {
			n := 0
			for _, call := range op {
				n += len(call)
			}
			check(first+i, answers[k:k+n])
			k += n
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		b.StopTimer()
		checkChunk()
		first = done
		ops = prepare(done, min(benchChunk, b.N-done))
		entries := 0
		for _, op := range ops {
			for _, call := range op {
				entries += len(call)
			}
		}
		answers = slices.Grow(answers[:0], entries)
		b.StartTimer()
		for _, op := range ops {
			for _, call := range op {
				if len(call) == 1 {
					answers = append(answers, h.f.Apply(call[0]))
				} else {
					answers = append(answers, h.f.ApplyBatch(call)...)
				}
			}
		}
		done += len(ops)
	}
	b.StopTimer()
	checkChunk()
	if msgs > 1 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(msgs), "ns/msg")
	}
}

// BenchmarkApplyPush: one op is a push entry of 1 or 100 messages of 256
// random bytes to one partition, each with a fresh transaction id, applied
// on its own.
// dedup=off is a queue with dedup window 0, which skips the dedup records.
func BenchmarkApplyPush(b *testing.B) {
	const payload = 256
	for _, items := range []int{1, 100} {
		for _, window := range []int64{command.DefaultDedupWindowSeconds, 0} {
			dedupOn := map[bool]string{true: "on", false: "off"}[window > 0]
			b.Run(fmt.Sprintf("items=%d/dedup=%s", items, dedupOn), func(b *testing.B) {
				h := newBenchFSM(b)
				h.configureQueue("q", window)
				h.warmUp("q", "p", payload)
				b.SetBytes(int64(items * payload))
				h.measure(items, func(first, n int) []benchOp {
					ops := make([]benchOp, n)
					for i := range ops {
						c := &command.PushCommand{NowMs: h.now(), Items: make([]command.PushItem, items)}
						for j := range c.Items {
							c.Items[j] = h.pushItem("q", "p", "tx-", (first+i)*items+j, payload)
						}
						ops[i] = benchOp{{h.entry(c)}}
					}
					return ops
				}, func(op int, answers []any) {
					requirePushed(b, answers[0], items, uint64(1+op*items))
				})
			})
		}
	}
}

// BenchmarkApplyBatchPush: one op is 64 push entries of one 256-byte
// message each (dedup on), applied as one ApplyBatch, as raft hands them
// over when they are ready together (it passes at most MaxAppendEntries,
// 64 by default), or as 64 Apply calls of one entry.
func BenchmarkApplyBatchPush(b *testing.B) {
	const entries, payload = 64, 256
	for _, batched := range []bool{true, false} {
		name := map[bool]string{true: "batch", false: "single"}[batched]
		b.Run(fmt.Sprintf("entries=%d/%s", entries, name), func(b *testing.B) {
			h := newBenchFSM(b)
			h.configureQueue("q", command.DefaultDedupWindowSeconds)
			h.warmUp("q", "p", payload)
			b.SetBytes(entries * payload)
			h.measure(entries, func(first, n int) []benchOp {
				ops := make([]benchOp, n)
				for i := range ops {
					logs := make([]*raft.Log, entries)
					for j := range logs {
						logs[j] = h.entry(&command.PushCommand{NowMs: h.now(), Items: []command.PushItem{h.pushItem("q", "p", "tx-", (first+i)*entries+j, payload)}})
					}
					if batched {
						ops[i] = benchOp{logs}
					} else {
						for _, l := range logs {
							ops[i] = append(ops[i], []*raft.Log{l})
						}
					}
				}
				return ops
			}, func(op int, answers []any) {
				for j, a := range answers {
					requirePushed(b, a, 1, uint64(1+op*entries+j))
				}
			})
		})
	}
}

// BenchmarkApplyProduce: one op is a produce entry of one Kafka record
// batch of 1 or 100 records of 100 random bytes from an idempotent
// producer, in sequence, so every batch is appended. The producer fields
// travel in command.ProduceBatch, where the leader lifts them out of the batch's
// header (as in the tests' idemBatch).
func BenchmarkApplyProduce(b *testing.B) {
	const value = 100
	for _, records := range []int{1, 100} {
		b.Run(fmt.Sprintf("records=%d", records), func(b *testing.B) {
			h := newBenchFSM(b)
			if got := h.apply(&command.CreateTopicCommand{NowMs: h.now(), Name: "t", Partitions: 1}); got != command.TopicOK {
				b.Fatalf("create topic answered %v", got)
			}
			producer, ok := h.apply(&command.NewProducerIDCommand{}).(int64)
			if !ok {
				b.Fatal("no producer id")
			}
			b.SetBytes(int64(records * value))
			h.measure(records, func(first, n int) []benchOp {
				ops := make([]benchOp, n)
				for i := range ops {
					now := h.now()
					recs := make([]recordbatch.Record, records)
					for j := range recs {
						recs[j] = recordbatch.Record{Offset: int64(j), TimestampMs: now, Value: h.payload(value)}
					}
					batch := command.ProduceBatch{NumRecords: int32(records), MaxTimestamp: now, ProducerID: producer,
						FirstSequence: int32((first + i) * records), Raw: recordbatch.Build(0, recs)}
					ops[i] = benchOp{{h.entry(&command.ProduceCommand{NowMs: now, Topic: "t", Batches: []command.ProduceBatch{batch}})}}
				}
				return ops
			}, func(op int, answers []any) {
				r, ok := answers[0].(command.ProduceResult)
				if want := int64(op * records); !ok || r.Outcome != command.TopicOK || r.BaseOffset != want {
					b.Fatalf("produce %d answered %+v, want appended at %d", op, answers[0], want)
				}
			})
		})
	}
}

// BenchmarkApplyPopAck: one op is a pop entry leasing one message to a
// consumer group and the entry acking it, each applied on its own (the
// consumer's round trip lies between them). The messages are pushed
// outside the timer, a chunk at a time.
func BenchmarkApplyPopAck(b *testing.B) {
	const payload = 256
	h := newBenchFSM(b)
	h.configureQueue("q", command.DefaultDedupWindowSeconds)
	// The warm-up message, popped and acked before the timer, names the
	// partition the acks go to.
	h.warmUp("q", "p", payload)
	pop, ok := h.apply(&command.PopCommand{NowMs: h.now(), Group: "g", Queue: "q", Batch: 1, LeaseID: "warm"}).(command.PopResult)
	if !ok || !slices.Equal(pop.Offsets, []int64{0}) {
		b.Fatalf("warm-up pop answered %+v", pop)
	}
	partitionID := pop.PartitionID
	if a, ok := h.apply(&command.AckCommand{NowMs: h.now(), Group: "g", Acks: []command.Ack{{PartitionID: partitionID, LeaseID: "warm", TransactionID: "warm-0", Status: command.AckCompleted}}}).([]command.AckResult); !ok || len(a) != 1 || !a[0].Success {
		b.Fatalf("warm-up ack answered %+v", a)
	}
	// No SetBytes: a pop and an ack move no payload.
	// command.Op i pops and acks the message at offset i+1, m-<i>.
	h.measure(1, func(first, n int) []benchOp {
		c := &command.PushCommand{NowMs: h.now(), Items: make([]command.PushItem, n)}
		for i := range c.Items {
			c.Items[i] = h.pushItem("q", "p", "m-", first+i, payload)
		}
		requirePushed(b, h.apply(c), n, uint64(first+1))
		ops := make([]benchOp, n)
		for i := range ops {
			lease := "L" + strconv.Itoa(first+i)
			pop := h.entry(&command.PopCommand{NowMs: h.now(), Group: "g", Queue: "q", Batch: 1, LeaseID: lease})
			ack := h.entry(&command.AckCommand{NowMs: h.now(), Group: "g", Acks: []command.Ack{{PartitionID: partitionID, LeaseID: lease,
				TransactionID: c.Items[i].TransactionID, Status: command.AckCompleted}}})
			ops[i] = benchOp{{pop}, {ack}}
		}
		return ops
	}, func(op int, answers []any) {
		pop, ok := answers[0].(command.PopResult)
		if !ok || pop.PartitionID != partitionID || !slices.Equal(pop.Offsets, []int64{int64(op + 1)}) {
			b.Fatalf("pop %d answered %+v, want offset %d", op, answers[0], op+1)
		}
		ack, ok := answers[1].([]command.AckResult)
		if !ok || len(ack) != 1 || !ack[0].Success || !ack[0].LeaseReleased {
			b.Fatalf("ack %d answered %+v", op, answers[1])
		}
	})
}

// BenchmarkApplyTransaction: one op is a transaction entry that acks one
// leased message, pushes one 256-byte message with a fresh transaction id
// and writes one command.KV row. Outside the timer each chunk's inputs are pushed
// to partitions of their own and leased, one a partition.
func BenchmarkApplyTransaction(b *testing.B) {
	const payload = 256
	h := newBenchFSM(b)
	h.configureQueue("in", command.DefaultDedupWindowSeconds)
	h.configureQueue("out", command.DefaultDedupWindowSeconds)
	h.warmUp("out", "0", payload)
	b.SetBytes(payload)
	h.measure(1, func(first, n int) []benchOp {
		in := &command.PushCommand{NowMs: h.now(), Items: make([]command.PushItem, n)}
		for i := range in.Items {
			in.Items[i] = h.pushItem("in", "p"+strconv.Itoa(i), "in-", first+i, payload)
		}
		if r, ok := h.apply(in).([]command.PushResult); !ok || len(r) != n || slices.ContainsFunc(r, func(r command.PushResult) bool { return r.Status != command.PushQueued }) {
			b.Fatalf("pushing the inputs answered %+v", r)
		}
		// Every pop is applied before the transactions' entries are
		// numbered: entries apply in index order.
		pops := make([]command.PopResult, n)
		for i := range pops {
			pop, ok := h.apply(&command.PopCommand{NowMs: h.now(), Group: "g", Queue: "in", Partition: "p" + strconv.Itoa(i), Batch: 1, LeaseID: "L" + strconv.Itoa(first+i)}).(command.PopResult)
			if !ok || len(pop.Offsets) != 1 {
				b.Fatalf("pop of input %d answered %+v", first+i, pop)
			}
			pops[i] = pop
		}
		ops := make([]benchOp, n)
		for i, pop := range pops {
			c := &command.TransactionCommand{NowMs: h.now(), TxnID: "T" + strconv.Itoa(first+i),
				Ops: []command.TxnOp{
					{Type: "ack", Group: "g", Ack: &command.Ack{PartitionID: pop.PartitionID, LeaseID: pop.LeaseID, TransactionID: "in-" + strconv.Itoa(first+i), Status: command.AckCompleted}},
					{Type: "push", Items: []command.PushItem{h.pushItem("out", "0", "out-", first+i, payload)}},
				},
				KV: []command.KVOp{{Op: command.KVPut, NS: "bench", Key: "k-" + strconv.Itoa(first+i), Value: json.RawMessage(strconv.Itoa(first + i)), Forever: true}},
			}
			ops[i] = benchOp{{h.entry(c)}}
		}
		return ops
	}, func(op int, answers []any) {
		r, ok := answers[0].(command.TransactionResult)
		if !ok || !r.Success || len(r.Ops) != 2 || r.Ops[0].Ack == nil || !r.Ops[0].Ack.Success || !r.Ops[0].Ack.LeaseReleased ||
			len(r.KV) != 1 || !r.KV[0].Applied || r.KV[0].Version != 1 {
			b.Fatalf("transaction %d answered %+v", op, answers[0])
		}
		requirePushed(b, r.Ops[1].Push, 1, uint64(1+op))
	})
}
