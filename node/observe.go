package node

import (
	"context"
	"sync"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/metrics"
	"github.com/waggle-mq/waggle/raftgroups"
	"github.com/waggle-mq/waggle/raftnode"
	"github.com/waggle-mq/waggle/store"
)

// observe registers the gauges read at scrape time (raft state and badger
// sizes of group 0, consumer-group lag, pending deletes and the dedup
// index of every raft group in all) and counts group 0's leader changes until ctx ends (wg
// counts the goroutine that does).
func observe(ctx context.Context, wg *sync.WaitGroup, m *metrics.Metrics, node *raftnode.Node, st *store.Store, svc *broker.Service, set *raftgroups.Set) {
	all := func() []*broker.Service { // the groups it runs now: replicas move
		return mapAll(set.All(), func(g *raftgroups.Group) *broker.Service { return g.Svc })
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	health := func() broker.Health { return svc.Health() }
	// sum is a gauge's value summed over every raft group.
	sum := func(of func(*broker.Service) float64) func() float64 {
		return func() float64 {
			total := 0.0
			for _, g := range all() {
				total += of(g)
			}
			return total
		}
	}
	m.Register(
		gauge("waggle_raft_term", "Current raft term.", func() float64 { return float64(health().Term) }),
		gauge("waggle_raft_commit_index", "Raft commit index.", func() float64 { return float64(health().Commit) }),
		gauge("waggle_raft_applied_index", "Last raft index applied to the store.", func() float64 { return float64(health().Applied) }),
		gauge("waggle_raft_last_snapshot_index", "Raft index of the newest snapshot.", func() float64 { return float64(health().LastSnapshotIndex) }),
		gauge("waggle_raft_is_leader", "1 while this node leads.", func() float64 { return oneIf(svc.IsLeader()) }),
		gauge("waggle_raft_log_sealed_bytes", "Bytes in the raft log's sealed files (it also holds Kafka batches and pushed payloads, log format 5).",
			func() float64 { return float64(node.LogHoldStats().Sealed) }),
		gauge("waggle_raft_log_ref_bytes", "Bytes of batches and payloads that segments read from the raft log or its sidecar copies, at the last log compaction.",
			func() float64 { return float64(node.LogHoldStats().Live) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "waggle_raft_log_copied_bytes_total",
			Help: "Bytes of batches copied out of the raft log into segment sidecars, so the log could be compacted past them."},
			func() float64 { return float64(node.LogHoldStats().Copied) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "waggle_state_anomalies_total",
			Help: "State a consistent store never holds, found while applying entries (each is logged as a state anomaly): a bug or damage."},
			sum(func(g *broker.Service) float64 { return float64(g.StateAnomalies()) })),
		gauge("waggle_badger_lsm_bytes", "Size of badger's LSM tree.", func() float64 { lsm, _ := st.Size(); return float64(lsm) }),
		gauge("waggle_badger_vlog_bytes", "Size of badger's value log.", func() float64 { _, vlog := st.Size(); return float64(vlog) }),
		gauge("waggle_storage_full", "1 while writes that add data are refused for lack of disk space (--storage-min-free-mib).",
			func() float64 { return oneIf(svc.StorageFull()) }),
		gauge("waggle_pending_deletes", "Deleted queues and groups whose data is still being removed.", sum(func(g *broker.Service) float64 {
			n, _ := g.PendingDeletes()
			return float64(n)
		})),
		gauge("waggle_dedup_index_ids", "TransactionIds held in the dedup logs, indexed in memory (about 10 bytes each).", sum(func(g *broker.Service) float64 {
			ids, _ := g.DedupIndexStats()
			return float64(ids)
		})),
		gauge("waggle_dedup_filter_bytes", "Size of the dedup index's Bloom filters.", sum(func(g *broker.Service) float64 {
			_, b := g.DedupIndexStats()
			return float64(b)
		})),
		gauge("waggle_raft_groups", "Raft groups this node runs, group 0 included.", func() float64 { return float64(len(set.All())) }),
		gauge("waggle_raft_groups_moving", "Data groups this node leads whose raft members are not yet the replicas group 0 records: a move under way.",
			func() float64 {
				moving := 0
				for _, g := range set.Data() {
					if set.Moving(g.ID) {
						moving++
					}
				}
				return float64(moving)
			}),
		&cursorCollector{svcs: all,
			lag: prometheus.NewDesc("waggle_group_lag_messages",
				"Messages a consumer group has yet to read, per queue partition.", []string{"group", "queue", "partition"}, nil),
			expired: prometheus.NewDesc("waggle_group_expired_messages",
				"Messages retention dropped before a consumer group read them (its cursor jumped past them), per queue partition.", []string{"group", "queue", "partition"}, nil)},
	)

	onLeaderChange(ctx, wg, node, func(raft.LeaderObservation) { m.LeaderChanged() })
}

// oneIf is a gauge's value for a condition: 1 when it holds, else 0.
func oneIf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// cursorCollector reports every group's lag, and the messages retention
// took from it, at scrape time.
type cursorCollector struct {
	svcs         func() []*broker.Service // every raft group's: a queue's cursors are in its group
	lag, expired *prometheus.Desc
}

func (c *cursorCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.lag; ch <- c.expired }

func (c *cursorCollector) Collect(ch chan<- prometheus.Metric) {
	for _, svc := range c.svcs() {
		c.collect(ch, svc)
	}
}

func (c *cursorCollector) collect(ch chan<- prometheus.Metric, svc *broker.Service) {
	groups, err := svc.OffsetGroups()
	if err != nil {
		return
	}
	for _, g := range groups {
		cursors, err := svc.GroupCursors(g)
		if err != nil {
			continue
		}
		for _, cur := range cursors {
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(cur.Lag()), g, cur.Queue, cur.Partition)
			if cur.Expired > 0 {
				ch <- prometheus.MustNewConstMetric(c.expired, prometheus.CounterValue, float64(cur.Expired), g, cur.Queue, cur.Partition)
			}
		}
	}
}
