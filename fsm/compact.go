package fsm

import (
	"errors"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// Limits of one compaction entry (command/bounds.go).
const (
	compactMaxRecords = 20_000
	compactMaxEntries = 20_000
	compactMaxWrites  = 20_000
	compactMaxBytes   = 8 << 20
)

func (p *Processor) compact(tx *store.Tx, meta *store.Meta, c *command.CompactCommand) command.CompactResult {
	q, err := tx.QueueByID(c.QueueID)
	if errors.Is(err, store.ErrNotFound) {
		return command.CompactResult{Stale: true}
	}
	must(err)
	out, err := tx.Compact(q, meta.ClockMs, store.CompactProposal{Cut: c.Cut, CutBase: c.CutBase, Seal: c.Seal},
		store.CompactLimits{MaxRecords: compactMaxRecords, MaxEntries: compactMaxEntries, MaxWrites: compactMaxWrites, MaxBytes: compactMaxBytes},
		meta.NextID)
	must(err)
	if out.SeqUsed {
		meta.NextID++
	}
	return out
}
