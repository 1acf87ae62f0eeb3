package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkReplicaMove moves a replica of a data group that holds
// WAGGLE_MOVE_MIB (default 1,024) MiB of random, incompressible Kafka
// records, and reports how long the move took and the client-visible
// stall: the latency of a paced producer (one 1 KiB record every 5 ms,
// acks=all) to the group, its 50th and 99th percentiles in the 20 s
// before the move and during it. 4 nodes, one data group of 3 replicas;
// the replica of node 3 (a follower) moves to node 4, which catches up
// from a snapshot (the group's records) and the log since. It also
// reports the bytes node 4 wrote per byte of the group's data.
// WAGGLE_MOVE_PACE_MIB sets the nodes' --snapshot-send-mib.
//
//	go test ./integration -run '^$' -bench ReplicaMove -benchtime 1x
func BenchmarkReplicaMove(b *testing.B) {
	mib := 1024
	if v, err := strconv.Atoi(os.Getenv("WAGGLE_MOVE_MIB")); err == nil && v > 0 {
		mib = v
	}
	var extra []string
	if v := os.Getenv("WAGGLE_MOVE_PACE_MIB"); v != "" {
		extra = []string{"--snapshot-send-mib", v}
	}
	for range b.N {
		s := startScaleOut(b, 4, 2, 3, extra...)
		s.waitPlaced(b, func(g uint32) int { return s.replicas(g)[0] })
		topic := s.nameIn(b, "move-bench-", 1)

		// Fill the group: 64 KiB records, many in flight.
		cl := kafkaClient(b, s.kafkaAddrs(), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedBytes(64<<20))
		createTopic(b, cl, topic, 4, nil)
		src := benchPayloads(0)
		filled := time.Now()
		var wg sync.WaitGroup
		var failed error
		var mu sync.Mutex
		for i := range mib * 16 {
			wg.Add(1)
			cl.Produce(context.Background(), &kgo.Record{Topic: topic, Value: src.Bytes(64 << 10)}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					mu.Lock()
					failed = fmt.Errorf("record %d: %w", i, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if failed != nil {
			b.Fatal(failed)
		}
		b.Logf("%d MiB produced to group 1 in %v", mib, time.Since(filled).Round(time.Second))

		// The paced producer, whose latencies show the stall.
		lat := &latencies{}
		stop := make(chan struct{})
		done := make(chan error, 1)
		probe := kafkaClient(b, s.kafkaAddrs(), kgo.ProducerLinger(0))
		go func() {
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					done <- nil
					return
				case <-tick.C:
				}
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := probe.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: src.Bytes(1 << 10)}).FirstErr()
				cancel()
				if err != nil {
					done <- err
					return
				}
				lat.add(start, time.Since(start))
			}
		}()
		time.Sleep(20 * time.Second)
		moveStart := time.Now()
		wroteBefore := writeBytes(b, s.nodes[3].cmd.Process.Pid)
		if status := do(b, http.MethodPut, s.nodes[0].url("/api/v1/cluster/groups/1/replicas"), []byte(`{"replicas":[1,2,4]}`), nil); status != http.StatusOK {
			b.Fatalf("move: status %d", status)
		}
		s.waitMovedWithin(b, 1, []int{1, 2, 4}, 30*time.Minute)
		took := time.Since(moveStart)
		wrote := writeBytes(b, s.nodes[3].cmd.Process.Pid) - wroteBefore
		time.Sleep(2 * time.Second)
		close(stop)
		if err := <-done; err != nil {
			b.Fatalf("the paced producer failed: %v", err)
		}
		before := lat.between(moveStart.Add(-20*time.Second), moveStart)
		during := lat.between(moveStart, moveStart.Add(took))
		b.ReportMetric(took.Seconds(), "move-s")
		b.ReportMetric(float64(mib)/took.Seconds(), "MiB/s")
		b.ReportMetric(ms(pct(before, 50)), "p50-before-ms")
		b.ReportMetric(ms(pct(before, 99)), "p99-before-ms")
		b.ReportMetric(ms(pct(during, 50)), "p50-during-ms")
		b.ReportMetric(ms(pct(during, 99)), "p99-during-ms")
		b.ReportMetric(ms(slices.Max(during)), "max-during-ms")
		b.ReportMetric(float64(wrote)/float64(mib<<20), "new-replica-written/data-byte")
		b.Logf("move of a %d MiB group: %v; producer latency p50/p99 before %.1f/%.1f ms (%d records), during %.1f/%.1f ms (%d records, max %.1f ms); node 4 wrote %.2f bytes per data byte",
			mib, took.Round(100*time.Millisecond), ms(pct(before, 50)), ms(pct(before, 99)), len(before), ms(pct(during, 50)), ms(pct(during, 99)), len(during),
			ms(slices.Max(during)), float64(wrote)/float64(mib<<20))
	}
}

// waitMovedWithin is waitMoved with its own deadline.
func (s *scaleOut) waitMovedWithin(t testing.TB, g uint32, want []int, d time.Duration) {
	t.Helper()
	waitFor(t, d, func() error {
		groups, err := s.groupsOf(t, s.nodes[0])
		if err != nil {
			return err
		}
		got := groups[g]
		if got.Moving || !slices.Equal(slices.Sorted(slices.Values(got.Members)), slices.Sorted(slices.Values(want))) {
			return fmt.Errorf("group %d: %+v", g, got)
		}
		return nil
	})
}

// latencies records each send's start and latency.
type latencies struct {
	mu    sync.Mutex
	start []time.Time
	took  []time.Duration
}

func (l *latencies) add(start time.Time, took time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.start, l.took = append(l.start, start), append(l.took, took)
}

// between is the latencies of the sends started in [from, to).
func (l *latencies) between(from, to time.Time) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for i, s := range l.start {
		if !s.Before(from) && s.Before(to) {
			out = append(out, l.took[i])
		}
	}
	return out
}

// pct is the p-th percentile of d (0 for none).
func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(d))
	return s[min(len(s)-1, len(s)*p/100)]
}
