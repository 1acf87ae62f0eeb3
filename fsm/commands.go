package fsm

import (
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

func (p *Processor) cleanup(tx *store.Tx, _ *store.Meta, c *command.CleanupCommand) command.CleanupResult {
	res, err := tx.CleanUp(&store.Budget{MaxWrites: max(c.MaxWrites, 2), MaxScanned: command.CleanupMaxScanned})
	must(err)
	return res
}
