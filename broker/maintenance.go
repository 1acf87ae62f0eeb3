package broker

import (
	"context"
	"log/slog"
	"math"
	"time"

	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// RunMaintenance proposes the leader's periodic housekeeping every period
// until ctx ends: forgetting dedup records whose window has passed and
// expired KV rows, firing due timers, removing what deleted queues and
// groups left behind, and dropping messages past their queue's retention.
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
			cmd := command.PruneDedupCommand{NowMs: s.now().UnixMilli(), Limit: command.MaxPruneLimit}
			answer, err := apply(s, &cmd)
			if err != nil {
				log.Debug("prune dedup", "err", err)
				break
			}
			if answer.Removed < cmd.Limit {
				break
			}
		}
		s.pruneRequests(log)
		s.cleanUp(log)
		s.retain(log)
		s.abortExpiredTxns(log)
		s.expireTxnIDs(log)
		s.compact(log)
		// Expired KV rows and due timers, through the log.
		for range 10 {
			cmd := command.TickCommand{NowMs: s.now().UnixMilli(), Limit: 1000}
			answer, err := apply(s, &cmd)
			if err != nil {
				log.Debug("tick", "err", err)
				break
			}
			if r := answer; r.PrunedKV < cmd.Limit && r.Fired < cmd.Limit && !r.More {
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
		cmd := command.CleanupCommand{MaxWrites: command.MaxCleanupWrites}
		answer, err := apply(s, &cmd)
		if err != nil {
			log.Debug("cleanup", "err", err)
			return
		}
		if !answer.More {
			return
		}
	}
}

// PendingDeletes counts the deleted queues and groups whose data cleanup
// entries have not finished removing (at most 10,000).
func (s *Service) PendingDeletes() (int, error) { return s.pendingDeletes(10_000) }

// DedupIndexStats reports the transactionIds held in the group's dedup
// logs and the size in bytes of their index's Bloom filter (both in this
// node's memory).
func (s *Service) DedupIndexStats() (ids int64, filterBytes int) { return s.store.DedupIndexStats() }

// StateAnomalies counts the state anomalies this node's state machine found
// while applying since start (fsm.FSM.Anomaly): each is a bug or damage.
func (s *Service) StateAnomalies() uint64 { return s.node.FSM.Anomalies() }

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

// retainQueuesPerTick bounds how many queues one retention pass looks at:
// the passes go round all queues, this many a second.
const retainQueuesPerTick = 1000

// Working out what every group of a queue has finished (for
// completedRetentionSeconds) costs a position per partition and group. A
// retention pass reads at most completedRetentionGroups groups (with more,
// finished messages are not dropped) and at most completedRetentionLookups
// positions; a queue that does not fit in what is left waits for the next
// pass, and one that never fits (more partitions times groups) keeps its
// finished messages.
const (
	completedRetentionGroups  = 1000
	completedRetentionLookups = 100_000
)

// retain proposes retention for the queues whose oldest sealed segments
// have outlived their retention, looking at a bounded slice of the queues
// each tick. It waits while deletes or earlier trims are being worked off,
// so a trim is never proposed twice.
func (s *Service) retain(log *slog.Logger) {
	if n, err := s.pendingDeletes(1); err != nil || n > 0 {
		return
	}
	now := s.now().UnixMilli()
	var cmds []command.RetainCommand
	completed := completedScan{lookups: completedRetentionLookups}
	err := s.store.View(func(tx *store.Tx) error {
		qs, err := tx.QueuesAfter(s.retainAfter, retainQueuesPerTick)
		if err != nil {
			return err
		}
		s.retainAfter = ""
		if len(qs) == retainQueuesPerTick {
			s.retainAfter = qs[len(qs)-1].Name
		}
		for _, q := range qs {
			lim := store.RetentionLimit{CutoffMs: math.MinInt64}
			if q.Deletes() { // cleanup.policy=compact keeps records by key, not by age or size
				lim.KeepBytes = command.RetentionBytes(q)
				if keep := command.RetentionMs(q, s.KafkaRetentionMs); keep > 0 {
					lim.CutoffMs = now - keep
				}
			}
			if q.CompletedRetentionMs > 0 {
				pos, found, err := completed.point(tx, q.ID)
				if err != nil {
					return err
				}
				if found {
					lim.CompletedPos, lim.CompletedCutoffMs = pos, now-q.CompletedRetentionMs
				}
			}
			if lim.CutoffMs == math.MinInt64 && lim.KeepBytes == 0 && lim.CompletedPos == 0 {
				continue
			}
			pos, found, err := tx.RetentionPoint(q.ID, lim)
			if err != nil {
				return err
			}
			if found {
				cmds = append(cmds, command.RetainCommand{NowMs: now, QueueID: q.ID, Pos: pos, CutoffMs: lim.CutoffMs, KeepBytes: lim.KeepBytes,
					CompletedPos: lim.CompletedPos, CompletedCutoffMs: lim.CompletedCutoffMs})
			}
		}
		return nil
	})
	if err != nil {
		log.Warn("retention", "err", err)
		return
	}
	for _, cmd := range cmds {
		if _, err := apply(s, &cmd); err != nil {
			log.Debug("retain", "err", err)
			return
		}
	}
	if len(cmds) > 0 {
		s.cleanUp(log)
	}
}

