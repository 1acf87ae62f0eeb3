package fsm

import (
	"errors"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

func (p *Processor) replayDeadLetter(tx *store.Tx, meta *store.Meta, c *command.ReplayDeadLetterCommand) command.ReplayResult {
	dl, err := tx.DeadLetterByID(c.ID)
	if errors.Is(err, store.ErrNotFound) {
		return command.ReplayResult{}
	}
	must(err)
	q, err := tx.QueueByID(dl.QueueID)
	if errors.Is(err, store.ErrNotFound) {
		return command.ReplayResult{} // cleanup removes the dead letter soon
	}
	must(err)
	if r := dl.Replayed; r != nil {
		return command.ReplayResult{Found: true, Push: command.PushResult{Status: command.PushDuplicate, Offset: r.Offset, MessageID: r.MessageID}}
	}
	payload := []byte(dl.Payload)
	if len(payload) == 0 {
		payload = []byte("null") // a Kafka record's dead letter keeps no payload
	}
	res := p.push(tx, meta, &command.PushCommand{NowMs: c.NowMs, Items: []command.PushItem{{Queue: q.Name, Partition: dl.Partition,
		TransactionID: command.ReplayTransactionID(dl.ID), MessageID: c.MessageID, Payload: payload}}})[0]
	if res.Status != command.PushRejected {
		dl.Replayed = &store.Replay{AtMs: meta.ClockMs, MessageID: res.MessageID, Offset: res.Offset}
		must(tx.PutDeadLetter(dl))
	}
	return command.ReplayResult{Found: true, Push: res}
}

func (p *Processor) deleteDeadLetters(tx *store.Tx, _ *store.Meta, c *command.DeleteDeadLettersCommand) int {
	n := 0
	for _, id := range c.IDs {
		_, err := tx.DeadLetterByID(id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		must(err)
		must(tx.DeleteDeadLetter(id))
		n++
	}
	return n
}
