package raftgroups

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/payload"
	"github.com/waggle-mq/waggle/raftmux"
	"github.com/waggle-mq/waggle/raftnode"
	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

// benchCluster is three in-process nodes, each with one raft listener
// and a member of every group: real raft over loopback TCP, badger on disk.
type benchCluster struct {
	members [][]*broker.Service // [group][node]
	nodes   [][]*raftnode.Node
}

func startBenchCluster(b *testing.B, nodes, groups int) *benchCluster {
	muxes := make([]*raftmux.Mux, nodes)
	var peers []raftnode.Peer
	for i := range muxes {
		m, err := raftnode.Listen("127.0.0.1:0", "127.0.0.1:0", nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { m.Close() })
		muxes[i] = m
		peers = append(peers, raftnode.Peer{ID: fmt.Sprint(i + 1), Addr: m.Addr().String()})
	}
	c := &benchCluster{}
	for g := range groups {
		var svcs []*broker.Service
		var ns []*raftnode.Node
		for i := range nodes {
			dir := filepath.Join(b.TempDir(), fmt.Sprint(g))
			st, err := store.Open(filepath.Join(dir, "state"))
			if err != nil {
				b.Fatal(err)
			}
			n, err := raftnode.StartNode(raftnode.NodeConfig{ID: peers[i].ID, Mux: muxes[i], Group: uint32(g), Dir: dir, Peers: peers,
				Logger: hclog.NewNullLogger()}, st)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { n.Shutdown(); st.Close() })
			svcs = append(svcs, broker.New(peers[i].ID, n, st))
			ns = append(ns, n)
		}
		c.members, c.nodes = append(c.members, svcs), append(c.nodes, ns)
	}
	return c
}

// leader waits until group g's leader is node want (handing leadership
// over to it) and returns its service.
func (c *benchCluster) leader(b *testing.B, g, want int) *broker.Service {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for i, n := range c.nodes[g] {
			if n.Raft.State() != raft.Leader {
				continue
			}
			if i == want {
				return c.members[g][i]
			}
			target := c.nodes[g][want]
			n.Raft.LeadershipTransferToServer(raft.ServerID(fmt.Sprint(want+1)), raft.ServerAddress(target.RaftAddr())).Error()
		}
	}
	b.Fatalf("group %d: node %d did not take the lead", g, want+1)
	return nil
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGroupsProduce measures produce through 1, 2 and 3 raft groups
// of a 3-node cluster in one process, each group led by another node:
// b.N records of 100 random bytes in batches of 100 from 12 producers
// spread over the groups. All nodes share this machine's cores, so it reports, beside
// records/s, the CPU time the whole cluster spent per acknowledged record:
// if that stays flat as groups are added, throughput grows with the cores
// the groups are given.
//
//	go test ./groups -run '^$' -bench GroupsProduce -benchtime 200000x
func BenchmarkGroupsProduce(b *testing.B) {
	for _, groups := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			c := startBenchCluster(b, 3, groups)
			leaders := make([]*broker.Service, groups)
			for g := range groups {
				leaders[g] = c.leader(b, g, g)
				if outcome, err := leaders[g].CreateTopic("t", 1, nil); err != nil || outcome != command.TopicOK {
					b.Fatalf("group %d: create topic: %v %v", g, outcome, err)
				}
			}
			// The same 12 producers whatever the group count, so only
			// the groups change.
			const batch, producers = 100, 12
			batches := b.N / batch
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start, cpu := time.Now(), cpuTime()
			for w := range producers {
				g := w % groups
				wg.Add(1)
				go func() {
					defer wg.Done()
					src := payload.New(uint64(w+1), false)
					for next.Add(1) <= int64(batches) {
						recs := make([]recordbatch.Record, batch)
						for i := range recs {
							recs[i] = recordbatch.Record{Offset: int64(i), Value: src.Bytes(100)}
						}
						parsed, err := recordbatch.Parse(recordbatch.Build(0, recs))
						if err != nil {
							b.Error(err)
							return
						}
						res, err := leaders[g].ProduceAsync("t", 0, 0, []recordbatch.Batch{parsed})()
						if err != nil || res.Outcome != command.TopicOK {
							b.Errorf("group %d: produce: %+v %v", g, res, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed, used := time.Since(start), cpuTime()-cpu
			b.StopTimer()
			records := float64(batches * batch)
			b.ReportMetric(records/elapsed.Seconds(), "recs/s")
			b.ReportMetric(float64(used.Microseconds())/records, "cpu-µs/rec")
		})
	}
}
