package integration

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// idempotentBatch is a one-record batch from producer id/epoch with the
// given first sequence, as an idempotent producer writes it.
func idempotentBatch(id int64, epoch int16, seq int32, value string) []byte {
	b := kmsg.RecordBatch{Magic: 2, ProducerID: id, ProducerEpoch: epoch, FirstSequence: seq, NumRecords: 1}
	rec := kmsg.Record{Value: []byte(value)}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1)
	b.Records = rec.AppendTo(nil)
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32c(raw[21:]))
	return raw
}

func produceRaw(t *testing.T, addr string, raw []byte) (int16, int64) {
	t.Helper()
	req := produceRequest("idem", raw)
	body, err := roundTrip(t, addr, requestFrame(req))
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = req.Version
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	return p.ErrorCode, p.BaseOffset
}

// The raw protocol: a resent batch answers its original base offset and is
// stored once; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER (45); an old
// epoch is INVALID_PRODUCER_EPOCH (47).
func TestIdempotentProducerRawProtocol(t *testing.T) {
	n := startSingle(t)
	cl := kafkaClient(t, []string{n.kafkaAddr})
	createTopic(t, cl, "idem", 1, nil)
	init := kmsg.NewPtrInitProducerIDRequest()
	resp, err := init.RequestWith(context.Background(), cl)
	if err != nil || resp.ErrorCode != 0 || resp.ProducerID < 0 {
		t.Fatalf("InitProducerId: %v %+v", err, resp)
	}
	id, epoch := resp.ProducerID, resp.ProducerEpoch

	first := idempotentBatch(id, epoch, 0, "zero")
	if code, base := produceRaw(t, n.kafkaAddr, first); code != 0 || base != 0 {
		t.Fatalf("first batch: code %d base %d", code, base)
	}
	if code, base := produceRaw(t, n.kafkaAddr, idempotentBatch(id, epoch, 1, "one")); code != 0 || base != 1 {
		t.Fatalf("second batch: code %d base %d", code, base)
	}
	if code, base := produceRaw(t, n.kafkaAddr, first); code != 0 || base != 0 {
		t.Fatalf("resent first batch: code %d base %d; want success at its original offset 0", code, base)
	}
	if code, _ := produceRaw(t, n.kafkaAddr, idempotentBatch(id, epoch, 5, "gap")); code != 45 {
		t.Fatalf("sequence gap: code %d, want 45", code)
	}
	// KIP-360: the producer re-inits with its id and epoch and gets epoch+1.
	again := kmsg.NewPtrInitProducerIDRequest()
	again.Version, again.ProducerID, again.ProducerEpoch = 3, id, epoch
	bumped, err := again.RequestWith(context.Background(), cl)
	if err != nil || bumped.ProducerID != id || bumped.ProducerEpoch != epoch+1 {
		t.Fatalf("epoch bump: %v %+v", err, bumped)
	}
	if code, base := produceRaw(t, n.kafkaAddr, idempotentBatch(id, epoch+1, 0, "new-epoch")); code != 0 || base != 2 {
		t.Fatalf("new epoch from sequence 0: code %d base %d", code, base)
	}
	if code, _ := produceRaw(t, n.kafkaAddr, idempotentBatch(id, epoch, 2, "stale")); code != 47 {
		t.Fatalf("old epoch: code %d, want 47", code)
	}
	var values []string
	for _, r := range n.fetchAll("idem", "0").Entries[0].Records {
		var env struct{ Value []byte }
		json.Unmarshal(r.Payload, &env)
		values = append(values, string(env.Value))
	}
	if strings.Join(values, ",") != "zero,one,new-epoch" {
		t.Fatalf("partition holds %v; want each accepted batch once", values)
	}
}

// A franz-go idempotent producer writes 50,000 numbered records while the
// leader is killed twice: afterwards every acknowledged record is present
// exactly once, in order.
func TestIdempotentProducerExactlyOnceAcrossTwoLeaderKills(t *testing.T) {
	c := startCluster(t, 3)
	brokers := c.kafkaAddrs()
	cl := kafkaClient(t, brokers, kgo.DefaultProduceTopic("once"), kgo.RecordRetries(1000), kgo.ProducerLinger(time.Millisecond))
	createTopic(t, cl, "once", 1, nil)

	const total = 50_000
	var (
		mu    sync.Mutex
		acked = make([]bool, total)
		fails int
		wg    sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var killed []int
	for i := range total {
		if i == total/3 || i == 2*total/3 {
			l := c.leader()
			l.kill9()
			killed = append(killed, l.id)
			if len(killed) == 2 { // bring the first back so a majority remains
				for _, n := range c.nodes {
					if n.id == killed[0] {
						n.start()
					}
				}
			}
		}
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
			mu.Lock()
			if err == nil {
				acked[i] = true
			} else {
				fails++
			}
			mu.Unlock()
			wg.Done()
		})
		if i%5000 == 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	wg.Wait()
	l := c.leader()
	c.waitCaughtUp(l)

	consumer := kafkaClient(t, []string{l.kafkaAddr}, kgo.ConsumeTopics("once"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	count := map[string]int{}
	var order []string
	deadline, stop := context.WithTimeout(context.Background(), 60*time.Second)
	defer stop()
	for len(order) < total-fails && deadline.Err() == nil {
		fs := consumer.PollFetches(deadline)
		for _, r := range fs.Records() {
			count[string(r.Value)]++
			order = append(order, string(r.Value))
		}
	}
	for v, n := range count {
		if n != 1 {
			t.Fatalf("record %s stored %d times", v, n)
		}
	}
	for i, ok := range acked {
		if ok && count[fmt.Sprint(i)] != 1 {
			t.Fatalf("acknowledged record %d is missing", i)
		}
	}
	for i := 1; i < len(order); i++ {
		var a, b int
		fmt.Sscan(order[i-1], &a)
		fmt.Sscan(order[i], &b)
		if b <= a {
			t.Fatalf("records out of order: %d after %d", b, a)
		}
	}
	t.Logf("%d records, %d acknowledged, %d failed, %d stored, each once; killed leaders %v", total, total-fails, fails, len(count), killed)
}
