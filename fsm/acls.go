package fsm

import (
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

func (p *Processor) alterACLs(tx *store.Tx, _ *store.Meta, c *command.AlterACLsCommand) command.AlterACLsResult {
	res := command.AlterACLsResult{Created: make([]bool, len(c.Create)), Deleted: make([]bool, len(c.Delete))}
	for i, a := range c.Delete {
		deleted, err := tx.DeleteACL(a)
		must(err)
		res.Deleted[i] = deleted
	}
	if len(c.Create) == 0 {
		return res
	}
	held, err := tx.ACLs()
	must(err)
	n := len(held)
	for i, a := range c.Create {
		if n >= store.MaxACLs {
			break
		}
		added, err := tx.PutACL(a)
		must(err)
		if added {
			n++
		}
		res.Created[i] = true
	}
	return res
}
