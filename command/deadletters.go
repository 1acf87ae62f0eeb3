package command

import (
	"errors"
	"strconv"
)

// ReplayDeadLetterCommand pushes a copy of a dead letter back to the
// partition it came from and marks the dead letter replayed, in one entry.
// A dead letter replayed before is not pushed again: the answer is the
// first copy's, as a duplicate, whatever the queue's dedup window. The
// leader stamps the copy's MessageID.
type ReplayDeadLetterCommand struct {
	NowMs     int64
	ID        uint64
	MessageID [16]byte
}

// ReplayResult answers ReplayDeadLetterCommand. Found is false when there
// is no such dead letter or its queue was deleted; Push is the copy:
// PushQueued, or PushDuplicate with the first copy's offset and id.
type ReplayResult struct {
	Found bool
	Push  PushResult
}

// ReplayTransactionID is the transactionId a replayed dead letter's copy
// is pushed with, so the queue's dedup index knows it too.
func ReplayTransactionID(id uint64) string { return "dlq-replay-" + strconv.FormatUint(id, 10) }

func (c *ReplayDeadLetterCommand) since() LogFormat { return LogFormat2 }

// Encode returns the raft entry for the command.
func (c *ReplayDeadLetterCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdReplayDeadLetter))
	e.varint(c.NowMs)
	e.uvarint(c.ID)
	e.fixed16(c.MessageID)
	return e.b
}

func decodeReplayDeadLetter(b []byte) (*ReplayDeadLetterCommand, error) {
	d := decoder{b: b}
	c := &ReplayDeadLetterCommand{NowMs: d.varint(), ID: d.uvarint(), MessageID: d.fixed16()}
	return c, d.finish()
}

// MaxDeleteDeadLetters bounds the ids one DeleteDeadLettersCommand names;
// purging more takes several entries.
const MaxDeleteDeadLetters = 1000

// DeleteDeadLettersCommand removes dead letters by id; ids that are gone
// already are passed over. It answers how many it removed.
type DeleteDeadLettersCommand struct {
	IDs []uint64
}

func (c *DeleteDeadLettersCommand) since() LogFormat { return LogFormat2 }

// Encode returns the raft entry for the command.
func (c *DeleteDeadLettersCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdDeleteDeadLetters))
	e.uvarint(uint64(len(c.IDs)))
	for _, id := range c.IDs {
		e.uvarint(id)
	}
	return e.b
}

func decodeDeleteDeadLetters(b []byte) (*DeleteDeadLettersCommand, error) {
	d := decoder{b: b}
	n := d.count(1)
	if n > MaxDeleteDeadLetters {
		return nil, errors.New("command: too many dead letters in one delete entry")
	}
	c := &DeleteDeadLettersCommand{}
	if n > 0 {
		c.IDs = make([]uint64, n)
		for i := range c.IDs {
			c.IDs[i] = d.uvarint()
		}
	}
	return c, d.finish()
}
