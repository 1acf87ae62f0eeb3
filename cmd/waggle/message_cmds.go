package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/waggle-mq/waggle/client"
)

// asPayload sends text that is a JSON document as it is, anything else as
// a JSON string.
func asPayload(text string) json.RawMessage {
	if json.Valid([]byte(text)) {
		return json.RawMessage(text)
	}
	b, _ := json.Marshal(text)
	return b
}

func newPushCmd(o *clientOptions) *cobra.Command {
	var partition, txID string
	cmd := &cobra.Command{
		Use:   "push QUEUE [MESSAGE...]",
		Short: "Push messages (the arguments, or one per line of stdin)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			msgs := args[1:]
			if len(msgs) == 0 {
				sc := bufio.NewScanner(c.InOrStdin())
				sc.Buffer(make([]byte, 1<<20), 1<<20)
				for sc.Scan() {
					if line := sc.Text(); line != "" {
						msgs = append(msgs, line)
					}
				}
				if err := sc.Err(); err != nil {
					return err
				}
			}
			if len(msgs) == 0 {
				return errors.New("nothing to push")
			}
			if txID != "" && len(msgs) != 1 {
				return errors.New("--transaction-id names one message; push them one at a time")
			}
			// Every message gets its transactionId before the first try
			// (a UUIDv7 unless given), so retrying the push, after an
			// outcome the server could not learn, stores nothing twice.
			var items []map[string]any
			for _, m := range msgs {
				id := txID
				if id == "" {
					v7, err := uuid.NewV7()
					if err != nil {
						return err
					}
					id = v7.String()
				}
				items = append(items, map[string]any{"queue": args[0], "partition": partition, "transactionId": id, "payload": asPayload(m)})
			}
			// A push creates a missing queue (as the API does); the CLI says
			// so, since a misspelt name would otherwise go unnoticed.
			cl := o.client()
			_, err := cl.Call(http.MethodGet, "/api/v1/resources/queues/"+url.PathEscape(args[0]), nil, nil)
			var ae *client.Error
			created := errors.As(err, &ae) && ae.Status == http.StatusNotFound
			var out []client.PushResult
			if _, err := cl.CallRetry(http.MethodPost, "/api/v1/push", map[string]any{"items": items}, &out); err != nil {
				return err
			}
			if created {
				fmt.Fprintf(c.ErrOrStderr(), "created queue %s\n", args[0])
			}
			return o.print(c, out, func(t *tableWriter) {
				t.row("STATUS", "PARTITION", "OFFSET", "TRANSACTION ID", "MESSAGE ID")
				for _, r := range out {
					off, id := "", ""
					if r.Offset != nil {
						off = strconv.FormatUint(*r.Offset, 10)
					}
					if r.MessageID != nil {
						id = *r.MessageID
					}
					status := r.Status
					if r.Error != "" {
						status += ": " + r.Error
					}
					t.row(status, r.Partition, off, r.TransactionID, id)
				}
			})
		},
	}
	cmd.Flags().StringVar(&partition, "partition", "", "partition (default: Default)")
	cmd.Flags().StringVar(&txID, "transaction-id", "", "transactionId of the one message (retries answer duplicate)")
	return cmd
}

