package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The dashboard's tests render the page in headless Chromium (renderPage,
// observe_test.go) and read the DOM it built. The page marks its rows with
// data-* attributes (data-queue, data-partition, data-group, data-dlq,
// data-node) so a test finds a row without depending on the layout.

// rowOf returns the table row whose opening tag holds attr (say
// `data-queue="q"`), or "" when there is none.
func rowOf(page, attr string) string {
	re := regexp.MustCompile(`(?s)<tr[^>]*` + regexp.QuoteMeta(attr) + `[^>]*>.*?</tr>`)
	return re.FindString(page)
}

// chartOf returns the inside of the chart SVG with id chart-NAME.
func chartOf(page, name string) string {
	m := regexp.MustCompile(`(?s)<svg[^>]*id="chart-` + name + `"[^>]*>(.*?)</svg>`).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return m[1]
}

// legendOf returns the inside of the legend of chart NAME.
func legendOf(page, name string) string {
	m := regexp.MustCompile(`(?s)<ul class="legend" id="legend-` + name + `">(.*?)</ul>`).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return m[1]
}

// legendValue is the latest value a legend shows for a series.
func legendValue(legend, series string) (float64, bool) {
	m := regexp.MustCompile(`<li data-series="` + regexp.QuoteMeta(series) + `"><i[^>]*></i>[^<]*<b>([0-9.,]+)</b>`).FindStringSubmatch(legend)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
	return v, err == nil
}

// A queue's row has its totals; opened (#queue=…), the queue shows each
// partition with its counts, in-flight messages and each group's lag, and
// an opened group (#group=…) shows its positions.
func TestDashboardDrillsDownIntoAQueueAndAGroup(t *testing.T) {
	n := startSingle(t)
	n.push(pushItem{Queue: "dq", Partition: "p1", Payload: 1}, pushItem{Queue: "dq", Partition: "p1", Payload: 2},
		pushItem{Queue: "dq", Partition: "p2", Payload: 3})
	// g1 leases one message of p1 and has not read p2.
	if status, got := n.pop(t, "dq/partition/p1", map[string]string{"consumerGroup": "g1", "batch": "1"}); status != http.StatusOK || len(got.Messages) != 1 {
		t.Fatalf("pop: %d %+v", status, got)
	}
	waitFor(t, 60*time.Second, func() error {
		out, err := renderPage(t, n.url("/#queue=dq&group=g1"))
		if err != nil {
			return err
		}
		// partitions 2, messages 3, in/s (any), in flight 1, dead letters 0, groups 1.
		row := rowOf(out, `data-queue="dq"`)
		if !strings.Contains(row, `dq</a></td><td class="n">2</td><td class="n">3</td>`) ||
			!strings.Contains(row, `<td class="n">1</td><td class="n">0</td><td class="n">1</td>`) {
			return fmt.Errorf("the queue's totals are not 2 partitions, 3 messages, 1 in flight, 0 dead letters, 1 group: %q\n%.3000s", row, out)
		}
		if !strings.Contains(out, `<div id="queue-detail" class="detail">`) || !strings.Contains(out, `<th class="n">lag g1</th>`) {
			return fmt.Errorf("the opened queue shows no partitions with g1's lag:\n%.4000s", out)
		}
		// messages 2, start 0, next 2, in flight 1, g1's lag 2.
		if p1 := rowOf(out, `data-partition="p1"`); !strings.Contains(p1, `<td>p1</td><td class="n">2</td><td class="n">0</td><td class="n">2</td><td class="n">1</td><td class="n">2</td>`) {
			return fmt.Errorf("partition p1 is shown as %q", p1)
		}
		// g1 has not read p2: its lag (1) is marked so.
		if p2 := rowOf(out, `data-partition="p2"`); !strings.Contains(p2, `<td>p2</td><td class="n">1</td><td class="n">0</td><td class="n">1</td><td class="n">0</td><td class="n unpos"`) {
			return fmt.Errorf("partition p2 is shown as %q", p2)
		}
		if c := rowOf(out, `data-cursor="dq/p1"`); !strings.Contains(c, `<td>dq</td><td>p1</td><td class="n">0</td><td class="n">2</td><td class="n">2</td><td class="n">1</td>`) {
			return fmt.Errorf("the opened group's position on p1 is shown as %q\n%.4000s", c, out)
		}
		if !strings.Contains(out, "No Kafka consumers in this group.") {
			return fmt.Errorf("an HTTP-only group is not said to have no Kafka consumers")
		}
		return nil
	})
}

