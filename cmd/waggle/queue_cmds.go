package main

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/waggle-mq/waggle/client"
)

// queueOptionFlags are the settable queue options; only flags given on the
// command line are sent (options merge on the server).
type queueOptionFlags struct {
	dedupWindow, leaseTime, delay int64
	retryLimit, partitions        int32
	dlq                           bool
}

func (f *queueOptionFlags) add(cmd *cobra.Command, topic bool) {
	fl := cmd.Flags()
	fl.Int32Var(&f.partitions, "partitions", 1, "Kafka partitions (only grows)")
	if topic {
		return
	}
	fl.Int64Var(&f.dedupWindow, "dedup-window", 3600, "dedup window in seconds (0 turns it off)")
	fl.Int64Var(&f.leaseTime, "lease-time", 60, "lease time of a pop in seconds")
	fl.Int32Var(&f.retryLimit, "retry-limit", 3, "failed acks before a message is dead-lettered")
	fl.BoolVar(&f.dlq, "dead-letter-queue", true, "keep messages past the retry limit as dead letters")
	fl.Int64Var(&f.delay, "delayed-processing", 0, "seconds a pushed message waits before it can be popped")
}

func (f *queueOptionFlags) options(cmd *cobra.Command) map[string]any {
	opts := map[string]any{}
	set := func(flag, option string, v any) {
		if cmd.Flags().Changed(flag) {
			opts[option] = v
		}
	}
	set("dedup-window", "dedupWindowSeconds", f.dedupWindow)
	set("lease-time", "leaseTime", f.leaseTime)
	set("retry-limit", "retryLimit", f.retryLimit)
	set("dead-letter-queue", "deadLetterQueue", f.dlq)
	set("delayed-processing", "delayedProcessing", f.delay)
	set("partitions", "partitions", f.partitions)
	return opts
}

func printQueue(o *clientOptions, cmd *cobra.Command, q client.Queue) error {
	return o.print(cmd, q, func(t *tableWriter) {
		queueHeader(t)
		queueRow(t, q)
		if len(q.Partitions) > 0 {
			t.row("")
			t.row("PARTITION", "NEXT OFFSET", "MESSAGES")
			for _, p := range q.Partitions {
				t.row(p.Name, p.NextOffset, p.Messages)
			}
		}
	})
}

// queueHeader and queueRow are the one layout list and describe share.
func queueHeader(t *tableWriter) {
	t.row("NAME", "PARTITIONS", "KAFKA PARTITIONS", "MESSAGES", "DEDUP WINDOW", "LEASE", "RETRIES")
}

func queueRow(t *tableWriter, q client.Queue) {
	t.row(q.Name, len(q.Partitions), q.Options.Partitions, q.Messages(), q.Options.DedupWindowSeconds, q.Options.LeaseTime, q.Options.RetryLimit)
}

// listQueues lists every queue: Kafka clients see each one as a topic, so
// queue list and topic list show the same.
func listQueues(o *clientOptions, cmd *cobra.Command) error {
	var out struct{ Queues []client.Queue }
	if _, err := o.client().Call(http.MethodGet, "/api/v1/resources/queues", nil, &out); err != nil {
		return err
	}
	qs := out.Queues
	if qs == nil {
		qs = []client.Queue{}
	}
	return o.print(cmd, qs, func(t *tableWriter) {
		queueHeader(t)
		for _, q := range qs {
			queueRow(t, q)
		}
	})
}

func configureQueue(o *clientOptions, cmd *cobra.Command, name string, opts map[string]any) error {
	var q client.Queue
	if _, err := o.client().Call(http.MethodPost, "/api/v1/configure", map[string]any{"queue": name, "options": opts}, &q); err != nil {
		return err
	}
	return printQueue(o, cmd, q)
}

func describeQueue(o *clientOptions, cmd *cobra.Command, name string) error {
	var q client.Queue
	if _, err := o.client().Call(http.MethodGet, "/api/v1/resources/queues/"+url.PathEscape(name), nil, &q); err != nil {
		return err
	}
	return printQueue(o, cmd, q)
}

func deleteQueue(o *clientOptions, cmd *cobra.Command, name string) error {
	if _, err := o.client().Call(http.MethodDelete, "/api/v1/resources/queues/"+url.PathEscape(name), nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", name)
	return nil
}

func newQueueCmd(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "queue", Short: "Create, list, describe, configure and delete queues"}
	var create, configure queueOptionFlags
	createCmd := &cobra.Command{Use: "create NAME", Short: "Create a queue (or merge options into it)", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error { return configureQueue(o, c, args[0], create.options(c)) }}
	create.add(createCmd, false)
	configureCmd := &cobra.Command{Use: "configure NAME", Short: "Change a queue's options", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return configureQueue(o, c, args[0], configure.options(c))
		}}
	configure.add(configureCmd, false)
	cmd.AddCommand(createCmd, configureCmd,
		&cobra.Command{Use: "list", Short: "List queues", Args: cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error { return listQueues(o, c) }},
		&cobra.Command{Use: "describe NAME", Short: "Show a queue and its partitions", Args: cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, args []string) error { return describeQueue(o, c, args[0]) }},
		&cobra.Command{Use: "delete NAME", Short: "Delete a queue and its messages", Args: cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, args []string) error { return deleteQueue(o, c, args[0]) }},
	)
	return cmd
}

func newTopicCmd(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "topic", Short: "Kafka topics: queues with dedup window 0"}
	var create queueOptionFlags
	createCmd := &cobra.Command{Use: "create NAME", Short: "Create a topic", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts := create.options(c)
			opts["dedupWindowSeconds"] = 0
			opts["partitions"] = create.partitions
			return configureQueue(o, c, args[0], opts)
		}}
	create.add(createCmd, true)
	cmd.AddCommand(createCmd,
		&cobra.Command{Use: "list", Short: "List topics: every queue, as Kafka clients see them", Args: cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error { return listQueues(o, c) }},
		&cobra.Command{Use: "describe NAME", Short: "Show a topic and its partitions", Args: cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, args []string) error { return describeQueue(o, c, args[0]) }},
		&cobra.Command{Use: "delete NAME", Short: "Delete a topic", Args: cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, args []string) error { return deleteQueue(o, c, args[0]) }},
	)
	return cmd
}
