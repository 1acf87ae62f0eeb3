package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/waggle-mq/waggle/node"
	"github.com/waggle-mq/waggle/raftgroups"
	"github.com/waggle-mq/waggle/raftnode"
)

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
// process may not read or write (exitUnreadable) from damage
// (node.DamageError), which is any other failure; failing to run it is
// none of these.
func verifyDataDir(dir string) error {
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
		return &node.DamageError{Detail: firstLines(string(out), 12)}
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
	exitDiverged   = 5  // cluster status, cluster check: two members hold different states
)

// errNoLeader is cluster status's answer when the node asked knows no
// leader: the table is printed, and scripts see exit code 4.
var errNoLeader = errors.New("no leader: the cluster has lost its quorum, or the node asked is cut off from it or not a member (writes are refused until a majority of voters is back)")

// errReplicasDiverged is cluster status's answer when two members'
// state digests disagree: the table is printed, and scripts see exit
// code 5.
var errReplicasDiverged = errors.New("replicas diverged: two members hold different states (a bug: please report it, with both members' logs)")

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
	case errors.Is(err, errReplicasDiverged):
		return exitDiverged
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

// firstLines keeps the start of a child's output: a panic's reason is at
// the top, its stack below.
func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}