// A message that failed past its queue's retry limit is listed as a dead
// letter with its error and a replay button, and counted on its queue.
func TestDashboardListsADeadLetterWithAReplayButton(t *testing.T) {
	n := startSingle(t)
	postJSON(t, n.url("/api/v1/configure"), map[string]any{"queue": "dl-q", "options": map[string]any{"retryLimit": 0, "deadLetterQueue": true}}, nil)
	n.push(pushItem{Queue: "dl-q", TransactionID: "doomed", Payload: map[string]int{"n": 1}})
	status, got := n.pop(t, "dl-q", map[string]string{"consumerGroup": "workers"})
	if status != http.StatusOK {
		t.Fatalf("pop: %d", status)
	}
	if _, res := n.ackAll(t, "workers", got.Messages, "failed"); len(res) != 1 || !res[0].DLQ {
		t.Fatalf("the failed message was not dead-lettered: %+v", res)
	}
	var dl struct{ Messages []struct{ ID string } }
	if getJSON(t, n.url("/api/v1/dlq?queue=dl-q"), &dl); len(dl.Messages) != 1 {
		t.Fatalf("dead letters: %+v", dl)
	}
	id := dl.Messages[0].ID
	waitFor(t, 60*time.Second, func() error {
		out, err := renderPage(t, n.url("/"))
		if err != nil {
			return err
		}
		row := rowOf(out, `data-dlq="`+id+`"`)
		for _, want := range []string{"<td>dl-q</td>", "<td>workers</td>", ">doomed</td>", `<td class="err">test</td>`,
			`<span class="tag dead">dead</span>`, `<button data-action="replay" data-id="` + id + `">replay</button>`, `data-action="delete"`} {
			if !strings.Contains(row, want) {
				return fmt.Errorf("the dead letter's row lacks %s: %q\n%.3000s", want, row, out)
			}
		}
		// The queue's row counts it: 0 in flight, 1 dead letter.
		if q := rowOf(out, `data-queue="dl-q"`); !strings.Contains(q, `<td class="n">0</td><td class="n">1</td>`) {
			return fmt.Errorf("the queue's row does not count the dead letter: %q", q)
		}
		if !strings.Contains(out, `<span id="dlq-count">(1)</span>`) {
			return fmt.Errorf("the dead letters' count is not 1")
		}
		return nil
	})
}

// memberResources are the resource fields of /health and of each member
// of /api/v1/cluster.
type memberResources struct {
	ID             int     `json:"id"`
	State          string  `json:"state"`
	DiskUsedBytes  *uint64 `json:"diskUsedBytes"`
	DiskTotalBytes *uint64 `json:"diskTotalBytes"`
	MemoryBytes    *uint64 `json:"memoryBytes"`
}

func (m memberResources) check() error {
	switch {
	case m.DiskUsedBytes == nil || m.DiskTotalBytes == nil || m.MemoryBytes == nil:
		return fmt.Errorf("node %d lacks disk or memory: %+v", m.ID, m)
	case *m.DiskTotalBytes == 0 || *m.DiskUsedBytes > *m.DiskTotalBytes:
		return fmt.Errorf("node %d: disk %d used of %d", m.ID, *m.DiskUsedBytes, *m.DiskTotalBytes)
	case *m.MemoryBytes < 1<<20:
		return fmt.Errorf("node %d: the Go runtime holds %d bytes, less than 1 MiB", m.ID, *m.MemoryBytes)
	}
	return nil
}

func TestHealthReportsDiskAndMemory(t *testing.T) {
	n := startSingle(t)
	var h memberResources
	if status := getJSON(t, n.url("/health"), &h); status != http.StatusOK {
		t.Fatalf("health: %d", status)
	}
	if err := h.check(); err != nil {
		t.Fatal(err)
	}
}

