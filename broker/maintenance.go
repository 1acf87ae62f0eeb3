package broker

import (
	"context"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/raftfsm"
	"github.com/waggle-mq/waggle/store"
)

// RunMaintenance proposes the leader's periodic housekeeping every period
// until ctx ends: forgetting dedup records whose window has passed and
// expired KV rows, firing due timers, and removing what deleted queues and
// groups left behind.
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
		s.cleanUp(log)
		// Expired KV rows and due timers, through the log.
		for range 10 {
			cmd := raftfsm.TickCommand{NowMs: s.now().UnixMilli(), Limit: 1000}
			answer, err := s.apply(cmd.Encode())
			if err != nil {
				log.Debug("tick", "err", err)
				break
			}
			if r := answer.(raftfsm.TickResult); r.PrunedKV < cmd.Limit && r.Fired < cmd.Limit && !r.More {
				break
			}
		}
	}
}

// cleanUp proposes bounded cleanup entries while tombstones remain, a few
// per tick so that deleting a large queue never crowds out other writes.
func (s *Service) cleanUp(log *slog.Logger) {
	if n, err := s.pendingDeletes(1); err != nil || n == 0 {
		return // the common case: one key looked at each second
	}
	for range 10 {
		cmd := raftfsm.CleanupCommand{MaxWrites: raftfsm.MaxCleanupWrites}
		answer, err := s.apply(cmd.Encode())
		if err != nil {
			log.Debug("cleanup", "err", err)
			return
		}
		if !answer.(raftfsm.CleanupResult).More {
			return
		}
	}
}

// PendingDeletes counts the deleted queues and groups whose data cleanup
// entries have not finished removing (at most 10,000).
func (s *Service) PendingDeletes() (int, error) { return s.pendingDeletes(10_000) }

// pendingDeletes is PendingDeletes counting at most limit.
func (s *Service) pendingDeletes(limit int) (int, error) {
	var n int
	err := s.store.View(func(tx *store.Tx) error {
		tss, err := tx.Tombstones(limit)
		n = len(tss)
		return err
	})
	return n, err
}
