package command

import (
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
		return nil, fmt.Errorf("command: request key of %d bytes", len(c.Key))
	case c.WindowMs <= 0 || c.WindowMs > MaxRequestWindowMs:
		return nil, fmt.Errorf("command: request window %d ms", c.WindowMs)
	case len(c.Inner) == 0 || !KnownCommand(CommandType(c.Inner[0])):
		return nil, errors.New("command: a keyed entry without a known inner command")
	case !keyable[CommandType(c.Inner[0])]:
		return nil, fmt.Errorf("command: command type %d cannot be keyed", c.Inner[0])
	}
	return c, nil
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
