package node

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/clock"
)

// clockWarnOffset is how far this node's wall clock may be from its
// voters' median before the node says so in its log.
const clockWarnOffset = time.Second

// maxClockRoundTrip is the slowest answer used: half the round trip is
// the estimate's error.
const maxClockRoundTrip = 500 * time.Millisecond

// askPeersTheTime asks every other voter for its wall clock (through
// /health) each interval until ctx ends, so clk can stamp the voters'
// median, and logs when this node's own clock is off it by more than
// clockWarnOffset, and when it is no longer. registry is group 0's
// service, whose configuration lists the voters.
func askPeersTheTime(ctx context.Context, registry *broker.Service, clk *clock.Cluster, client *http.Client, scheme string, every time.Duration, log *slog.Logger) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	asked := map[string]bool{}
	warned := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		members, err := registry.Members()
		if err != nil {
			continue
		}
		voters := map[string]bool{}
		for _, m := range members {
			if !m.Voter || m.ID == registry.NodeID() || m.HTTPAddr == "" {
				continue
			}
			voters[m.ID] = true
			askCtx, cancel := context.WithTimeout(ctx, time.Second)
			sent := time.Now()
			h, err := fetchPeerHealth(askCtx, client, scheme, m.HTTPAddr)
			received := time.Now()
			cancel()
			if err == nil && h.Clock != nil && received.Sub(sent) <= maxClockRoundTrip {
				clk.Observe(m.ID, sent, received, time.UnixMilli(h.Clock.WallMs))
			}
		}
		for id := range asked {
			if !voters[id] {
				clk.Forget(id)
			}
		}
		asked = voters
		offset, peers := clk.Offset()
		off := offset.Abs() > clockWarnOffset
		if off && !warned {
			log.Warn("this node's wall clock is off the voters' median; it stamps the median while it leads",
				"offset", offset.Round(time.Millisecond), "peers", peers)
		} else if !off && warned {
			log.Info("this node's wall clock is back near the voters' median", "offset", offset.Round(time.Millisecond), "peers", peers)
		}
		warned = off
	}
}

// clockOffsetGauge reports, at scrape time, how far this node's wall
// clock is from the voters' median (0 while no other voter answers).
func clockOffsetGauge(clk *clock.Cluster) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "waggle_clock_offset_seconds",
		Help: "This node's wall clock minus the lower median of the voters' clocks, which it stamps while it leads."},
		func() float64 { offset, _ := clk.Offset(); return offset.Seconds() })
}
