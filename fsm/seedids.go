package fsm

import (
	"encoding/json"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

func (p *Processor) seedIDs(_ *store.Tx, meta *store.Meta, c *command.SeedIDsCommand) uint64 {
	meta.NextID = max(meta.NextID, c.Base)
	return meta.NextID
}

// DecodeAnswer reads back the answer, written as JSON, to entry (a command
// as Encode writes it), typed as the command declares it: a keyed entry's
// answer holds its inner command's answer.
func DecodeAnswer(entry, answer []byte) (any, error) {
	if err := command.CheckEntry(entry); err != nil {
		return nil, err
	}
	t := command.CommandType(entry[0])
	a, err := answerDecoders[t](answer)
	if err != nil || t != command.CmdKeyed {
		return a, err
	}
	keyed, _ := command.DecodeCommand(entry) // CheckEntry decoded it
	r := a.(command.KeyedResult)
	var raw struct{ Answer json.RawMessage }
	if err := json.Unmarshal(answer, &raw); err != nil {
		return nil, err
	}
	if r.Answer == nil {
		return r, nil
	}
	r.Answer, err = answerDecoders[command.CommandType(keyed.(*command.KeyedCommand).Inner[0])](raw.Answer)
	return r, err
}

func (p *Processor) preferLeader(tx *store.Tx, _ *store.Meta, c *command.PreferLeaderCommand) any {
	if c.Node == "" {
		must(tx.DeleteLeaderPreference(c.Group))
	} else {
		must(tx.PutLeaderPreference(c.Group, c.Node))
	}
	return nil
}

func (p *Processor) setReplicas(tx *store.Tx, _ *store.Meta, c *command.SetReplicasCommand) any {
	if len(c.Replicas) == 0 {
		must(tx.DeleteReplicas(c.Group))
	} else {
		must(tx.PutReplicas(c.Group, c.Replicas))
	}
	return nil
}
