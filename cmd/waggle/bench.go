package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/waggle-mq/waggle/client"
	"github.com/waggle-mq/waggle/payload"
)

// benchRun collects what a load run measured: one latency per request
// (a push of a batch, or one produced record).
type benchRun struct {
	mu        sync.Mutex
	latencies []time.Duration
	messages  atomic.Int64
	bytes     atomic.Int64
	errors    atomic.Int64
	firstErr  error // the first failure, for the report (under mu)
	start     time.Time
	// perSecond holds the messages counted at each whole second of the
	// run, so the report can compare its beginning with its end.
	perSecond []int64
}

// fail counts n messages as failed, remembering why the first failed.
func (r *benchRun) fail(n int64, err error) {
	r.errors.Add(n)
	r.mu.Lock()
	if r.firstErr == nil {
		r.firstErr = err
	}
	r.mu.Unlock()
}

// failed is the run's error when any message failed: the command exits
// non-zero, saying how many and why the first did.
func (r *benchRun) failed(total int64) error {
	if n := r.errors.Load(); n > 0 {
		r.mu.Lock()
		defer r.mu.Unlock()
		return fmt.Errorf("%d of %d messages failed; the first: %v", n, total, r.firstErr)
	}
	return nil
}

func (r *benchRun) record(d time.Duration, msgs, bytes int) {
	r.mu.Lock()
	r.latencies = append(r.latencies, d)
	r.mu.Unlock()
	r.messages.Add(int64(msgs))
	r.bytes.Add(int64(bytes))
}

// progress prints a live line to w every second until the returned stop
// is called; stop returns once the printer is done with w, so the caller
// may write to w after it.
func (r *benchRun) progress(w io.Writer, total int64) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		r.printProgress(w, total, quit)
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		<-done
	}
}

func (r *benchRun) printProgress(w io.Writer, total int64, stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			fmt.Fprintln(w)
			return
		case <-t.C:
			n := r.messages.Load()
			r.mu.Lock()
			r.perSecond = append(r.perSecond, n)
			r.mu.Unlock()
			fmt.Fprintf(w, "\r%d/%d messages, %.0f msgs/s, %d errors   ", n, total, float64(n)/time.Since(r.start).Seconds(), r.errors.Load())
		}
	}
}

// report prints the final table.
func (r *benchRun) report(c *cobra.Command, o *clientOptions, latencyOf string) error {
	elapsed := time.Since(r.start)
	slices.Sort(r.latencies)
	pct := func(p float64) time.Duration {
		if len(r.latencies) == 0 {
			return 0
		}
		return r.latencies[min(int(float64(len(r.latencies))*p), len(r.latencies)-1)]
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000) }
	res := map[string]any{
		"messages": r.messages.Load(), "errors": r.errors.Load(), "seconds": elapsed.Seconds(),
		"msgsPerSec": float64(r.messages.Load()) / elapsed.Seconds(), "mbPerSec": float64(r.bytes.Load()) / elapsed.Seconds() / (1 << 20),
		"p50ms": ms(pct(0.50)), "p95ms": ms(pct(0.95)), "p99ms": ms(pct(0.99)), "maxMs": ms(pct(1)), "latencyOf": latencyOf,
	}
	first, last := r.firstAndLastRate()
	res["firstMinuteMsgsPerSec"], res["lastMinuteMsgsPerSec"] = first, last
	return o.print(c, res, func(t *tableWriter) {
		t.row("MESSAGES", "ERRORS", "SECONDS", "MSGS/S", "MB/S", "P50 MS", "P95 MS", "P99 MS", "MAX MS")
		t.row(res["messages"], res["errors"], fmt.Sprintf("%.2f", elapsed.Seconds()), fmt.Sprintf("%.0f", res["msgsPerSec"]),
			fmt.Sprintf("%.1f", res["mbPerSec"]), res["p50ms"], res["p95ms"], res["p99ms"], res["maxMs"])
		t.row("")
		t.row("latency of " + latencyOf)
		if first > 0 {
			t.row(fmt.Sprintf("first minute %.0f msgs/s, last minute %.0f msgs/s (a third of the run each when it is shorter than 3 minutes)", first, last))
		}
	})
}