func newPopCmd(o *clientOptions) *cobra.Command {
	var group, partition string
	var batch int
	var ack bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "pop QUEUE",
		Short: "Lease messages (and with --ack, complete them)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			q := url.Values{"batch": {strconv.Itoa(batch)}}
			if group != "" {
				q.Set("consumerGroup", group)
			}
			if wait > 0 {
				q.Set("wait", "true")
				q.Set("timeout", strconv.FormatInt(wait.Milliseconds(), 10))
			}
			path := "/api/v1/pop/queue/" + url.PathEscape(args[0])
			if partition != "" {
				path += "/partition/" + url.PathEscape(partition)
			}
			var out client.PopResponse
			cl := o.client()
			status, err := cl.Call(http.MethodGet, path+"?"+q.Encode(), nil, &out)
			if err != nil {
				return err
			}
			if status == http.StatusNoContent {
				if o.output == "json" {
					return o.print(c, []struct{}{}, nil)
				}
				fmt.Fprintln(c.ErrOrStderr(), "no messages")
				return nil
			}
			if ack {
				var acks []map[string]string
				for _, m := range out.Messages {
					acks = append(acks, map[string]string{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "completed"})
				}
				var res []struct {
					Success bool
					Error   string
				}
				if _, err := cl.CallKeyed(http.MethodPost, "/api/v1/ack/batch", map[string]any{"consumerGroup": group, "acknowledgments": acks}, &res); err != nil {
					return err
				}
				for i, r := range res {
					if !r.Success {
						return fmt.Errorf("ack of %s failed: %s", out.Messages[i].TransactionID, r.Error)
					}
				}
			}
			// The lease and partition ids are what `waggle ack` needs.
			return o.print(c, out.Messages, func(t *tableWriter) {
				t.row("PARTITION", "PARTITION ID", "OFFSET", "ATTEMPT", "LEASE", "TRANSACTION ID", "DATA")
				for _, m := range out.Messages {
					t.row(m.Partition, m.PartitionID, m.Offset, m.DeliveryAttempt, m.LeaseID, m.TransactionID, string(m.Data))
				}
			})
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "consumer group (default: the queue's shared group)")
	cmd.Flags().StringVar(&partition, "partition", "", "pop from this partition only")
	cmd.Flags().IntVar(&batch, "batch", 1, "messages to lease (1-1000)")
	cmd.Flags().BoolVar(&ack, "ack", false, "complete the messages right away")
	cmd.Flags().DurationVar(&wait, "wait", 0, "long-poll up to this long for messages")
	return cmd
}

func newDLQCmd(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "dlq", Short: "Dead letters"}
	var queue string
	list := &cobra.Command{Use: "list", Short: "List dead letters", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var out client.DeadLetterList
			path := "/api/v1/dlq"
			if queue != "" {
				path += "?queue=" + url.QueryEscape(queue)
			}
			if _, err := o.client().Call(http.MethodGet, path, nil, &out); err != nil {
				return err
			}
			return o.print(c, out, func(t *tableWriter) {
				t.row("ID", "QUEUE", "PARTITION", "GROUP", "OFFSET", "ATTEMPTS", "TRANSACTION ID", "ERROR", "REPLAYED")
				for _, d := range out.Messages {
					replayed := "-"
					if d.ReplayedAs != nil {
						replayed = fmt.Sprintf("as offset %d", d.ReplayedAs.Offset)
					}
					t.row(d.ID, d.Queue, d.Partition, d.ConsumerGroup, d.Offset, d.Attempts, d.TransactionID, d.Error, replayed)
				}
			})
		}}
	list.Flags().StringVar(&queue, "queue", "", "only this queue's dead letters")
	replay := &cobra.Command{Use: "replay ID", Short: "Push a copy of a dead letter back to its partition", Args: cobra.ExactArgs(1),
		Long: `Push a copy of a dead letter back to its partition. A dead letter is
replayed once: replaying it again answers the first copy as a duplicate,
so a retried replay never pushes two copies.`,
		RunE: func(c *cobra.Command, args []string) error {
			var out client.PushResult
			// Safe to retry: a second replay answers the first copy.
			if _, err := o.client().CallRetry(http.MethodPost, "/api/v1/dlq/"+url.PathEscape(args[0])+"/replay", struct{}{}, &out); err != nil {
				return err
			}
			return o.print(c, out, func(t *tableWriter) {
				t.row("STATUS", "PARTITION", "OFFSET", "TRANSACTION ID")
				t.row(out.Status, out.Partition, *out.Offset, out.TransactionID)
			})
		}}
	del := &cobra.Command{Use: "delete ID...", Short: "Delete dead letters", Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			for _, id := range args {
				if _, err := o.client().Call(http.MethodDelete, "/api/v1/dlq/"+url.PathEscape(id), nil, nil); err != nil {
					return fmt.Errorf("dead letter %s: %w", id, err)
				}
				fmt.Fprintf(c.OutOrStdout(), "deleted dead letter %s\n", id)
			}
			return nil
		}}
	var purgeQueue string
	var purgeAll bool
	purge := &cobra.Command{Use: "purge", Short: "Delete every dead letter of a queue (or, with --all, of every queue)", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if (purgeQueue == "") == !purgeAll {
				return errors.New("name a queue with --queue, or purge every queue's dead letters with --all")
			}
			path := "/api/v1/dlq"
			if purgeQueue != "" {
				path += "?queue=" + url.QueryEscape(purgeQueue)
			}
			var out struct {
				Deleted int `json:"deleted"`
			}
			// Safe to retry: a purge repeated deletes what is left.
			if _, err := o.client().CallRetry(http.MethodDelete, path, nil, &out); err != nil {
				return err
			}
			return o.print(c, out, func(t *tableWriter) {
				t.row("DELETED")
				t.row(out.Deleted)
			})
		}}
	purge.Flags().StringVar(&purgeQueue, "queue", "", "the queue whose dead letters to delete")
	purge.Flags().BoolVar(&purgeAll, "all", false, "delete the dead letters of every queue")
	cmd.AddCommand(list, replay, del, purge)
	return cmd
}

