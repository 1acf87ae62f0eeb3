package store

import (
	"encoding/binary"
	"errors"
)

// Request outcomes: what a write sent with a request key (HTTP's
// Idempotency-Key) answered, kept for a window so the same request sent
// again gets the same answer instead of being applied twice.
const (
	familyRequest    byte = 0x1E // key → RequestOutcome
	familyRequestDue byte = 0x1F // expiresAtMs, key → nothing: the pruning order
)

// MaxRequestKeyBytes bounds a request key.
const MaxRequestKeyBytes = 255

// RequestOutcome is the recorded answer of a keyed request.
type RequestOutcome struct {
	// Type is the command type that answered, and BodyHash a digest of
	// what the request asked: a key sent again with another request is
	// refused, not answered with this outcome.
	Type        byte     `json:"type"`
	BodyHash    [32]byte `json:"bodyHash"`
	Answer      []byte   `json:"answer"` // the command's answer, as JSON
	ExpiresAtMs int64    `json:"expiresAtMs"`
	// NotKept marks an answer too large to keep: the request was applied,
	// and a retry learns that much, not the answer.
	NotKept bool `json:"notKept,omitempty"`
}

func requestKey(key string) []byte { return append([]byte{familyRequest}, key...) }

func requestDueKey(expiresAtMs int64, key string) []byte {
	k := binary.BigEndian.AppendUint64([]byte{familyRequestDue}, uint64(expiresAtMs))
	return append(k, key...)
}

// RequestOutcome returns the outcome recorded under key; found is false
// when there is none (expired ones stay until pruned: the caller compares
// ExpiresAtMs with its clock).
func (t *Tx) RequestOutcome(key string) (o RequestOutcome, found bool, err error) {
	b, err := t.get(requestKey(key))
	if errors.Is(err, ErrNotFound) {
		return o, false, nil
	}
	if err != nil {
		return o, false, err
	}
	o, err = decodeJSONRecord[RequestOutcome](b)
	return o, err == nil, err
}

// PutRequestOutcome records o under key, replacing what was there.
func (t *Tx) PutRequestOutcome(key string, o RequestOutcome) error {
	if err := t.set(requestKey(key), encodeJSONRecord(o)); err != nil {
		return err
	}
	return t.set(requestDueKey(o.ExpiresAtMs, key), nil)
}

// PruneRequestOutcomes forgets up to limit outcomes whose window ended at or
// before nowMs, oldest first, and reports how many index entries it
// removed.
func (t *Tx) PruneRequestOutcomes(nowMs int64, limit int) (int, error) {
	due, err := t.dueIndexKeys(familyRequestDue, nowMs, limit)
	if err != nil {
		return 0, err
	}
	for _, k := range due {
		at, key := int64(binary.BigEndian.Uint64(k[1:9])), string(k[9:])
		o, found, err := t.RequestOutcome(key)
		if err != nil {
			return 0, err
		}
		// An outcome recorded again since has a later entry of its own.
		if found && o.ExpiresAtMs == at {
			if err := t.del(requestKey(key)); err != nil {
				return 0, err
			}
		}
		if err := t.del(k); err != nil {
			return 0, err
		}
	}
	return len(due), nil
}
