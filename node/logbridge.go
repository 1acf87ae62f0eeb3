package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Raft (hclog) and badger log through the node's slog logger, so one
// format and one schema come out, and a message repeated faster than once
// per repeatWindow (raft says "failed to contact" several times a second
// while a peer is down) is written once per window, with how many were
// left out.

// repeatWindow is how long a repeated message is held back.
const repeatWindow = 30 * time.Second

// neverHeldBack are messages that are records, each line its own: the
// state digests a node logs are compared across nodes after the fact,
// and a node catching up logs many within seconds; raft's role changes
// and elections are what a divergence is traced back through, and under
// a storm of faults they repeat within seconds too.
var neverHeldBack = map[string]bool{
	"state digest":                                     true,
	"entering leader state":                            true,
	"entering follower state":                          true,
	"entering candidate state":                         true,
	"election won":                                     true,
	"pre-vote successful, starting election":           true,
	"failed to contact quorum of nodes, stepping down": true,
	"appendEntries rejected, sending older logs":       true,
}

// repeatLimiter decides which repeats of a message are written.
type repeatLimiter struct {
	mu   sync.Mutex
	seen map[string]*repeats
	now  func() time.Time
}

type repeats struct {
	first   time.Time
	skipped int
}

func newRepeatLimiter() *repeatLimiter {
	return &repeatLimiter{seen: map[string]*repeats{}, now: time.Now}
}

// allow reports whether msg is written now, and how many of it were held
// back since it last was.
func (r *repeatLimiter) allow(msg string) (ok bool, skipped int) {
	if neverHeldBack[msg] {
		return true, 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	rp := r.seen[msg]
	if rp == nil || now.Sub(rp.first) >= repeatWindow {
		if len(r.seen) >= 1000 { // bounded: forget everything now and then
			r.seen = map[string]*repeats{}
		}
		if rp != nil {
			skipped = rp.skipped
		}
		r.seen[msg] = &repeats{first: now}
		return true, skipped
	}
	rp.skipped++
	return false, 0
}

// hclogSlog is an hclog.Logger writing to slog.
type hclogSlog struct {
	log     *slog.Logger
	name    string
	level   hclog.Level
	implied []any
	limit   *repeatLimiter
}

func newRaftLogger(l *slog.Logger, level hclog.Level) hclog.Logger {
	return &hclogSlog{log: l, name: "raft", level: level, limit: newRepeatLimiter()}
}

func slogLevel(l hclog.Level) slog.Level {
	switch {
	case l <= hclog.Debug:
		return slog.LevelDebug
	case l == hclog.Info:
		return slog.LevelInfo
	case l == hclog.Warn:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (h *hclogSlog) Log(level hclog.Level, msg string, args ...any) {
	level = raftLevel(level, msg, args)
	if level == hclog.Off || level < h.level {
		return
	}
	ok, skipped := h.limit.allow(msg)
	if !ok {
		return
	}
	attrs := append([]any{"component", h.name}, h.implied...)
	attrs = append(attrs, plainValues(args)...)
	if skipped > 0 {
		attrs = append(attrs, "repeatsLeftOut", skipped)
	}
	h.log.Log(context.Background(), slogLevel(level), msg, attrs...)
}

// peerFailures are raft's ERROR messages about one peer that cannot be
// reached: the cluster goes on without it (a peer restarting, stopped or
// being removed), so they are warnings; the repeat limiter keeps them rare.
// A leader also learns it was superseded from a peer ("newer term"), which
// every leadership hand-off causes.
var peerFailures = []string{"failed to heartbeat to", "failed to appendEntries to", "failed to make requestVote RPC",
	"failed to pipeline appendEntries", "failed to get log", "failed to contact", "peer has newer term"}

// raftLevel is the level a raft message is logged at: raft's own, except
// that a peer that cannot be reached is a warning, and this node's
// transport closing under a read while it shuts down is not an error.
func raftLevel(level hclog.Level, msg string, args []any) hclog.Level {
	if level < hclog.Error {
		return level
	}
	for _, p := range peerFailures {
		if strings.HasPrefix(msg, p) {
			return hclog.Warn
		}
	}
	for _, a := range args {
		if err, ok := a.(error); ok && errors.Is(err, raft.ErrTransportShutdown) {
			return hclog.Info
		}
	}
	return level
}

// plainValues turns hclog's argument values into what slog writes well:
// an hclog.Format is formatted, a Stringer or error becomes its text (a
// raft server struct was written as {} in JSON).
func plainValues(args []any) []any {
	out := make([]any, len(args))
	for i, v := range args {
		switch v := v.(type) {
		case hclog.Format:
			if len(v) > 0 {
				if f, ok := v[0].(string); ok {
					out[i] = fmt.Sprintf(f, v[1:]...)
					continue
				}
			}
			out[i] = fmt.Sprint([]any(v)...)
		case fmt.Stringer:
			out[i] = v.String()
		case error:
			out[i] = v.Error()
		default:
			out[i] = v
		}
	}
	return out
}

func (h *hclogSlog) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogSlog) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogSlog) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogSlog) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogSlog) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }
func (h *hclogSlog) IsTrace() bool                 { return h.level <= hclog.Trace }
func (h *hclogSlog) IsDebug() bool                 { return h.level <= hclog.Debug }
func (h *hclogSlog) IsInfo() bool                  { return h.level <= hclog.Info }
func (h *hclogSlog) IsWarn() bool                  { return h.level <= hclog.Warn }
func (h *hclogSlog) IsError() bool                 { return h.level <= hclog.Error }
func (h *hclogSlog) ImpliedArgs() []any            { return h.implied }
func (h *hclogSlog) Name() string                  { return h.name }
func (h *hclogSlog) SetLevel(level hclog.Level)    { h.level = level }
func (h *hclogSlog) GetLevel() hclog.Level         { return h.level }

func (h *hclogSlog) With(args ...any) hclog.Logger {
	c := *h
	c.implied = append(append([]any(nil), h.implied...), args...)
	return &c
}

func (h *hclogSlog) Named(name string) hclog.Logger {
	c := *h
	c.name = h.name + "." + name
	return &c
}

func (h *hclogSlog) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	return &c
}

func (h *hclogSlog) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hclogSlog) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		h.Info(strings.TrimSpace(string(p)))
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// badgerSlog is badger's logger writing to slog: warnings and errors only
// (its info lines are per-compaction chatter).
type badgerSlog struct {
	log   *slog.Logger
	limit *repeatLimiter
}

func newBadgerLogger(l *slog.Logger) *badgerSlog {
	return &badgerSlog{log: l, limit: newRepeatLimiter()}
}

func (b *badgerSlog) write(level slog.Level, format string, args ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, args...))
	if ok, skipped := b.limit.allow(format); ok {
		attrs := []any{"component", "badger"}
		if skipped > 0 {
			attrs = append(attrs, "repeatsLeftOut", skipped)
		}
		b.log.Log(context.Background(), level, msg, attrs...)
	}
}

func (b *badgerSlog) Errorf(format string, args ...any)   { b.write(slog.LevelError, format, args...) }
func (b *badgerSlog) Warningf(format string, args ...any) { b.write(slog.LevelWarn, format, args...) }
func (b *badgerSlog) Infof(string, ...any)                {}
func (b *badgerSlog) Debugf(string, ...any)               {}
