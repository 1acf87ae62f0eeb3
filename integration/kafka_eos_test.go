package integration

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A consume-transform-produce pipeline with franz-go's GroupTransactSession
// (read_committed input, output and input offsets in one transaction) is
// exactly-once through a kill -9 of the raft leader, which is every
// transaction's coordinator: every input record's output is present once,
// and nothing from an aborted attempt is visible to a read_committed
// consumer.
func TestGroupTransactSessionExactlyOnceThroughLeaderKill(t *testing.T) {
	const inputs = 3000
	c := startCluster(t, 3)
	waitLogFormat(t, c.leader(), 2) // transactions are format 2 entries
	brokers := c.kafkaAddrs()
	admin := kafkaClient(t, brokers)
	createTopic(t, admin, "eos-in", 3, nil)
	createTopic(t, admin, "eos-out", 3, nil)
	var recs []*kgo.Record
	for i := range inputs {
		recs = append(recs, &kgo.Record{Topic: "eos-in", Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))})
	}
	produceSync(t, admin, recs...)

	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(brokers...),
		kgo.TransactionalID("eos-pipeline"),
		kgo.TransactionTimeout(20*time.Second),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumerGroup("eos"),
		kgo.ConsumeTopics("eos-in"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RequireStableFetchOffsets(),
		kgo.RetryTimeout(60*time.Second),
		kgo.SessionTimeout(10*time.Second),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgoLogger(t, "eos-pipeline"),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	var mu sync.Mutex
	committedInputs := 0 // input records whose transaction committed
	done := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			fetches := sess.PollRecords(ctx, 200)
			if ctx.Err() != nil {
				break
			}
			if err := sess.Begin(); err != nil {
				done <- fmt.Errorf("begin: %w", err)
				cancel() // the pipeline is dead: stop the reader too
				return
			}
			n := 0
			fetches.EachRecord(func(r *kgo.Record) {
				n++
				sess.Produce(ctx, &kgo.Record{Topic: "eos-out", Key: r.Key, Value: append([]byte("out-"), r.Value...)}, nil)
			})
			committed, err := sess.End(ctx, kgo.TryCommit)
			// An End whose outcome the client could not confirm (the
			// coordinator died under it) leaves the session in the
			// transaction; franz-go's documented recovery is End with
			// TryAbort, which reloads the producer id (fencing and
			// aborting whatever may still be open) and rewinds to the
			// committed offsets.
			for tries := 0; err != nil && ctx.Err() == nil; tries++ {
				t.Logf("end transaction: %v (committed %v); retrying as an abort", err, committed)
				if tries == 20 {
					done <- fmt.Errorf("end transaction: %w", err)
					cancel()
					return
				}
				time.Sleep(250 * time.Millisecond) // the client's retry pace, not a wait for a result
				committed, err = sess.End(ctx, kgo.TryAbort)
			}
			if committed {
				mu.Lock()
				committedInputs += n
				mu.Unlock()
			}
		}
		done <- nil
	}()
	progress := func() int { mu.Lock(); defer mu.Unlock(); return committedInputs }

	// Kill the leader once the pipeline is under way, restart it later.
	waitFor(t, 60*time.Second, func() error {
		if n := progress(); n < inputs/4 {
			return fmt.Errorf("%d of %d inputs committed", n, inputs)
		}
		return nil
	})
	victim := c.leader()
	victim.kill9()
	t.Logf("killed the leader after %d inputs committed", progress())
	waitFor(t, 30*time.Second, func() error {
		_, err := c.findLeader()
		return err
	})
	victim.start() // back as a follower

	// Done when a read_committed reader finds an output for every input.
	out := map[string]int{}
	reader := kafkaClient(t, brokers, kgo.ConsumeTopics("eos-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(500*time.Millisecond))
	for len(out) < inputs {
		fs := reader.PollFetches(ctx)
		if ctx.Err() != nil {
			select {
			case err := <-done:
				t.Fatalf("the pipeline stopped: %v; read %d distinct outputs of %d (%d inputs committed)", err, len(out), inputs, progress())
			default:
			}
			t.Fatalf("read %d distinct outputs of %d before the deadline (%d inputs committed by the pipeline)", len(out), inputs, progress())
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("fetch %s[%d]: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { out[string(r.Value)]++ })
	}
	cancel()
	<-done
	// Read what else is there, then check: each output exactly once.
	for range 3 {
		tctx, tcancel := context.WithTimeout(context.Background(), 2*time.Second)
		reader.PollFetches(tctx).EachRecord(func(r *kgo.Record) { out[string(r.Value)]++ })
		tcancel()
	}
	for i := range inputs {
		if got := out["out-"+strconv.Itoa(i)]; got != 1 {
			t.Errorf("output of input %d read %d times, want once", i, got)
		}
	}
	if len(out) != inputs {
		t.Errorf("%d distinct outputs, want %d", len(out), inputs)
	}
}