// Every member of a 3-node cluster reports its disk and memory, in the API
// and on the dashboard; a killed member is shown unreachable, with the
// error, and without figures. The cluster runs three raft groups, listed
// with their leaders; the killed node's group is shown led by a survivor.
func TestClusterDashboardShowsNodeHealth(t *testing.T) {
	c := startCluster(t, 3, "--data-groups", "3")
	waitGroupLeaders(t, c.nodes, 3, preferred)
	leader := c.leader()
	waitFor(t, 30*time.Second, func() error {
		var cl struct{ Members []memberResources }
		getJSON(t, leader.url("/api/v1/cluster"), &cl)
		if len(cl.Members) != 3 {
			return fmt.Errorf("%d members", len(cl.Members))
		}
		for _, m := range cl.Members {
			if err := m.check(); err != nil {
				return err
			}
		}
		return nil
	})
	memory := regexp.MustCompile(`<td class="n" data-memory="[1-9][0-9]*">[0-9.]+ MiB</td>`)
	disk := regexp.MustCompile(`<span data-disk="[0-9]+">[0-9.]+ [KMGT]iB / [0-9.]+ [KMGT]iB \([0-9]+%\)`)
	waitFor(t, 60*time.Second, func() error {
		out, err := renderPage(t, leader.url("/"))
		if err != nil {
			return err
		}
		for _, n := range c.nodes {
			row := rowOf(out, fmt.Sprintf(`data-node="%d"`, n.id))
			if !strings.Contains(row, `<span class="state-up">up</span>`) || !memory.MatchString(row) || !disk.MatchString(row) {
				return fmt.Errorf("node %d is not shown up with its disk and memory: %q\n%.3000s", n.id, row, out)
			}
		}
		for g := range 3 {
			if row := rowOf(out, fmt.Sprintf(`data-raft-group="%d"`, g)); !strings.Contains(row, fmt.Sprintf(`data-leader="%d"`, g+1)) {
				return fmt.Errorf("raft group %d is not shown led by node %d: %q", g, g+1, row)
			}
		}
		return nil
	})
	victim := c.followers()[0]
	victim.kill9()
	waitFor(t, 60*time.Second, func() error {
		out, err := renderPage(t, leader.url("/"))
		if err != nil {
			return err
		}
		row := rowOf(out, fmt.Sprintf(`data-node="%d"`, victim.id))
		if !strings.Contains(row, `<tr class="down"`) || !strings.Contains(row, `⚠ unreachable</span>`) || strings.Contains(row, `data-memory="1`) {
			return fmt.Errorf("the killed node is not shown unreachable, without figures: %q", row)
		}
		// Its error is spelt out below the table.
		if !regexp.MustCompile(fmt.Sprintf(`<li data-node-error="%d"><b>node %d unreachable: </b>[^<]*%s`, victim.id, victim.id, regexp.QuoteMeta(victim.httpAddr))).MatchString(out) {
			return fmt.Errorf("the killed node's error is not shown:\n%.3000s", out)
		}
		// The group it led is led by a survivor.
		row = rowOf(out, fmt.Sprintf(`data-raft-group="%d"`, victim.id-1))
		if m := regexp.MustCompile(`data-leader="([0-9]+)"`).FindStringSubmatch(row); m == nil || m[1] == fmt.Sprint(victim.id) {
			return fmt.Errorf("raft group %d is not shown led by a survivor: %q", victim.id-1, row)
		}
		return nil
	})
}

// keepPushing pushes one message to queue every interval until the test
// ends, so the page measures a rate.
func keepPushing(t *testing.T, n *node, queue string, interval time.Duration) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(interval):
			}
			body := fmt.Sprintf(`{"items":[{"queue":%q,"payload":%d}]}`, queue, i)
			if resp, err := client.Post(n.url("/api/v1/push"), "application/json", strings.NewReader(body)); err == nil {
				resp.Body.Close()
			}
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })
}

