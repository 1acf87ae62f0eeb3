package broker

import (
	"context"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/raftfsm"
)

// RunMaintenance proposes the leader's periodic housekeeping every period
// until ctx ends: forgetting dedup records whose window has passed and
// expired KV rows, and firing due timers.
// Followers do nothing; the entries reach them through the log.
func (s *Service) RunMaintenance(ctx context.Context, period time.Duration, log *slog.Logger) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if s.node.Raft.State() != raft.Leader {
			continue
		}
		// A backlog (after downtime, say) is worked off in bounded entries,
		// a few per tick so pushes keep their share of the log. The entries
		// also move the replicated clock that leases and KV expiry read.
		for range 10 {
			cmd := raftfsm.PruneDedupCommand{NowMs: s.now().UnixMilli(), Limit: raftfsm.MaxPruneLimit}
			answer, err := s.apply(cmd.Encode())
			if err != nil {
				log.Debug("prune dedup", "err", err)
				break
			}
			if answer.(raftfsm.PruneDedupResult).Removed < cmd.Limit {
				break
			}
		}
		// Expired KV rows and due timers, through the log.
		for range 10 {
			cmd := raftfsm.TickCommand{NowMs: s.now().UnixMilli(), Limit: 1000}
			answer, err := s.apply(cmd.Encode())
			if err != nil {
				log.Debug("tick", "err", err)
				break
			}
			if r := answer.(raftfsm.TickResult); r.PrunedKV < cmd.Limit && r.Fired < cmd.Limit {
				break
			}
		}
	}
}
