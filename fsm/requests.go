package fsm

import (
	"encoding/json"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// maxRecordedAnswer bounds an answer kept as a request's outcome (a push
// of 10,000 items answers about 1 MB of JSON).
const maxRecordedAnswer = 4 << 20

func (p *Processor) keyed(tx *store.Tx, meta *store.Meta, c *command.KeyedCommand) command.KeyedResult {
	typ := command.CommandType(c.Inner[0])
	rec, found, err := tx.RequestOutcome(c.Key)
	must(err)
	if found && rec.ExpiresAtMs > meta.ClockMs {
		if rec.BodyHash != c.BodyHash || command.CommandType(rec.Type) != typ {
			return command.KeyedResult{Mismatch: true}
		}
		if rec.NotKept {
			return command.KeyedResult{Replayed: true, NotKept: true}
		}
		answer, err := answerDecoders[typ](rec.Answer)
		must(err)
		return command.KeyedResult{Replayed: true, Answer: answer}
	}
	answer := handlers[typ](p, tx, meta, c.Inner)
	b, err := json.Marshal(answer) // deterministic: struct fields in order, map keys sorted
	must(err)
	rec = store.RequestOutcome{Type: byte(typ), BodyHash: c.BodyHash, Answer: b, ExpiresAtMs: meta.ClockMs + c.WindowMs}
	if len(b) > maxRecordedAnswer { // kept as applied, so a retry is not applied again
		rec.Answer, rec.NotKept = nil, true
	}
	must(tx.PutRequestOutcome(c.Key, rec))
	return command.KeyedResult{Answer: answer}
}

// pruneRequests answers how many outcomes it forgot (Limit: maybe more).
func (p *Processor) pruneRequests(tx *store.Tx, meta *store.Meta, c *command.PruneRequestsCommand) int {
	n, err := tx.PruneRequestOutcomes(meta.ClockMs, c.Limit)
	must(err)
	return n
}
