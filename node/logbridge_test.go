package node

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Raft's lines come out in the node's slog format, and a message repeated
// within the window is written once, then once more with the count of
// those left out. (A leader with a peer down wrote ~3 ERROR lines a
// second.)
func TestRaftLogsThroughSlogWithRepeatsHeldBack(t *testing.T) {
	var buf bytes.Buffer
	l := newRaftLogger(slog.New(slog.NewJSONHandler(&buf, nil)), hclog.Info).(*hclogSlog)
	now := time.Unix(0, 0)
	l.limit.now = func() time.Time { return now }
	for range 10 {
		l.Error("failed to contact", "server-id", "2")
		now = now.Add(time.Second)
	}
	l.Debug("below the level")
	if lines := strings.Count(buf.String(), "\n"); lines != 1 || !strings.Contains(buf.String(), `"component":"raft"`) ||
		!strings.Contains(buf.String(), `"server-id":"2"`) || !strings.Contains(buf.String(), `"level":"WARN"`) {
		t.Fatalf("after 10 repeats in 10 s: %d lines\n%s", lines, buf.String())
	}
	now = now.Add(repeatWindow)
	l.Error("failed to contact", "server-id", "2")
	if !strings.Contains(buf.String(), `"repeatsLeftOut":9`) {
		t.Fatalf("the line after the window does not count the 9 left out:\n%s", buf.String())
	}
	l.Info("entering follower state", "follower", raftValue("Node at 127.0.0.1:7400 [Follower]"), "servers", hclog.Fmt("%d servers", 3))
	if !strings.Contains(buf.String(), `"follower":"Node at 127.0.0.1:7400 [Follower]"`) || !strings.Contains(buf.String(), `"servers":"3 servers"`) {
		t.Fatalf("raft's Stringer and Fmt values are not written as text:\n%s", buf.String())
	}
	before := strings.Count(buf.String(), "\n")
	l.Info("state digest", "index", 16384, "digest", "00")
	l.Info("state digest", "index", 32768, "digest", "01")
	if lines := strings.Count(buf.String(), "\n") - before; lines != 2 {
		t.Fatalf("two state digest lines a moment apart: %d written, want both:\n%s", lines, buf.String())
	}
	// Elections are traced through every line, however often they come.
	before = strings.Count(buf.String(), "\n")
	for term := range 5 {
		l.Info("entering leader state", "term", term)
	}
	if lines := strings.Count(buf.String(), "\n") - before; lines != 5 {
		t.Fatalf("five leaderships a moment apart: %d lines written, want all:\n%s", lines, buf.String())
	}
	l.Named("snapshot").Info("snapshot complete")
	if !strings.Contains(buf.String(), `"component":"raft.snapshot"`) {
		t.Fatalf("a named logger's component:\n%s", buf.String())
	}
}

// raftValue is a raft value that prints itself (JSON would write it as {}).
type raftValue string

func (v raftValue) String() string { return string(v) }

// A peer that cannot be reached is a warning, this node's own transport
// closing under a read while it shuts down is not an error; other raft
// errors stay errors.
func TestRaftLevelsOfExpectedFailures(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		args []any
		want string
	}{
		{"failed to heartbeat to", []any{"peer", "127.0.0.1:7401", "error", errors.New("EOF")}, `"level":"WARN"`},
		{"failed to appendEntries to", []any{"peer", "2", "error", errors.New("connection refused")}, `"level":"WARN"`},
		{"failed to decode incoming command", []any{"error", raft.ErrTransportShutdown}, `"level":"INFO"`},
		{"failed to decode incoming command", []any{"error", errors.New("unexpected EOF")}, `"level":"ERROR"`},
		{"failed to take snapshot", []any{"error", errors.New("disk full")}, `"level":"ERROR"`},
	} {
		var buf bytes.Buffer
		newRaftLogger(slog.New(slog.NewJSONHandler(&buf, nil)), hclog.Info).Error(tc.msg, tc.args...)
		if !strings.Contains(buf.String(), tc.want) {
			t.Errorf("%s %v logged as %s, want %s", tc.msg, tc.args, buf.String(), tc.want)
		}
	}
}
