package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waggle-mq/waggle/raftnode"
)

// runVerify runs `waggle verify` with args as the root command would and
// returns its output and error.
func runVerify(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"verify"}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// Regression: `waggle verify --data-dir` on a path that does not exist (or
// an empty folder) printed "ok:" and exited 0, so a backup check with a
// typo passed. It is an error now, with a non-zero exit code.
func TestVerifyMissingOrEmptyDataDirFails(t *testing.T) {
	empty := t.TempDir()
	for _, dir := range []string{filepath.Join(empty, "typo"), empty} {
		out, err := runVerify(t, "--data-dir", dir)
		if err == nil || strings.Contains(out, "ok") {
			t.Fatalf("verify %s: err %v, output %q; want an error", dir, err, out)
		}
		if !errors.Is(err, raftnode.ErrNoData) || !strings.Contains(err.Error(), "nothing to verify") {
			t.Errorf("verify %s: %v; want a clear 'nothing to verify' error", dir, err)
		}
		if exitCode(err) == 0 {
			t.Errorf("verify %s exits 0", dir)
		}
		// serve's own check on a new node passes the same directory.
		if _, err := runVerify(t, "--allow-new", "--data-dir", dir); err != nil {
			t.Errorf("serve's start-up check on new directory %s: %v", dir, err)
		}
	}
}

// A refusal that is not damage leaves with its own exit code, which the
// start-up check's parent reads; damage and other errors exit 1.
func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("store: %w", raftnode.ErrDataDirInUse), exitInUse},
		{fmt.Errorf("store: %w", raftnode.ErrDataDirUnreadable), exitUnreadable},
		{fmt.Errorf("nothing to verify: %w", raftnode.ErrNoData), 1},
		{errors.New("store at x: checksum mismatch"), 1},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
