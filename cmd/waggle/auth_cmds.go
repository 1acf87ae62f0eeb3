package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// principalInfo is a user or token as the API lists it.
type principalInfo struct {
	Name   string   `json:"name"`
	Role   string   `json:"role"`
	Queues []string `json:"queues"`
	Groups []string `json:"groups"`
	Token  string   `json:"token,omitempty"`
}

// grantFlags are the flags naming a principal's role and name patterns.
type grantFlags struct {
	role           string
	queues, groups []string
}

func (g *grantFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&g.role, "role", "read-write", "admin, read-write, read-only or write-only")
	cmd.Flags().StringSliceVar(&g.queues, "queues", nil, "queue/topic name patterns the role applies to (default: all)")
	cmd.Flags().StringSliceVar(&g.groups, "groups", nil, "consumer group name patterns the role applies to (default: all)")
}

func (g *grantFlags) body(name string) map[string]any {
	return map[string]any{"name": name, "role": g.role, "queues": g.queues, "groups": g.groups}
}

func printPrincipals(o *clientOptions, c *cobra.Command, ps []principalInfo) error {
	return o.print(c, ps, func(t *tableWriter) {
		t.row("NAME", "ROLE", "QUEUES", "GROUPS")
		for _, p := range ps {
			t.row(p.Name, p.Role, orAll(p.Queues), orAll(p.Groups))
		}
	})
}

func orAll(patterns []string) string {
	if len(patterns) == 0 {
		return "*"
	}
	return strings.Join(patterns, ",")
}

// newUserCmd manages Kafka SASL users (SCRAM-SHA-256/512 and PLAIN).
func newUserCmd(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "user", Short: "Kafka SASL users (stored salted in the replicated state)"}
	var g grantFlags
	var passwordFile string
	add := &cobra.Command{Use: "add NAME", Short: "Create or replace a user", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			password := os.Getenv("WAGGLE_USER_PASSWORD")
			if passwordFile != "" {
				raw, err := os.ReadFile(passwordFile)
				if err != nil {
					return err
				}
				password = strings.TrimRight(string(raw), "\r\n")
			}
			if password == "" {
				return fmt.Errorf("give the password with --password-file or WAGGLE_USER_PASSWORD")
			}
			body := g.body(args[0])
			body["password"] = password
			var p principalInfo
			if _, err := o.client().Call(http.MethodPost, "/api/v1/auth/users", body, &p); err != nil {
				return err
			}
			return printPrincipals(o, c, []principalInfo{p})
		}}
	g.add(add)
	add.Flags().StringVar(&passwordFile, "password-file", "", "file holding the password (or set WAGGLE_USER_PASSWORD)")
	del := &cobra.Command{Use: "delete NAME", Short: "Delete a user", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			_, err := o.client().Call(http.MethodDelete, "/api/v1/auth/users/"+url.PathEscape(args[0]), nil, nil)
			return err
		}}
	list := &cobra.Command{Use: "list", Short: "List users", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var out struct{ Users []principalInfo }
			if _, err := o.client().Call(http.MethodGet, "/api/v1/auth/users", nil, &out); err != nil {
				return err
			}
			return printPrincipals(o, c, out.Users)
		}}
	cmd.AddCommand(add, del, list)
	return cmd
}

// newTokenCmd manages HTTP bearer tokens.
func newTokenCmd(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "HTTP bearer tokens (stored hashed in the replicated state)"}
	var g grantFlags
	create := &cobra.Command{Use: "create NAME", Short: "Make a token (printed once; a token of the same name is replaced)", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var p principalInfo
			if _, err := o.client().Call(http.MethodPost, "/api/v1/auth/tokens", g.body(args[0]), &p); err != nil {
				return err
			}
			if o.output == "json" {
				return o.print(c, p, nil)
			}
			fmt.Fprintln(c.OutOrStdout(), p.Token)
			return nil
		}}
	g.add(create)
	del := &cobra.Command{Use: "delete NAME", Short: "Revoke a token", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			_, err := o.client().Call(http.MethodDelete, "/api/v1/auth/tokens/"+url.PathEscape(args[0]), nil, nil)
			return err
		}}
	list := &cobra.Command{Use: "list", Short: "List tokens (names and grants, never the tokens)", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var out struct{ Tokens []principalInfo }
			if _, err := o.client().Call(http.MethodGet, "/api/v1/auth/tokens", nil, &out); err != nil {
				return err
			}
			return printPrincipals(o, c, out.Tokens)
		}}
	cmd.AddCommand(create, del, list)
	return cmd
}
