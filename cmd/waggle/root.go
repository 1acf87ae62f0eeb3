package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "waggle",
		Short:         "A replicated message broker: Kafka wire protocol and an idempotent HTTP queue",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Flags left unset on the command line come from WAGGLE_<NAME>.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd.InheritedFlags()); err != nil {
				return err
			}
			return bindEnv(cmd.LocalFlags())
		},
	}
	o := &clientOptions{}
	o.addFlags(root)
	root.AddCommand(newServeCmd(), newVerifyCmd(), newCertsCmd(), newVersionCmd(), newQueueCmd(o), newTopicCmd(o), newPushCmd(o), newPopCmd(o), newAckCmd(o),
		newKVCmd(o), newGroupCmd(o), newClusterCmd(o), newDLQCmd(o), newBenchCmd(o),
		newUserCmd(o), newTokenCmd(o), newBackupCmd(o), newRestoreCmd())
	addExamples(root)
	return root
}

// bindEnv sets every flag the command line left unset from WAGGLE_<NAME>,
// where NAME is the flag's name upper-cased with '-' as '_'.
func bindEnv(flags *pflag.FlagSet) error {
	var err error
	flags.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		name := "WAGGLE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if serr := f.Value.Set(v); serr != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, serr)
			}
		}
	})
	return err
}
