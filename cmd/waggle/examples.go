package main

import "github.com/spf13/cobra"

// examples are the commands' --help examples, by command path; every
// runnable command has one (TestEveryCommandHasAnExample).
var examples = map[string]string{
	"waggle backup":          "  waggle backup --server 10.0.0.1:6632 --out /backups/waggle-$(date +%F).backup",
	"waggle bench http":      "  waggle bench http --push --messages 500000 --clients 16 --batch 100",
	"waggle bench kafka":     "  waggle bench kafka --produce --records 2000000 --size 100 --acks all --brokers 127.0.0.1:9092\n  waggle bench kafka --produce --consume --records 1000000   # then read them back",
	"waggle certs dev":       "  waggle certs dev --out certs --nodes 3",
	"waggle cluster add":     "  waggle serve --node-id 4 --join ... &   # on the new node first\n  waggle cluster add 4 10.0.0.4:7400",
	"waggle cluster remove":  "  waggle cluster remove 3",
	"waggle cluster status":  "  waggle cluster status\n  waggle cluster status -o json | jq '.members[] | select(.state != \"up\")'",
	"waggle dlq list":        "  waggle dlq list --queue orders",
	"waggle dlq replay":      "  waggle dlq list --queue orders -o json | jq -r '.messages[].id'\n  waggle dlq replay 42",
	"waggle dlq delete":      "  waggle dlq delete 42 43",
	"waggle dlq purge":       "  waggle dlq purge --queue orders\n  waggle dlq purge --all",
	"waggle group delete":    "  waggle group delete billing",
	"waggle group describe":  "  waggle group describe billing",
	"waggle group list":      "  waggle group list",
	"waggle group seek":      "  waggle group seek billing orders --offset 0\n  waggle group seek billing orders --to-end",
	"waggle kv delete":       "  waggle kv delete config feature-x",
	"waggle kv get":          "  waggle kv get config feature-x",
	"waggle kv put":          "  waggle kv put config feature-x '{\"on\":true}' --forever\n  waggle kv put sessions u-42 '\"token\"' --ttl 3600",
	"waggle pop":             "  waggle pop orders --group billing --batch 10\n  waggle pop orders --group billing --wait 30s --ack",
	"waggle push":            "  waggle push orders --transaction-id order-1 '{\"amount\":12}'\n  printf 'one\\ntwo\\n' | waggle push orders -o json   # ids minted, printed",
	"waggle queue configure": "  waggle queue configure orders --lease-time 30 --retry-limit 5",
	"waggle queue create":    "  waggle queue create orders --dedup-window 3600 --retry-limit 3",
	"waggle queue delete":    "  waggle queue delete orders",
	"waggle queue describe":  "  waggle queue describe orders",
	"waggle queue list":      "  waggle queue list -o json",
	"waggle restore":         "  waggle restore --in waggle.backup --data-dir /var/lib/waggle --node-id 1 --raft-addr 10.0.0.1:7400",
	"waggle serve":           "  waggle serve --data-dir ./waggle-data\n  waggle serve --node-id 1 --data-dir d1 --peers 1=10.0.0.1:7400,2=10.0.0.2:7400,3=10.0.0.3:7400",
	"waggle token create":    "  waggle token create ci --role read-write --queues 'orders*'",
	"waggle token delete":    "  waggle token delete ci",
	"waggle token list":      "  waggle token list",
	"waggle topic create":    "  waggle topic create events --partitions 3",
	"waggle topic delete":    "  waggle topic delete events",
	"waggle topic describe":  "  waggle topic describe events",
	"waggle topic list":      "  waggle topic list",
	"waggle user add":        "  waggle user add alice --role read-only --queues 'events*'   # asks for the password",
	"waggle user delete":     "  waggle user delete alice",
	"waggle user list":       "  waggle user list",
	"waggle verify":          "  waggle verify --data-dir /var/lib/waggle",
	"waggle version":         "  waggle version",
}

// addExamples sets the examples on root's command tree (a command's own
// Example, where it has one, stays).
func addExamples(c *cobra.Command) {
	if c.Example == "" {
		c.Example = examples[c.CommandPath()]
	}
	for _, sub := range c.Commands() {
		addExamples(sub)
	}
}