// firstAndLastRate is the message rate over the first and the last minute
// of the run, or over its first and last third when the run is shorter
// than three minutes: a store that slows down as it fills shows here.
// Both are 0 for a run of under three seconds.
func (r *benchRun) firstAndLastRate() (first, last float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.perSecond
	if len(s) < 3 {
		return 0, 0
	}
	w := min(60, len(s)/3)
	first = float64(s[w-1]) / float64(w)
	last = float64(s[len(s)-1]-s[len(s)-1-w]) / float64(w)
	return first, last
}

func newBenchCmd(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Load tools for sizing a deployment"}
	cmd.AddCommand(newBenchHTTPCmd(o), newBenchKafkaCmd(o))
	return cmd
}

func newBenchHTTPCmd(o *clientOptions) *cobra.Command {
	var push, compressible, keep, keyed bool
	var batch, clients, size, messages, partitions int
	var queue string
	cmd := &cobra.Command{
		Use:   "http --push",
		Short: "Push over HTTP from concurrent clients (unique transactionIds, dedup on)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if !push {
				return errors.New("say what to measure: --push")
			}
			if batch < 1 || clients < 1 || size < 2 || messages < 1 || partitions < 0 {
				return errors.New("--batch, --clients, --messages must be positive, --size at least 2 and --partitions not negative")
			}
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients, TLSClientConfig: o.tlsConfig()}, Timeout: 60 * time.Second}
			base := client.New(o.server).BaseURL
			if queue == "" { // a throw-away queue, deleted afterwards unless --keep
				queue = fmt.Sprintf("bench-%d", time.Now().UnixNano())
				if !keep {
					defer func() {
						if _, err := o.client().Call(http.MethodDelete, "/api/v1/resources/queues/"+queue, nil, nil); err != nil {
							fmt.Fprintf(c.ErrOrStderr(), "could not delete the bench queue %s: %v\n", queue, err)
						}
					}()
				}
			}
			run := &benchRun{start: time.Now()}
			stop := run.progress(c.ErrOrStderr(), int64(messages))
			defer stop() // on an early return too; stop may be called twice
			var next atomic.Int64
			var wg sync.WaitGroup
			nonce := time.Now().UnixNano()
			for w := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var body bytes.Buffer
					src := payload.New(uint64(nonce)+uint64(w), compressible)
					for {
						first := next.Add(int64(batch)) - int64(batch)
						if first >= int64(messages) {
							return
						}
						n := min(int64(batch), int64(messages)-first)
						body.Reset()
						body.WriteString(`{"items":[`)
						for i := range n {
							if i > 0 {
								body.WriteByte(',')
							}
							p := int64(w % 8)
							if partitions > 0 {
								p = (first + i) % int64(partitions)
							}
							fmt.Fprintf(&body, `{"queue":%q,"partition":"p%d","transactionId":"bench-%d-%d","payload":%s}`, queue, p, nonce, first+i, src.JSON(size))
						}
						body.WriteString(`]}`)
						t0 := time.Now()
						// A body of its own: the transport may still read a request's
						// body after Do returns, and sends it again on a new
						// connection when a kept-alive one was closed under it.
						req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/push", bytes.NewReader(bytes.Clone(body.Bytes())))
						req.Header.Set("Content-Type", "application/json")
						if o.token != "" {
							req.Header.Set("Authorization", "Bearer "+o.token)
						}
						if keyed {
							req.Header.Set("Idempotency-Key", fmt.Sprintf("bench-%d-%d", nonce, first))
						}
						resp, err := hc.Do(req)
						if err != nil {
							run.fail(n, fmt.Errorf("cannot reach %s: %w", base, err))
							continue
						}
						answer, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
						resp.Body.Close()
						if resp.StatusCode != http.StatusCreated {
							run.fail(n, fmt.Errorf("%s/api/v1/push answered HTTP %d: %s", base, resp.StatusCode, bytes.TrimSpace(answer)))
							continue
						}
						run.record(time.Since(t0), int(n), int(n)*size)
					}
				}()
			}
			wg.Wait()
			stop()
			if err := run.report(c, o, fmt.Sprintf("one push of %d messages", batch)); err != nil {
				return err
			}
			return run.failed(int64(messages))
		},
	}
	f := cmd.Flags()
	f.BoolVar(&push, "push", false, "measure pushes")
	f.IntVar(&batch, "batch", 100, "messages per push")
	f.IntVar(&clients, "clients", 16, "concurrent clients")
	f.IntVar(&size, "size", 256, "payload bytes")
	f.BoolVar(&compressible, "compressible", false, "repeat one byte instead of random, incompressible payloads")
	f.IntVar(&messages, "messages", 200_000, "messages in all")
	f.IntVar(&partitions, "partitions", 0, "spread message i over partition i mod N (0: each client pushes to one of 8)")
	f.StringVar(&queue, "queue", "", "queue to push to (default: a throw-away queue, deleted afterwards)")
	f.BoolVar(&keep, "keep", false, "keep the throw-away queue")
	f.BoolVar(&keyed, "idempotency-keys", false, "send each push with an Idempotency-Key (its answer is recorded for 10 minutes)")
	return cmd
}

