package main

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/waggle-mq/waggle/client"
)

// errCheckUnfinished is cluster check's answer when a member could not
// hash its state, or holds no check at the index asked.
var errCheckUnfinished = errors.New("the state check did not compare every member")

// newClusterCheckCmd makes `waggle cluster check`: every member hashes its
// whole state at the same raft index, and the hashes are compared.
func newClusterCheckCmd(o *clientOptions) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{Use: "check", Short: "Compare the members' whole states: each hashes every key and byte of data at one raft index",
		Long: "Asks every member to hash its whole state (every key and value, every byte of message data) right after\n" +
			"applying the same raft entry, one per raft group, waits for them and compares the hashes. Unlike the state\n" +
			"digests that cluster status compares, it also finds data lost or damaged after it was written.\n" +
			"Each member reads its whole state, about as long as copying it. Exits 5 when two members hold different\n" +
			"states, 1 when a member could not be compared.",
		Example: "  waggle cluster check --server 10.0.0.1:6632\n  waggle cluster check -o json --timeout 5m",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl := o.client()
			var asked client.CheckIndexes
			if _, err := cl.Call(http.MethodPost, "/api/v1/cluster/checks", nil, &asked); err != nil {
				return err
			}
			deadline := time.Now().Add(timeout)
			for {
				var status client.Cluster
				if _, err := cl.Call(http.MethodGet, "/api/v1/cluster", nil, &status); err != nil {
					return err
				}
				outcomes, done := checkOutcomes(asked, status.Checks)
				if done {
					return reportChecks(c, o, outcomes)
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("the members did not finish the state check within %v (see `waggle cluster status -o json`, stateCheck)", timeout)
				}
				time.Sleep(500 * time.Millisecond)
			}
		}}
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "how long to wait for every member's hash")
	return cmd
}

// checkOutcomes picks the comparison of each group's check as asked;
// done once none is pending.
func checkOutcomes(asked client.CheckIndexes, checks []client.CheckComparison) ([]client.CheckComparison, bool) {
	var out []client.CheckComparison
	for _, a := range asked.Groups {
		found := client.CheckComparison{Group: a.Group, Index: a.Index, State: "pending"}
		for _, ch := range checks {
			switch {
			case ch.Group != a.Group:
			case ch.Index == a.Index:
				found = ch
			case ch.Index > a.Index:
				found.State, found.Error = "incomplete", fmt.Sprintf("a check at index %d was asked for since", ch.Index)
			}
		}
		if found.State == "pending" {
			return nil, false
		}
		out = append(out, found)
	}
	return out, true
}

// reportChecks prints one line per raft group and answers the exit.
func reportChecks(c *cobra.Command, o *clientOptions, outcomes []client.CheckComparison) error {
	err := o.print(c, outcomes, func(*tableWriter) {
		for _, ch := range outcomes {
			nodes := make([]string, len(ch.Members))
			for i, m := range ch.Members {
				nodes[i] = strconv.Itoa(m)
			}
			w := c.OutOrStdout()
			switch ch.State {
			case "same":
				fmt.Fprintf(w, "raft group %d at index %d: the same state on nodes %s (hash %s)\n", ch.Group, ch.Index, strings.Join(nodes, ", "), ch.Hash)
			case "diverged":
				fmt.Fprintf(w, "raft group %d at index %d: DIVERGED: nodes %s hold different states (a bug: please report it)\n", ch.Group, ch.Index, strings.Join(nodes, " and "))
			case "failed":
				fmt.Fprintf(w, "raft group %d at index %d: node %s could not hash its state: %s\n", ch.Group, ch.Index, strings.Join(nodes, ""), ch.Error)
			default:
				why := ch.Error
				if why == "" {
					why = "a member holds no check at this index (it was down when asked)"
				}
				fmt.Fprintf(w, "raft group %d at index %d: not compared: %s\n", ch.Group, ch.Index, why)
			}
		}
	})
	if err != nil {
		return err
	}
	for _, ch := range outcomes {
		if ch.State == "diverged" {
			return errReplicasDiverged
		}
	}
	for _, ch := range outcomes {
		if ch.State != "same" {
			return errCheckUnfinished
		}
	}
	return nil
}
