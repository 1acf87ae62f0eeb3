package raftfsm

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/waggle-mq/waggle/store"
)

// KeyedCommand applies an inner command at most once per request key (the
// HTTP Idempotency-Key): the first time it applies it and records its
// answer for WindowMs of replicated time; the same key again, with the
// same BodyHash, is answered from the record without applying anything.
// A key recorded for another request (another BodyHash) is refused. The
// leader stamps NowMs; the body hash is the client request's, not the
// inner command's (that holds the leader's stamps and minted ids, which
// differ on every try).
type KeyedCommand struct {
	NowMs    int64
	Key      string
	BodyHash [32]byte
	WindowMs int64
	// Inner is the inner command's entry, type byte first, in the
	// cluster's log format; it cannot be keyed itself.
	Inner []byte
}

// KeyedResult answers KeyedCommand. Answer is the inner command's answer
// (as its type declares, see answers.go): the first one when Replayed.
// Mismatch: the key was recorded for another request; nothing was applied.
// NotKept: replayed, but the first answer was too large to keep
// (maxRecordedAnswer); Answer is nil.
type KeyedResult struct {
	Replayed bool
	Mismatch bool
	NotKept  bool
	Answer   any
}

// keyable are the command types a keyed entry may wrap: the client writes
// the HTTP API keys (not housekeeping, which batches its own writes, and
// not a keyed entry itself).
var keyable = map[CommandType]bool{
	CmdPush: true, CmdConfigureQueue: true, CmdDeleteQueue: true, CmdDeleteOffsets: true, CmdAck: true,
	CmdSeek: true, CmdKV: true, CmdTransaction: true, CmdTimers: true,
}

// MaxRequestWindowMs bounds how long an outcome is kept.
const MaxRequestWindowMs = 24 * 3600 * 1000

// maxRecordedAnswer bounds an answer kept as a request's outcome (a push
// of 10,000 items answers about 1 MB of JSON).
const maxRecordedAnswer = 4 << 20

func (c *KeyedCommand) since() LogFormat { return LogFormat2 }

// Encode returns the raft entry for the command.
func (c *KeyedCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdKeyed))
	e.varint(c.NowMs)
	e.string(c.Key)
	e.fixed32(c.BodyHash)
	e.varint(c.WindowMs)
	e.bytes(c.Inner)
	return e.b
}

func decodeKeyed(b []byte) (*KeyedCommand, error) {
	d := decoder{b: b}
	c := &KeyedCommand{NowMs: d.varint(), Key: d.string(), BodyHash: d.fixed32(), WindowMs: d.varint(), Inner: d.bytes()}
	if err := d.finish(); err != nil {
		return nil, err
	}
	switch {
	case len(c.Key) == 0 || len(c.Key) > store.MaxRequestKeyBytes:
		return nil, fmt.Errorf("raftfsm: request key of %d bytes", len(c.Key))
	case c.WindowMs <= 0 || c.WindowMs > MaxRequestWindowMs:
		return nil, fmt.Errorf("raftfsm: request window %d ms", c.WindowMs)
	case len(c.Inner) == 0 || !KnownCommand(CommandType(c.Inner[0])):
		return nil, errors.New("raftfsm: a keyed entry without a known inner command")
	case !keyable[CommandType(c.Inner[0])]:
		return nil, fmt.Errorf("raftfsm: command type %d cannot be keyed", c.Inner[0])
	}
	return c, nil
}

func (p *Processor) keyed(tx *store.Tx, meta *store.Meta, c *KeyedCommand) KeyedResult {
	typ := CommandType(c.Inner[0])
	rec, found, err := tx.RequestOutcome(c.Key)
	must(err)
	if found && rec.ExpiresAtMs > meta.ClockMs {
		if rec.BodyHash != c.BodyHash || CommandType(rec.Type) != typ {
			return KeyedResult{Mismatch: true}
		}
		if rec.NotKept {
			return KeyedResult{Replayed: true, NotKept: true}
		}
		answer, err := answerDecoders[typ](rec.Answer)
		must(err)
		return KeyedResult{Replayed: true, Answer: answer}
	}
	answer := handlers[typ](p, tx, meta, c.Inner)
	b, err := json.Marshal(answer) // deterministic: struct fields in order, map keys sorted
	must(err)
	rec = store.RequestOutcome{Type: byte(typ), BodyHash: c.BodyHash, Answer: b, ExpiresAtMs: meta.ClockMs + c.WindowMs}
	if len(b) > maxRecordedAnswer { // kept as applied, so a retry is not applied again
		rec.Answer, rec.NotKept = nil, true
	}
	must(tx.PutRequestOutcome(c.Key, rec))
	return KeyedResult{Answer: answer}
}

// PruneRequestsCommand forgets request outcomes whose window has passed,
// at most Limit of them; the leader proposes it periodically.
type PruneRequestsCommand struct {
	NowMs int64
	Limit int
}

func (c *PruneRequestsCommand) since() LogFormat { return LogFormat2 }

// Encode returns the raft entry for the command.
func (c *PruneRequestsCommand) Encode() []byte {
	return encodePrune(CmdPruneRequests, c.NowMs, c.Limit)
}

func decodePruneRequests(b []byte) (*PruneRequestsCommand, error) {
	now, limit, err := decodePrune(b)
	return &PruneRequestsCommand{NowMs: now, Limit: limit}, err
}

// pruneRequests answers how many outcomes it forgot (Limit: maybe more).
func (p *Processor) pruneRequests(tx *store.Tx, meta *store.Meta, c *PruneRequestsCommand) int {
	n, err := tx.PruneRequestOutcomes(meta.ClockMs, c.Limit)
	must(err)
	return n
}