func newBenchKafkaCmd(o *clientOptions) *cobra.Command {
	var produce, consume, keep, throwaway bool
	var records, size int
	var compressible bool
	var acks, topic string
	var brokers []string
	var useTLS bool
	var saslMech, saslUser, saslPassword string
	cmd := &cobra.Command{
		Use:   "kafka --produce|--consume",
		Short: "Produce (idempotent, like kafka-producer-perf-test) and/or consume (like kafka-consumer-perf-test) with franz-go",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if !produce && !consume {
				return errors.New("say what to measure: --produce, --consume or both")
			}
			if topic == "" {
				if !produce {
					return errors.New("--consume alone reads an existing topic: name it with --topic")
				}
				topic = fmt.Sprintf("bench-%d", time.Now().UnixNano()) // throw-away, deleted afterwards unless --keep
				throwaway = true
			}
			opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(0)}
			switch acks {
			case "all", "-1":
				opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
			case "1":
				opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
			case "0":
				opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
			default:
				return fmt.Errorf("--acks must be all, 1 or 0")
			}
			if useTLS {
				opts = append(opts, kgo.DialTLSConfig(cmp.Or(o.tlsConfig(), &tls.Config{MinVersion: tls.VersionTLS12})))
			}
			if saslMech != "" {
				m, err := saslMechanism(saslMech, saslUser, saslPassword)
				if err != nil {
					return err
				}
				opts = append(opts, kgo.SASL(m))
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				return err
			}
			defer cl.Close()
			// Without a broker to talk to the producer would wait for ever.
			pingCtx, cancel := context.WithTimeout(cmp.Or(c.Context(), context.Background()), 10*time.Second)
			err = cl.Ping(pingCtx)
			cancel()
			if err != nil {
				return fmt.Errorf("cannot reach the Kafka brokers %s: %w", strings.Join(brokers, ","), err)
			}
			if throwaway && !keep {
				defer deleteBenchTopic(c, opts, topic)
			}
			if !produce {
				return benchConsume(c, o, opts, topic, records)
			}
			src := payload.New(uint64(time.Now().UnixNano()), compressible)
			run := &benchRun{start: time.Now(), latencies: make([]time.Duration, 0, records)}
			stop := run.progress(c.ErrOrStderr(), int64(records))
			defer stop() // on an early return too; stop may be called twice
			var wg sync.WaitGroup
			ctx := c.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			for range records {
				wg.Add(1)
				t0 := time.Now()
				cl.Produce(ctx, &kgo.Record{Value: src.Bytes(size)}, func(_ *kgo.Record, err error) {
					defer wg.Done()
					if err != nil {
						run.fail(1, err)
						return
					}
					run.record(time.Since(t0), 1, size)
				})
			}
			wg.Wait()
			stop()
			if err := run.report(c, o, "one produced record (send to acknowledgement)"); err != nil {
				return err
			}
			if err := run.failed(int64(records)); err != nil || !consume {
				return err
			}
			return benchConsume(c, o, opts, topic, records)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&produce, "produce", false, "measure producing")
	f.BoolVar(&consume, "consume", false, "measure consuming --records from the start of --topic (after producing them, with --produce)")
	f.BoolVar(&keep, "keep", false, "keep the throw-away topic")
	f.IntVar(&records, "records", 1_000_000, "records to produce")
	f.IntVar(&size, "size", 100, "record value bytes")
	f.BoolVar(&compressible, "compressible", false, "repeat one byte instead of random, incompressible values")
	f.StringVar(&acks, "acks", "all", "all, 1 or 0")
	f.StringVar(&topic, "topic", "", "topic (created if missing; default: a throw-away topic, deleted afterwards)")
	f.StringSliceVar(&brokers, "brokers", []string{"127.0.0.1:9092"}, "bootstrap brokers")
	f.BoolVar(&useTLS, "tls", false, "connect with TLS (trusting --ca-file)")
	f.StringVar(&saslMech, "sasl-mechanism", "", "SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN (empty: no SASL)")
	f.StringVar(&saslUser, "sasl-user", "", "SASL user")
	f.StringVar(&saslPassword, "sasl-password", "", "SASL password (env WAGGLE_SASL_PASSWORD)")
	return cmd
}

