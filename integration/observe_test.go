package integration

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMetricsExposition(t *testing.T) {
	n := startSingle(t)
	n.push(pushItem{Queue: "m", TransactionID: "a", Payload: 1}, pushItem{Queue: "m", TransactionID: "a", Payload: 1})
	_, got := n.pop(t, "m", map[string]string{"consumerGroup": "mg"})
	n.ackAll(t, "mg", got.Messages, "completed")
	n.push(pushItem{Queue: "m", TransactionID: "b", Payload: 2}) // lag 1 for mg
	cl := kafkaClient(t, []string{n.kafkaAddr})
	createTopic(t, cl, "mt", 1, nil)

	// A request is counted once its answer is written, so the client may
	// read the answer a moment before the counter moves: poll.
	waitFor(t, 5*time.Second, func() error {
		resp, err := http.Get(n.url("/metrics"))
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var missing []string
		for _, want := range []string{
			`waggle_push_messages_total{status="queued"} 2`,
			`waggle_push_messages_total{status="duplicate"} 1`,
			`waggle_http_requests_total{code="201",route="POST /api/v1/push"} 2`,
			`waggle_kafka_requests_total{api="CreateTopics"} 1`,
			`waggle_raft_is_leader 1`,
			`waggle_group_lag_messages{group="mg",partition="Default",queue="m"} 1`,
			`waggle_raft_apply_seconds_count`,
			`waggle_badger_lsm_bytes`,
			`waggle_raft_log_sealed_bytes`,
			`waggle_raft_log_ref_bytes`,
			`waggle_raft_log_copied_bytes_total 0`,
			`waggle_pending_deletes 0`,
			`waggle_state_anomalies_total 0`,
			`waggle_replicas_diverged 0`,
			`waggle_dedup_index_ids 2`, // "a" and "b"
		} {
			if !strings.Contains(string(body), want) {
				missing = append(missing, want)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("/metrics lacks %q", missing)
		}
		return nil
	})
}

// The dashboard, driven by headless Chromium: a pushed message's queue
// appears with its partition and message counts, and the leader is named.
func TestDashboardShowsQueuesInABrowser(t *testing.T) {
	n := startSingle(t)
	n.push(pushItem{Queue: "dash-q", Payload: 1}, pushItem{Queue: "dash-q", Payload: 2}, pushItem{Queue: "dash-q", Payload: 3})
	cl := kafkaClient(t, []string{n.kafkaAddr}, kgo.DefaultProduceTopic("dash-t"))
	createTopic(t, cl, "dash-t", 1, nil)

	// The queue's row: 1 partition, 3 messages.
	want := `data-queue="dash-q"><td><a href="#queue=dash-q">dash-q</a></td><td class="n">1</td><td class="n">3</td>`
	waitFor(t, 60*time.Second, func() error {
		out, err := renderPage(t, n.url("/"))
		if err != nil {
			return err
		}
		if !strings.Contains(out, want) || !strings.Contains(out, "(leader)") {
			return fmt.Errorf("the rendered page lacks the queue row or the leader:\n%.2000s", out)
		}
		return nil
	})
}

// With --auth the dashboard shows its token form until it has a token;
// given one (as /#token=…) it shows the queues.
func TestDashboardWithAuthTakesAToken(t *testing.T) {
	n := startSecured(t)
	if status := pushAs(t, n, bootstrapToken, "dash-secure"); status != http.StatusCreated {
		t.Fatalf("push: %d", status)
	}
	waitFor(t, 60*time.Second, func() error {
		out, err := renderPage(t, n.url("/"))
		if err != nil {
			return err
		}
		if !strings.Contains(out, `<form id="login">`) || !strings.Contains(out, `<main id="content" hidden="">`) || strings.Contains(out, "dash-secure") {
			return fmt.Errorf("without a token the page shows no token form, or shows data:\n%.2000s", out)
		}
		return nil
	})
	waitFor(t, 60*time.Second, func() error {
		out, err := renderPage(t, n.url("/#token="+bootstrapToken))
		if err != nil {
			return err
		}
		if !strings.Contains(out, `>dash-secure</a></td>`) || !strings.Contains(out, `<form id="login" hidden="">`) || !strings.Contains(out, `<main id="content">`) {
			return fmt.Errorf("with a token the page lacks the queue, or still asks:\n%.2000s", out)
		}
		return nil
	})
}

// renderPage loads url in headless Chromium and returns the DOM after its
// scripts ran (5 s of the page's time: two or three polls).
func renderPage(t *testing.T, url string) (string, error) {
	out, err := runChromium(t, "--virtual-time-budget=5000", "--dump-dom", url)
	return string(out), err
}

// runChromium runs headless Chromium with a throw-away profile and the
// given arguments, and returns its standard output.
func runChromium(t *testing.T, args ...string) ([]byte, error) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed (apt-get install -y chromium; .ci/run does this)")
	}
	profile, err := os.MkdirTemp("", "waggle-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(profile)
	cmd := exec.Command(chromium, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir=" + profile}, args...)...)
	return cmd.Output()
}