// completedScan works out completed points (store.Tx.CompletedPoint) for
// one retention pass, within the pass's bounds: the groups are read once,
// on first need, and the positions looked up count against lookups.
type completedScan struct {
	groups         []string
	read, complete bool
	lookups        int
}

func (c *completedScan) point(tx *store.Tx, queueID uint64) (pos uint64, found bool, err error) {
	if !c.read {
		if c.groups, c.complete, err = tx.ConsumerGroups(completedRetentionGroups); err != nil {
			return 0, false, err
		}
		c.read = true
	}
	if !c.complete || c.lookups <= 0 {
		return 0, false, nil
	}
	pos, found, looked, err := tx.CompletedPoint(queueID, c.groups, c.lookups)
	c.lookups -= looked
	return pos, found, err
}

// compactQueuesPerTick bounds how many queues one compaction look covers,
// and compactEntriesPerTick the compaction entries proposed each tick, so
// produce keeps its share of the log.
const (
	compactQueuesPerTick  = 1000
	compactEntriesPerTick = 20
)

// compact proposes log compaction for compacted topics: the next entries
// of a pass in progress, or a new pass where the dirty part of the log
// (bytes appended since the last pass's cut, less what that pass copied)
// is at least min.cleanable.dirty.ratio of the whole, or a kept tombstone
// is due to go. A pass's cut is the end of the newest sealed segment whose
// last append is older than min.compaction.lag.ms, or the active segment,
// sealed by the entry, once it is segment.ms (or max.compaction.lag.ms)
// old. max.compaction.lag.ms also forces a pass (compactionProposal).
func (s *Service) compact(log *slog.Logger) {
	now := s.now().UnixMilli()
	var cmds []command.CompactCommand
	err := s.store.View(func(tx *store.Tx) error {
		qs, err := tx.QueuesAfter(s.compactAfter, compactQueuesPerTick)
		if err != nil {
			return err
		}
		s.compactAfter = ""
		if len(qs) == compactQueuesPerTick {
			s.compactAfter = qs[len(qs)-1].Name
		}
		for _, q := range qs {
			if !q.Compacts() {
				continue
			}
			lag := max(q.MinCompactionLagMs, 0)
			c, err := tx.CompactionCandidate(q.ID, now-lag)
			if err != nil {
				return err
			}
			if c.State.Active {
				cmds = append(cmds, command.CompactCommand{NowMs: now, QueueID: q.ID})
				continue
			}
			if p, ok := compactionProposal(q, c, now, lag); ok {
				p.NowMs, p.QueueID = now, q.ID
				cmds = append(cmds, p)
			}
		}
		return nil
	})
	if err != nil {
		log.Warn("compaction", "err", err)
		return
	}
	sent := 0
	for _, cmd := range cmds {
		for sent < compactEntriesPerTick {
			sent++
			res, err := apply(s, &cmd)
			if err != nil {
				log.Debug("compact", "err", err)
				return
			}
			if res.Finished {
				s.cleanUp(log) // drop the segments the pass emptied
			}
			if !res.More {
				break
			}
			cmd = command.CompactCommand{NowMs: s.now().UnixMilli(), QueueID: cmd.QueueID}
		}
	}
}

// compactionProposal decides whether a compacted queue needs a new pass,
// and at which cut.
func compactionProposal(q store.Queue, c store.CompactionCandidate, now, lag int64) (command.CompactCommand, bool) {
	st := c.State
	total := c.End - min(c.First, c.End)
	clean := min(st.LastMoved, total)
	var dirty uint64
	if c.End > st.LastCut+clean {
		dirty = c.End - st.LastCut - clean
	}
	due := st.LastTombstoneDueMs != 0 && now >= st.LastTombstoneDueMs
	if total == 0 || (dirty == 0 && !due) {
		return command.CompactCommand{}, false
	}
	// max.compaction.lag.ms: once that long has passed since the last pass
	// (or the topic's creation), anything dirty makes a pass due.
	maxLag, lagSet := q.Config(command.ConfigMaxCompactionLagMs)
	overdue := lagSet && dirty > 0 && now-max(st.LastDoneMs, q.CreatedAtMs) >= maxLag
	if !due && !overdue && int64(float64(dirty)/float64(total)*1e6) < q.MinCleanableDirtyRatio() {
		return command.CompactCommand{}, false
	}
	ageMs := store.CompactionSealAgeMs(q)
	if c.End > c.ActiveBase && now-c.ActiveSinceMs >= ageMs && now-c.LastAppendMs >= lag {
		return command.CompactCommand{Seal: true}, true
	}
	if c.SealedFound && c.SealedCut > st.LastCut {
		return command.CompactCommand{Cut: c.SealedCut, CutBase: c.SealedBase}, true
	}
	return command.CompactCommand{}, false
}

// pruneRequests forgets keyed requests' outcomes whose window has passed,
// in bounded entries, a few per tick (log format 2 on: before, there are
// none).
func (s *Service) pruneRequests(log *slog.Logger) {
	if !s.KeyedWrites() {
		return
	}
	for range 10 {
		cmd := command.PruneRequestsCommand{NowMs: s.now().UnixMilli(), Limit: command.MaxPruneLimit}
		n, err := apply(s, &cmd)
		if err != nil {
			log.Debug("prune request outcomes", "err", err)
			return
		}
		if n < cmd.Limit {
			return
		}
	}
}
