package fsm

import (
	"fmt"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// effectiveLogFormat is the format a store was written at: stores from
// before formats were recorded hold 0, which is LogFormat1.
func effectiveLogFormat(m store.Meta) command.LogFormat {
	return max(command.LogFormat(m.LogFormat), command.LogFormat1)
}

// setLogFormat records a raised format. A format this binary cannot read
// stops the node (as an unknown command type does) rather than let it
// apply entries it would misread: the leader proposed it because this
// node's binary once said it could, so the binary was replaced by an
// older one since.
func (p *Processor) setLogFormat(tx *store.Tx, meta *store.Meta, c *command.SetLogFormatCommand) command.LogFormat {
	if c.Format > command.MaxLogFormat {
		panic(fmt.Sprintf("fsm: the cluster moved to log format %d; this binary reads up to %d: run a newer waggle on this node", c.Format, command.MaxLogFormat))
	}
	if uint32(c.Format) > meta.LogFormat {
		meta.LogFormat = uint32(c.Format)
		must(tx.PutLogFormat(meta.LogFormat))
	}
	return effectiveLogFormat(*meta)
}

// checkLogFormat refuses a store written at a format this binary cannot
// read (a downgrade after the cluster moved on).
func checkLogFormat(m store.Meta) error {
	if f := effectiveLogFormat(m); f > command.MaxLogFormat {
		return fmt.Errorf("the data directory is at log format %d; this binary reads up to %d: run a newer waggle", f, command.MaxLogFormat)
	}
	return nil
}