// saslMechanism is franz-go's client side of a SASL mechanism.
func saslMechanism(name, user, password string) (sasl.Mechanism, error) {
	switch name {
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: password}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: password}.AsSha512Mechanism(), nil
	case "PLAIN":
		return plain.Auth{User: user, Pass: password}.AsMechanism(), nil
	}
	return nil, fmt.Errorf("--sasl-mechanism %q is not SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN", name)
}

// benchConsume reads n records of topic from its start with one franz-go
// consumer and reports the rate (latency: one poll).
func benchConsume(c *cobra.Command, o *clientOptions, opts []kgo.Opt, topic string, n int) error {
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(cmp.Or(c.Context(), context.Background()), 10*time.Minute)
	defer cancel()
	run := &benchRun{start: time.Now()}
	stop := run.progress(c.ErrOrStderr(), int64(n))
	defer stop() // on an early return too; stop may be called twice
	for got := 0; got < n; {
		t0 := time.Now()
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			stop()
			return fmt.Errorf("consumed %d of %d records of %s before giving up", got, n, topic)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			stop()
			return fmt.Errorf("consume %s: %w", topic, errs[0].Err)
		}
		bytes := 0
		fs.EachRecord(func(r *kgo.Record) { bytes += len(r.Value) })
		got += fs.NumRecords()
		run.record(time.Since(t0), fs.NumRecords(), bytes)
	}
	stop()
	return run.report(c, o, "one poll (fetch)")
}

// deleteBenchTopic removes the throw-away topic of a bench run.
func deleteBenchTopic(c *cobra.Command, opts []kgo.Opt, topic string) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TopicNames = []string{topic}
	t := kmsg.NewDeleteTopicsRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode != 0 {
		err = fmt.Errorf("error code %d", resp.Topics[0].ErrorCode)
	}
	if err != nil {
		fmt.Fprintf(c.ErrOrStderr(), "could not delete the bench topic %s: %v\n", topic, err)
	}
}