// After several polls (virtual time: 20 s of the page's clock) the
// throughput chart plots the queue being pushed to, and the lag chart
// the group's lag.
func TestDashboardChartsPlotThroughputAndLag(t *testing.T) {
	n := startSingle(t)
	for i := range 10 {
		n.push(pushItem{Queue: "c-q", Payload: i})
	}
	_, got := n.pop(t, "c-q", map[string]string{"consumerGroup": "cg", "batch": "2"})
	n.ackAll(t, "cg", got.Messages, "completed")
	keepPushing(t, n, "c-q", 20*time.Millisecond)
	polyline := func(svg, series string) []string {
		m := regexp.MustCompile(`<polyline points="([^"]*)"[^>]*data-series="` + series + `"`).FindStringSubmatch(svg)
		if m == nil {
			return nil
		}
		return strings.Fields(m[1])
	}
	waitFor(t, 90*time.Second, func() error {
		out, err := runChromium(t, "--virtual-time-budget=20000", "--dump-dom", n.url("/"))
		if err != nil {
			return err
		}
		page := string(out)
		in, lag := chartOf(page, "in"), chartOf(page, "lag")
		if pts := polyline(in, "c-q"); len(pts) < 2 {
			return fmt.Errorf("the throughput chart plots no line for c-q: %q", in)
		}
		if pts := polyline(in, "total"); len(pts) < 2 {
			return fmt.Errorf("the throughput chart plots no total: %q", in)
		}
		if pts := polyline(lag, "cg"); len(pts) < 3 {
			return fmt.Errorf("the lag chart plots no line for cg over several polls: %q", lag)
		}
		if v, ok := legendValue(legendOf(page, "lag"), "cg"); !ok || v < 8 {
			return fmt.Errorf("the lag legend shows %v (%v) for cg, want at least 8", v, ok)
		}
		// A push landed between two polls at least once: c-q's line is not
		// flat on the chart's zero.
		ys := map[string]bool{}
		for _, p := range polyline(in, "c-q") {
			ys[p[strings.Index(p, ",")+1:]] = true
		}
		if len(ys) < 2 {
			return fmt.Errorf("no rate above zero was measured for c-q: %q", in)
		}
		return nil
	})
}

// A Kafka group's members and a replayed dead letter, from a real node:
// the group page shows the Kafka state and each member's assignment, the
// dead-letter list marks the replayed one and counts only the other as
// pending.
func TestDashboardShowsKafkaMembersAndReplayedDeadLetters(t *testing.T) {
	n := startSingle(t)
	waitLogFormat(t, n, 2) // replay is a format 2 entry
	newTopic(t, n.kafkaAddr, "t", 2, `{"x":1}`, `{"x":2}`)
	groupMember(t, []string{n.kafkaAddr}, "kg", "t", kgo.ClientID("app"))
	var g struct {
		Kafka *struct {
			Protocol string
			Members  []struct{ MemberID string }
		}
	}
	waitFor(t, 20*time.Second, func() error {
		if getJSON(t, n.url("/api/v1/consumer-groups/kg"), &g); g.Kafka == nil || len(g.Kafka.Members) != 1 {
			return fmt.Errorf("the group's Kafka membership: %+v", g.Kafka)
		}
		return nil
	})

	// Two dead letters; one is replayed.
	postJSON(t, n.url("/api/v1/configure"), map[string]any{"queue": "dl-q", "options": map[string]any{"retryLimit": 0}}, nil)
	n.push(pushItem{Queue: "dl-q", TransactionID: "a", Payload: 1}, pushItem{Queue: "dl-q", TransactionID: "b", Payload: 2})
	_, got := n.pop(t, "dl-q", map[string]string{"batch": "2"})
	n.ackAll(t, "", got.Messages, "failed")
	var dl struct {
		Messages []struct{ ID, TransactionID string }
	}
	if getJSON(t, n.url("/api/v1/dlq?queue=dl-q"), &dl); len(dl.Messages) != 2 {
		t.Fatalf("dead letters: %+v", dl)
	}
	replayed, pending := dl.Messages[0].ID, dl.Messages[1].ID
	if status := postJSON(t, n.url("/api/v1/dlq/"+replayed+"/replay"), struct{}{}, nil); status != http.StatusOK {
		t.Fatalf("replay: %d", status)
	}

	member := g.Kafka.Members[0].MemberID
	waitFor(t, 60*time.Second, func() error {
		out, err := renderPage(t, n.url("/#group=kg"))
		if err != nil {
			return err
		}
		if want := "Kafka group: <b>Stable</b>, protocol consumer/" + g.Kafka.Protocol + ", generation "; !strings.Contains(out, want) {
			return fmt.Errorf("the group's Kafka state (%s…) is missing:\n%.4000s", want, out)
		}
		if m := rowOf(out, `data-member="`+member+`"`); !strings.Contains(m, `<td>app</td>`) || !strings.Contains(m, `<td>t [0, 1]</td>`) {
			return fmt.Errorf("the member's row is %q", m)
		}
		if d := rowOf(out, `data-dlq="`+replayed+`"`); !strings.Contains(d, `>replayed</span>`) || !strings.Contains(d, `>replay again</button>`) {
			return fmt.Errorf("the replayed dead letter is shown as %q", d)
		}
		if d := rowOf(out, `data-dlq="`+pending+`"`); !strings.Contains(d, `<span class="tag dead">dead</span>`) {
			return fmt.Errorf("the dead letter not replayed is shown as %q", d)
		}
		if !strings.Contains(out, `<span id="dlq-count">(2, 1 replayed)</span>`) || !strings.Contains(out, `<div class="card" data-card="dead letters"><b>1</b>`) {
			return fmt.Errorf("the dead letters are not counted as 2, 1 replayed, 1 pending")
		}
		return nil
	})
}

