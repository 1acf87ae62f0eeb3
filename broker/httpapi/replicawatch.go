package httpapi

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// replicaWatch is what the last look found.
type replicaWatch struct {
	diverged atomic.Int64 // raft groups whose members' digests differ
}

// WatchReplicas compares the members' state digests every `every` while
// this node leads, as GET /api/v1/cluster does, until ctx ends: a group
// whose members hold different states is logged as an error each time
// and counted in waggle_replicas_diverged, so a divergence is noticed
// without anyone running `waggle cluster status`. A follower does not
// look (the leader does) and reports 0.
func (s *Server) WatchReplicas(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !s.svc.IsLeader() {
			s.replicas.diverged.Store(0)
			continue
		}
		look, cancel := context.WithTimeout(ctx, every)
		view, err := s.clusterView(look)
		cancel()
		if err != nil {
			continue // no member list: no look this time
		}
		diverged := 0
		for _, r := range view.Replicas {
			if r.State == "diverged" {
				diverged++
				var index uint64
				if r.Index != nil {
					index = *r.Index
				}
				s.log.Error("replicas hold different states: a bug in waggle; keep both nodes' data and logs, and replace the node the others disagree with",
					"group", r.Group, "index", index, "nodes", r.Members)
			}
		}
		s.replicas.diverged.Store(int64(diverged))
	}
}

// replicasDivergedGauge reports what WatchReplicas last found.
func (s *Server) replicasDivergedGauge() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "waggle_replicas_diverged",
		Help: "Raft groups whose members' state digests differ, as this node found them at its last look while leading (--replica-watch-interval): a bug."},
		func() float64 { return float64(s.replicas.diverged.Load()) })
}
