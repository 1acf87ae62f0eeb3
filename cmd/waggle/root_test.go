package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// flagCmd is a command with two flags that records their values on run.
func flagCmd(got *[2]string) *cobra.Command {
	var a, b string
	cmd := &cobra.Command{
		Use: "x",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd.Flags()); err != nil {
				return err
			}
			*got = [2]string{a, b}
			return nil
		},
	}
	cmd.Flags().StringVar(&a, "http-addr", "default-a", "")
	cmd.Flags().StringVar(&b, "data-dir", "default-b", "")
	return cmd
}

func TestEnvironmentSetsUnsetFlagsOnly(t *testing.T) {
	t.Setenv("WAGGLE_HTTP_ADDR", "from-env")
	t.Setenv("WAGGLE_DATA_DIR", "env-dir")
	var got [2]string
	cmd := flagCmd(&got)
	cmd.SetArgs([]string{"--data-dir", "flag-dir"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got != [2]string{"from-env", "flag-dir"} {
		t.Fatalf("got %v; want the env value for the unset flag and the flag value for the set one", got)
	}
}

func TestBadEnvironmentValueIsAnError(t *testing.T) {
	t.Setenv("WAGGLE_NODE_ID", "not-a-number")
	cmd := newServeCmd()
	cmd.SetArgs([]string{})
	if err := cmd.Execute(); err == nil {
		t.Fatal("serve started with WAGGLE_NODE_ID=not-a-number")
	}
}

// Every command a user can run shows an example in --help, and the
// example table names no command that is gone.
func TestEveryCommandHasAnExample(t *testing.T) {
	root := newRootCmd()
	used := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && !c.Hidden && c.Name() != "help" && !strings.HasPrefix(c.CommandPath(), "waggle completion") {
			if c.Example == "" {
				t.Errorf("%s has no example", c.CommandPath())
			}
		}
		if _, ok := examples[c.CommandPath()]; ok {
			used[c.CommandPath()] = true
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for path := range examples {
		if !used[path] {
			t.Errorf("the example of %q names no command", path)
		}
	}
}
