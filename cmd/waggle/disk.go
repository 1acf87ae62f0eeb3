package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/waggle-mq/waggle/raftgroups"
	"github.com/waggle-mq/waggle/raftnode"
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

// diskUsage is the bytes in use and the size of dir's file system, as df
// counts them (used includes the blocks reserved for root).
func diskUsage(dir string) (used, total uint64, err error) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return 0, 0, err
	}
	total = fs.Blocks * uint64(fs.Bsize)
	return total - fs.Bfree*uint64(fs.Bsize), total, nil
}

// checkFreeSpace reports an error when dir has less than min bytes free.
func checkFreeSpace(dir string, min uint64) error {
	free, err := freeBytes(dir)
	if err != nil {
		return fmt.Errorf("free space of %s: %w", dir, err)
	}
	if free < min {
		return diskNearlyFull(dir, free, min)
	}
	return nil
}

func diskNearlyFull(dir string, free, min uint64) error {
	return fmt.Errorf("disk nearly full: %d MiB free in %s, below --min-free-disk-mib %d (no space left on device soon); free some space and start again",
		free>>20, dir, min>>20)
}

// watchFreeSpace checks dir every interval and tells full whether it has
// less than reserve bytes free, so writes that add data are refused while
// reads, acks, deletes and retention go on (the operator frees space
// without a restart). Below min bytes, or when dir is gone (deleted or
// unmounted under the node: nothing written from then on would last), it
// sends one error and returns: the node stops. A reserve or min of 0 is
// off.
func watchFreeSpace(ctx context.Context, dir string, min, reserve uint64, interval time.Duration, full func(bool), log *slog.Logger) <-chan error {
	low := make(chan error, 1)
	wasFull := false
	check := func() bool {
		free, err := freeBytes(dir)
		if errors.Is(err, fs.ErrNotExist) {
			low <- fmt.Errorf("the data directory %s is gone (deleted or unmounted under the running node): writes would be lost; restore it or repair the node from its peers", dir)
			return false
		}
		if err != nil {
			log.Warn("free space unknown", "dir", dir, "err", err)
			return true
		}
		if min > 0 && free < min {
			low <- diskNearlyFull(dir, free, min)
			return false
		}
		isFull := reserve > 0 && free < reserve
		full(isFull)
		if isFull != wasFull {
			wasFull = isFull
			if isFull {
				log.Error("storage full: refusing writes that add data until space is freed", "dir", dir,
					"free_mib", free>>20, "storage_min_free_mib", reserve>>20)
			} else {
				log.Info("storage no longer full: accepting writes", "dir", dir, "free_mib", free>>20)
			}
		}
		return true
	}
	if !check() {
		return low
	}
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if !check() {
					return
				}
			}
		}
	}()
	return low
}

// newVerifyCmd checks a stopped node's data directory, the check every
// node runs on itself before it starts. A directory that is missing or
// holds no waggle data fails the check (a backup check with a typo must
// not pass); serve passes the hidden --allow-new, for which that is a new
// node.
func newVerifyCmd() *cobra.Command {
	var dir string
	var allowNew, atStart bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check a stopped node's store, raft log and snapshots for damage",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			verify := raftnode.VerifyDataDir
			if atStart {
				verify = raftnode.VerifyDataDirAtStart
			}
			err := verify(dir)
			switch {
			case errors.Is(err, raftnode.ErrNoData) && allowNew:
				fmt.Fprintln(cmd.OutOrStdout(), "ok (new):", dir)
				return nil
			case errors.Is(err, raftnode.ErrNoData):
				return fmt.Errorf("nothing to verify: %w", err)
			case err != nil:
				return err
			}
			if atStart { // serve checks each group's directory on its own
				fmt.Fprintln(cmd.OutOrStdout(), "ok:", dir)
				return nil
			}
			// Each data group has a store and raft log of its own.
			groups, err := raftgroups.Recorded(dir)
			if err != nil {
				return err
			}
			for g := uint32(1); g < uint32(groups); g++ {
				err := verify(raftgroups.Dir(dir, g))
				if err != nil && !errors.Is(err, raftnode.ErrNoData) { // a group never started holds nothing
					return fmt.Errorf("raft group %d: %w", g, err)
				}
			}
			if groups > 1 {
				fmt.Fprintf(cmd.OutOrStdout(), "ok: %s (%d raft groups)\n", dir, groups)
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ok:", dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "data-dir", "./waggle-data", "the node's data directory")
	cmd.Flags().BoolVar(&allowNew, "allow-new", false, "a missing or empty directory passes (serve's start-up check)")
	cmd.Flags().MarkHidden("allow-new")
	cmd.Flags().BoolVar(&atStart, "at-start", false, "check what a start needs without reading the data (serve's start-up check)")
	cmd.Flags().MarkHidden("at-start")
	return cmd
}

// verifyDataDir runs `waggle verify` in a child process: a library that
// meets a damaged file may panic on a goroutine of its own or fault on a
// memory-mapped page, and that must end the check, not this node. The
// child's exit code tells a directory in use (exitInUse) or one this
// process may not read or write (exitUnreadable) from damage, which is any
// other failure; failing to run it is none of these.
var verifyDataDir = func(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot run the start-up check: %w", err)
	}
	check := exec.Command(self, "verify", "--allow-new", "--at-start", "--data-dir", dir)
	check.SysProcAttr = dieWithParent() // a killed node must leave no check holding its files
	out, err := check.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit) && exit.ExitCode() == exitInUse:
		return &refusal{msg: childMessage(out), kind: raftnode.ErrDataDirInUse}
	case errors.As(err, &exit) && exit.ExitCode() == exitUnreadable:
		return &refusal{msg: childMessage(out), kind: raftnode.ErrDataDirUnreadable}
	case errors.As(err, &exit):
		return &damageError{detail: firstLines(string(out), 12)}
	default:
		return fmt.Errorf("cannot run the start-up check: %w", err)
	}
}

// Exit codes of waggle (sysexits.h) that tell a start-up check's parent,
// or an operator's script, a refusal that is not damage.
const (
	exitInUse      = 75 // EX_TEMPFAIL: another process holds the data directory
	exitUnreadable = 77 // EX_NOPERM: the data directory cannot be read or written
	exitOnceLost   = 3  // kv once: another caller holds the marker
	exitNoLeader   = 4  // cluster status: the node asked knows no leader
)

// errNoLeader is cluster status's answer when the node asked knows no
// leader: the table is printed, and scripts see exit code 4.
var errNoLeader = errors.New("no leader: the cluster has lost its quorum, or the node asked is cut off from it or not a member (writes are refused until a majority of voters is back)")

// exitCode is the process's exit code for the error a command returned.
func exitCode(err error) int {
	switch {
	case errors.Is(err, raftnode.ErrDataDirInUse):
		return exitInUse
	case errors.Is(err, raftnode.ErrDataDirUnreadable):
		return exitUnreadable
	case errors.Is(err, errOnceLost):
		return exitOnceLost
	case errors.Is(err, errNoLeader):
		return exitNoLeader
	default:
		return 1
	}
}

// refusal is a start-up check's answer that is not damage: the child's
// own words, matching kind (ErrDataDirInUse or ErrDataDirUnreadable) for
// errors.Is.
type refusal struct {
	msg  string
	kind error
}

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return e.kind }

// childMessage is the start of a check's output without the "waggle: "
// its main put in front (the parent's main puts its own).
func childMessage(out []byte) string {
	return strings.TrimPrefix(firstLines(string(out), 3), "waggle: ")
}

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
