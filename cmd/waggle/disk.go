package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/waggle-mq/waggle/raftfsm"
)

// Badger writes its memtable through a memory map: when the disk fills up
// under it, the page fault kills the process with SIGBUS, mid-write. Its
// log is checksummed, so a restart recovers, but an operator deserves a
// clear reason, so a node stops by itself while its data directory still
// has --min-free-disk-mib left, and will not start below it.

// freeBytes is the space left to unprivileged writers on dir's file system.
func freeBytes(dir string) (uint64, error) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return 0, err
	}
	return fs.Bavail * uint64(fs.Bsize), nil
}

// checkFreeSpace reports an error when dir has less than min bytes free.
func checkFreeSpace(dir string, min uint64) error {
	free, err := freeBytes(dir)
	if err != nil {
		return fmt.Errorf("free space of %s: %w", dir, err)
	}
	if free < min {
		return fmt.Errorf("disk nearly full: %d MiB free in %s, below --min-free-disk-mib %d (no space left on device soon); free some space and start again",
			free>>20, dir, min>>20)
	}
	return nil
}

// watchFreeSpace checks dir every interval and sends one error when its
// free space drops below min.
func watchFreeSpace(ctx context.Context, dir string, min uint64, interval time.Duration) <-chan error {
	low := make(chan error, 1)
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := checkFreeSpace(dir, min); err != nil {
					low <- err
					return
				}
			}
		}
	}()
	return low
}

// newVerifyCmd checks a stopped node's data directory, the check every
// node runs on itself before it starts.
func newVerifyCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check a stopped node's store, raft log and snapshots for damage",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := raftfsm.VerifyDataDir(dir); errors.Is(err, raftfsm.ErrDataDirInUse) {
				fmt.Fprintln(cmd.ErrOrStderr(), "waggle:", err)
				os.Exit(exitInUse)
			} else if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ok:", dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "data-dir", "./waggle-data", "the node's data directory")
	return cmd
}

// verifyDataDir runs `waggle verify` in a child process: a library that
// meets a damaged file may panic on a goroutine of its own or fault on a
// memory-mapped page, and that must end the check, not this node. Any
// failure of the child counts as damage; failing to run it does not.
var verifyDataDir = func(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot run the start-up check: %w", err)
	}
	check := exec.Command(self, "verify", "--data-dir", dir)
	check.SysProcAttr = dieWithParent() // a killed node must leave no check holding its files
	out, err := check.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit) && exit.ExitCode() == exitInUse:
		return fmt.Errorf("%s: %w", firstLines(string(out), 3), raftfsm.ErrDataDirInUse)
	case errors.As(err, &exit):
		return &damageError{detail: firstLines(string(out), 12)}
	default:
		return fmt.Errorf("cannot run the start-up check: %w", err)
	}
}

// exitInUse is the check's exit code for a data directory another process
// holds (EX_TEMPFAIL): not damage.
const exitInUse = 75

// damageError is what the start-up check found.
type damageError struct{ detail string }

func (e *damageError) Error() string { return "damaged: " + e.detail }

// firstLines keeps the start of a child's output: a panic's reason is at
// the top, its stack below.
func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}
