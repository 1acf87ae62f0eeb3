package fsm

import (
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

func (p *Processor) retain(tx *store.Tx, meta *store.Meta, c *command.RetainCommand) command.RetainResult {
	if c.CutoffMs > meta.ClockMs {
		return command.RetainResult{} // a cutoff in the future is no retention
	}
	lim := store.RetentionLimit{CutoffMs: c.CutoffMs, KeepBytes: c.KeepBytes, CompletedPos: c.CompletedPos, CompletedCutoffMs: c.CompletedCutoffMs}
	if lim.CompletedCutoffMs > meta.ClockMs {
		lim.CompletedPos = 0
	}
	started, err := tx.Retain(c.QueueID, c.Pos, lim, meta.NextID)
	must(err)
	if started {
		meta.NextID++
	}
	return command.RetainResult{Started: started}
}