func newAckCmd(o *clientOptions) *cobra.Command {
	var group, lease, partitionID, status, reason string
	cmd := &cobra.Command{
		Use:   "ack TRANSACTION-ID...",
		Short: "Finish leased messages: completed, or nack them (failed, retry, dlq)",
		Long: `Finish messages leased with waggle pop: completed (done), failed (counts
against the retry limit, then dead-lettered), retry (redelivered at once) or
dlq (dead-lettered now). The lease and partition ids are the ones pop shows.`,
		Example: `  waggle pop orders --group billing
  waggle ack --group billing --lease L --partition-id 7 TX-1 TX-2
  waggle ack --group billing --lease L --partition-id 7 --status failed --error "card declined" TX-3`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			switch status {
			case "completed", "failed", "retry", "dlq":
			default:
				return fmt.Errorf("--status must be completed, failed, retry or dlq, not %q", status)
			}
			var acks []map[string]string
			for _, tx := range args {
				acks = append(acks, map[string]string{"transactionId": tx, "partitionId": partitionID, "leaseId": lease, "status": status, "error": reason})
			}
			var res []ackResult
			if _, err := o.client().CallKeyed(http.MethodPost, "/api/v1/ack/batch", map[string]any{"consumerGroup": group, "acknowledgments": acks}, &res); err != nil {
				return err
			}
			if err := o.print(c, res, func(t *tableWriter) {
				t.row("TRANSACTION ID", "RESULT", "DEAD-LETTERED")
				for _, r := range res {
					result := "ok"
					if !r.Success {
						result = "failed: " + r.Error
					}
					t.row(r.TransactionID, result, r.DLQ)
				}
			}); err != nil {
				return err
			}
			for _, r := range res {
				if !r.Success {
					return fmt.Errorf("ack of %s failed: %s", r.TransactionID, r.Error)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "consumer group the messages were popped for (default: the queue's shared group)")
	cmd.Flags().StringVar(&lease, "lease", "", "lease id pop showed")
	cmd.Flags().StringVar(&partitionID, "partition-id", "", "partition id pop showed")
	cmd.Flags().StringVar(&status, "status", "completed", "completed, failed, retry or dlq")
	cmd.Flags().StringVar(&reason, "error", "", "why, for failed and dlq (kept with a dead letter)")
	cmd.MarkFlagRequired("lease")
	cmd.MarkFlagRequired("partition-id")
	return cmd
}

// ackResult is one acknowledgement's answer.
type ackResult struct {
	TransactionID string `json:"transactionId"`
	Success       bool   `json:"success"`
	Error         string `json:"error,omitempty"`
	DLQ           bool   `json:"dlq"`
}
