package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/waggle-mq/waggle/tlsconf"
)

func newCertsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "certs", Short: "Certificates for trying TLS out"}
	var out string
	var nodes int
	var hosts []string
	dev := &cobra.Command{
		Use:   "dev",
		Short: "Make a local CA and certificates node-1…node-N (and client) signed by it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if nodes < 1 {
				return fmt.Errorf("--nodes must be at least 1")
			}
			names := []string{"client"}
			for i := 1; i <= nodes; i++ {
				names = append(names, fmt.Sprintf("node-%d", i))
			}
			if err := tlsconf.DevCerts(out, names, hosts); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote ca.pem and %v (with -key.pem keys) to %s; for development only\n", names, out)
			return nil
		},
	}
	dev.Flags().StringVar(&out, "out", "./waggle-certs", "directory to write the PEM files to")
	dev.Flags().IntVar(&nodes, "nodes", 3, "node certificates to make")
	dev.Flags().StringSliceVar(&hosts, "hosts", []string{"127.0.0.1", "::1", "localhost"}, "IP addresses and DNS names the certificates are valid for")
	cmd.AddCommand(dev)
	return cmd
}
