package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/waggle-mq/waggle/command"
)

// RequestKey names a client's request for keyed apply: its
// Idempotency-Key and a digest of what it asked. A write carrying one is
// applied at most once within the request window; the same key sent again
// gets the first answer (see command.KeyedCommand).
type RequestKey struct {
	Key      string
	BodyHash [32]byte
}

// DefaultRequestWindow is how long a keyed request's answer is kept.
const DefaultRequestWindow = 10 * time.Minute

// ErrKeyReused is a request key sent again with another request within its
// window: nothing was applied.
var ErrKeyReused = errors.New("this Idempotency-Key was used for another request")

// ErrAnswerNotKept is a keyed request sent again whose first attempt was
// applied but answered more than the 4 MiB kept: it is not applied again,
// and its answer cannot be given.
var ErrAnswerNotKept = errors.New("this Idempotency-Key's request was applied; its answer was too large to keep, so it cannot be given again")

type requestKeyCtx struct{}

// WithRequestKey returns ctx carrying k; the writes that take a context
// apply their command keyed by it.
func WithRequestKey(ctx context.Context, k RequestKey) context.Context {
	return context.WithValue(ctx, requestKeyCtx{}, k)
}

// KeyedWrites reports whether the cluster's log format carries keyed
// writes (every member reads them); before, a keyed write answers
// ErrUpgradeInProgress.
func (s *Service) KeyedWrites() bool { return s.node.FSM.LogFormat() >= command.LogFormat2 }

// RequestKeyOf returns the request key ctx carries, if any.
func RequestKeyOf(ctx context.Context) (RequestKey, bool) {
	k, ok := ctx.Value(requestKeyCtx{}).(RequestKey)
	return k, ok
}

// applyFor applies cmd, keyed when ctx carries a request key (the first
// answer is given again to a retry under the same key), else as apply.
func applyFor[R any](ctx context.Context, s *Service, cmd command.Answering[R]) (R, error) {
	k, keyed := RequestKeyOf(ctx)
	if !keyed {
		return apply(s, cmd)
	}
	var zero R
	inner, err := command.EncodeAs(cmd, s.node.FSM.LogFormat())
	if err != nil {
		return zero, fmt.Errorf("%w: %w", ErrUpgradeInProgress, err)
	}
	window := s.RequestWindow
	if window <= 0 {
		window = DefaultRequestWindow
	}
	res, err := apply(s, &command.KeyedCommand{NowMs: s.now().UnixMilli(), Key: k.Key, BodyHash: k.BodyHash,
		WindowMs: window.Milliseconds(), Inner: inner})
	if err != nil {
		return zero, err
	}
	if res.Mismatch {
		return zero, fmt.Errorf("%w (within %v of its first use)", ErrKeyReused, window)
	}
	if res.NotKept {
		return zero, ErrAnswerNotKept
	}
	r, ok := res.Answer.(R)
	if !ok && res.Answer != nil {
		return zero, fmt.Errorf("broker: keyed %T answered %T, want %T", cmd, res.Answer, zero)
	}
	return r, nil
}

// requestIDSpace is the UUID name space of ids minted for keyed requests.
var requestIDSpace = uuid.MustParse("6f1d3c2e-5b8a-4f0e-9c47-2a1b3d4e5f60")

// mintID returns a new id for what a request names (a transaction, a
// pushed item without a transactionId): random, or for a keyed request
// derived from its key, so a retry under the key answers the same ids as
// the first attempt.
func mintID(ctx context.Context, what string) uuid.UUID {
	if k, keyed := RequestKeyOf(ctx); keyed {
		return uuid.NewSHA1(requestIDSpace, []byte(k.Key+"\x00"+what))
	}
	return uuid.New()
}