// Screenshots of a populated dashboard (a 3-node cluster with one node
// down, queues, groups with lag and leases, a dead letter, a queue being
// pushed to), on a desktop and on a phone. They are written to the test's
// directory and checked to be PNG images; with WAGGLE_SCREENSHOT_DIR set
// they are copied there to be looked at.
func TestDashboardScreenshots(t *testing.T) {
	c := startCluster(t, 3)
	n := c.leader()
	postJSON(t, n.url("/api/v1/configure"), map[string]any{"queue": "orders", "options": map[string]any{"retryLimit": 0}}, nil)
	for i := range 30 {
		n.push(pushItem{Queue: "orders", Partition: []string{"eu", "us", "asia"}[i%3], Payload: map[string]int{"order": i}})
	}
	for i := range 5 {
		n.push(pushItem{Queue: "payments", Payload: i})
	}
	_, got := n.pop(t, "orders", map[string]string{"consumerGroup": "billing", "batch": "8"})
	n.ackAll(t, "billing", got.Messages, "completed")
	n.pop(t, "orders", map[string]string{"consumerGroup": "audit", "batch": "4"}) // leased, not acked
	_, got = n.pop(t, "payments", map[string]string{"consumerGroup": "ledger", "batch": "1"})
	if _, res := n.ackAll(t, "ledger", got.Messages, "dlq"); len(res) != 1 || !res[0].DLQ {
		t.Fatalf("no dead letter made: %+v", res)
	}
	c.followers()[0].kill9()
	keepPushing(t, n, "orders", 20*time.Millisecond)

	dir := t.TempDir()
	shots := []struct{ name, size, hash string }{
		{"desktop", "1280,900", "#queue=orders&group=billing"},
		{"phone", "390,844", ""},
		{"desktop-full", "1280,2300", "#queue=orders&group=billing"},
		{"phone-full", "390,3400", "#queue=orders"},
	}
	for _, s := range shots {
		file := filepath.Join(dir, "dash-"+s.name+".png")
		if out, err := runChromium(t, "--hide-scrollbars", "--virtual-time-budget=12000", "--window-size="+s.size, "--screenshot="+file, n.url("/"+s.hash)); err != nil {
			t.Fatalf("screenshot %s: %v\n%s", s.name, err, out)
		}
		png, err := os.ReadFile(file)
		if err != nil || len(png) < 10_000 || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
			t.Fatalf("screenshot %s: %d bytes, not a PNG of a drawn page (%v)", s.name, len(png), err)
		}
		if to := os.Getenv("WAGGLE_SCREENSHOT_DIR"); to != "" {
			if err := os.WriteFile(filepath.Join(to, "dash-"+s.name+".png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
