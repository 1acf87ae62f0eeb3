// Package integration runs the built waggle binary as real processes on
// loopback (raft over TCP, badger on disk) and drives it with real clients.
package integration

import (
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// waggleBinary is the waggle binary built once for the whole package.
var waggleBinary string

// smokeTests is the slice of this suite `go test -short` runs (unless -run
// names others): one real-process check of each main path, for a
// contributor's inner loop. CI runs everything.
const smokeTests = `^(TestPushQueuesThenAnswersRetryAsDuplicate|TestKillNineKeepsAcknowledgedMessagesAndDedup|` +
	`TestPopAckRoundTrip|TestTransactionsOnceAndTimersAcrossFailover|TestFailoverAnswersRetryAsDuplicate|` +
	`TestKafkaProduceConsumeKeyedRecordsWithHeaders|TestHTTPAndKafkaReadEachOther|TestBadInputIsRefusedAndWritesNothing)$`

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() && flag.Lookup("test.run").Value.String() == "" {
		flag.Set("test.run", smokeTests)
	}
	dir, err := os.MkdirTemp("", "waggle-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	waggleBinary = filepath.Join(dir, "waggle")
	args := []string{"build", "-o", waggleBinary}
	if raceBuild {
		args = append(args, "-race") // the servers too run under the race detector
	}
	build := exec.Command("go", append(args, "../cmd/waggle")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build waggle:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// node is one waggle process and what it needs to be restarted as itself.
type node struct {
	t        testing.TB
	id       int
	binary   string // the waggle binary to run; waggleBinary when empty
	dataDir  string
	httpAddr string
	raftAddr string
	// raftAdvertise, when set, is the address peers dial (a proxy).
	raftAdvertise string
	kafkaAddr     string
	extraEnv      []string
	args          []string // more serve flags: --peers, --join, raft tuning
	ownArgs       []string // flags of this node alone (its certificate, say)
	scheme        string   // of its HTTP listener: http (default) or https
	cmd           *exec.Cmd
	logPath       string
	mu            sync.Mutex    // guards exited, which a restart replaces
	exited        chan struct{} // read it through done()
}

// freeAddr returns a loopback address with a port nobody listens on now.
func freeAddr(t testing.TB) string { return freeAddrOn(t, "127.0.0.1") }

// Ports handed to nodes come from below Linux's ephemeral range (32768 and
// up): a port from that range, free when picked, can be taken by some
// outgoing connection before the node binds it ("address already in use"
// seen in CI). handedOut keeps one port from being handed out twice.
var (
	portMu    sync.Mutex
	handedOut = map[int]bool{}
)

// freeAddrOn returns an address on host with a port nobody listens on now
// and no other test was given.
func freeAddrOn(t testing.TB, host string) string {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		if handedOut[port] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			continue
		}
		ln.Close()
		handedOut[port] = true
		return ln.Addr().String()
	}
	t.Fatal("no free port below the ephemeral range")
	return ""
}

// startSingle starts a single-node cluster and waits until it leads.
func startSingle(t testing.TB) *node {
	t.Helper()
	n := newNode(t, 1)
	n.start()
	n.waitLeader()
	return n
}

// newNode prepares a node with its own data directory and free addresses.
func newNode(t testing.TB, id int) *node {
	return &node{t: t, id: id, dataDir: t.TempDir(), httpAddr: freeAddr(t), raftAddr: freeAddr(t), kafkaAddr: freeAddr(t)}
}

func (n *node) url(path string) string { return cmp.Or(n.scheme, "http") + "://" + n.httpAddr + path }

func (n *node) start() {
	n.t.Helper()
	if n.logPath == "" {
		n.logPath = filepath.Join(n.dataDir, fmt.Sprintf("node-%d.log", n.id))
		n.t.Cleanup(n.afterTest) // runs after the node's stop, registered below
	}
	logFile, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.t.Fatal(err)
	}
	n.cmd = exec.Command(cmp.Or(n.binary, waggleBinary), "serve",
		"--node-id", fmt.Sprint(n.id),
		"--data-dir", n.dataDir,
		"--http-addr", n.httpAddr,
		"--raft-addr", n.raftAddr,
		"--kafka-addr", n.kafkaAddr)
	if n.raftAdvertise != "" {
		n.cmd.Args = append(n.cmd.Args, "--advertise-raft", n.raftAdvertise)
	}
	n.cmd.Args = append(n.cmd.Args, n.args...)
	if addr := os.Getenv("WAGGLE_TEST_PPROF"); addr != "" {
		n.cmd.Args = append(n.cmd.Args, "--pprof-addr", addr)
	}
	n.cmd.Env = append(os.Environ(), n.extraEnv...)
	n.cmd.Stdout, n.cmd.Stderr = logFile, logFile
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	exited := make(chan struct{})
	n.mu.Lock()
	n.exited = exited
	n.mu.Unlock()
	go func(cmd *exec.Cmd, done chan struct{}) {
		cmd.Wait()
		logFile.Close()
		close(done)
	}(n.cmd, exited)
	n.t.Cleanup(n.stop)
}

// done is closed when the node's current process has exited. Load
// generators ask it while the test restarts the node.
func (n *node) done() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.exited
}

// hasExited reports whether the node's process has ended.
func (n *node) hasExited() bool {
	select {
	case <-n.done():
		return true
	default:
		return false
	}
}

// afterTest fails the test when the node reported a state anomaly (state
// a consistent store never holds, see fsm.FSM.Anomaly) or, built with
// -race, a data race in its log. When the test failed it shows the end of the log
// and, with WAGGLE_TEST_LOG_DIR set, keeps a copy of the whole log there,
// since the data directory holding it is removed.
func (n *node) afterTest() {
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		return
	}
	for _, line := range stateAnomalies(b) {
		n.t.Errorf("node %d: %s", n.id, line)
	}
	if n.t.Failed() {
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		n.t.Logf("node %d, the last lines of its log:\n%s", n.id, strings.Join(lines[max(0, len(lines)-15):], "\n"))
		if dir := os.Getenv("WAGGLE_TEST_LOG_DIR"); dir != "" {
			name := strings.NewReplacer("/", "_").Replace(n.t.Name()) + fmt.Sprintf("-node-%d.log", n.id)
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				n.t.Log(err)
			}
		}
	}
	if raceBuild && bytes.Contains(b, []byte("WARNING: DATA RACE")) {
		i := bytes.Index(b, []byte("WARNING: DATA RACE"))
		n.t.Errorf("node %d reported a data race:\n%s", n.id, b[i:min(len(b), i+4000)])
	}
}

// stateAnomalies returns the lines of a node's log that report a state
// anomaly.
func stateAnomalies(log []byte) []string {
	var out []string
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "state anomaly") {
			out = append(out, line)
		}
	}
	return out
}

// kill9 ends the process without any chance to flush or hand off.
func (n *node) kill9() {
	n.t.Helper()
	n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.done()
}

func (n *node) stop() {
	select {
	case <-n.done():
		return
	default:
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done():
	case <-time.After(10 * time.Second):
		n.cmd.Process.Signal(syscall.SIGKILL)
		<-n.done()
	}
}

// wipe stops the node and empties its data directory (a lost disk).
func (n *node) wipe() {
	n.t.Helper()
	n.stop()
	if err := os.RemoveAll(n.dataDir); err != nil {
		n.t.Fatal(err)
	}
	if err := os.MkdirAll(n.dataDir, 0o755); err != nil {
		n.t.Fatal(err)
	}
}

// restart starts the node again on the same data and addresses.
func (n *node) restart() {
	n.t.Helper()
	n.start()
	n.waitLeader()
}

// waitLeader polls /health until this node reports itself leader.
func (n *node) waitLeader() {
	n.t.Helper()
	waitFor(n.t, 15*time.Second, func() error {
		var h healthAnswer
		if status := getJSON(n.t, n.url("/health"), &h); status != http.StatusOK {
			return fmt.Errorf("health status %d", status)
		}
		if h.Raft.Role != "leader" {
			return fmt.Errorf("role %s", h.Raft.Role)
		}
		return nil
	}, n.logTail)
}

func (n *node) logTail() string {
	b, _ := os.ReadFile(n.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// waitFor polls fn until it returns nil or the deadline passes; extra
// explains the failure (a log tail, say).
func waitFor(t testing.TB, timeout time.Duration, fn func() error, extra ...func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("not true after %v: %v", timeout, err)
			for _, e := range extra {
				msg += "\n" + e()
			}
			t.Fatal(msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var client = &http.Client{Timeout: 30 * time.Second}

// do sends a request and decodes a JSON answer into out (when non-nil and
// the answer has a body). A transport error counts as status 0.
func do(t testing.TB, method, url string, body []byte, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0
	}
	if out != nil && len(raw) > 0 {
		// A success must have the promised shape; an error answer that is
		// not the shape asked for (a caller expecting success got a 503,
		// say) is left to the caller's status check.
		if err := json.Unmarshal(raw, out); err != nil && resp.StatusCode < 300 {
			t.Errorf("%s %s: status %d, undecodable answer %q: %v", method, url, resp.StatusCode, raw, err)
			return 0
		}
	}
	return resp.StatusCode
}

func getJSON(t testing.TB, url string, out any) int { return do(t, http.MethodGet, url, nil, out) }

func postJSON(t testing.TB, url string, in, out any) int {
	t.Helper()
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, http.MethodPost, url, body, out)
}

// The answers' shapes, as a client written from HTTP-API.md sees them.
// Not the client package's types, on purpose: an independent reader of the contract.
type pushItem struct {
	Queue         string `json:"queue,omitempty"`
	Partition     string `json:"partition,omitempty"`
	TransactionID string `json:"transactionId,omitempty"`
	Payload       any    `json:"payload"`
}

type pushAnswer struct {
	Index         int     `json:"index"`
	MessageID     *string `json:"message_id"`
	TransactionID string  `json:"transaction_id"`
	QueueName     string  `json:"queueName"`
	Partition     string  `json:"partition"`
	Status        string  `json:"status"`
	Offset        *uint64 `json:"offset"`
	Error         string  `json:"error"`
}

type errorAnswer struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

type healthAnswer struct {
	Status string `json:"status"`
	NodeID int    `json:"nodeId"`
	Raft   struct {
		Role              string `json:"role"`
		Leader            *int   `json:"leader"`
		LeaderHTTP        string `json:"leaderHttp"`
		Term              uint64 `json:"term"`
		Commit            uint64 `json:"commit"`
		Applied           uint64 `json:"applied"`
		LastSnapshotIndex uint64 `json:"lastSnapshotIndex"`
		VotesWithheld     bool   `json:"votesWithheld"`
		StateCheck        *struct {
			Last *struct {
				Keys   uint64 `json:"keys"`
				Bytes  uint64 `json:"bytes"`
				TookMs int64  `json:"tookMs"`
			} `json:"last"`
		} `json:"stateCheck"`
	} `json:"raft"`
}

type fetchAnswer struct {
	Entries []fetchEntryAnswer `json:"entries"`
}

// fetchRecord is one record of a fetch answer.
type fetchRecord struct {
	Offset        uint64          `json:"offset"`
	MessageID     string          `json:"messageId"`
	TransactionID string          `json:"transactionId"`
	Payload       json.RawMessage `json:"payload"`
	Timestamp     int64           `json:"ts"`
}

// fetchEntryAnswer is one entry of a fetch answer.
type fetchEntryAnswer struct {
	Queue         string        `json:"queue"`
	Partition     string        `json:"partition"`
	Records       []fetchRecord `json:"records"`
	HighWatermark uint64        `json:"highWatermark"`
	Error         string        `json:"error"`
}

type queueAnswer struct {
	Name    string `json:"name"`
	Options struct {
		DedupWindowSeconds int64 `json:"dedupWindowSeconds"`
	} `json:"options"`
	Partitions []struct {
		Name        string `json:"name"`
		StartOffset uint64 `json:"startOffset"`
		NextOffset  uint64 `json:"nextOffset"`
	} `json:"partitions"`
}

// push sends items and requires 201 with one answer per item.
func (n *node) push(items ...pushItem) []pushAnswer {
	n.t.Helper()
	var out []pushAnswer
	if status := postJSON(n.t, n.url("/api/v1/push"), map[string]any{"items": items}, &out); status != http.StatusCreated {
		n.t.Fatalf("push: status %d", status)
	}
	if len(out) != len(items) {
		n.t.Fatalf("push of %d items answered %d", len(items), len(out))
	}
	return out
}

// fetchAll reads a whole partition from offset 0.
// fetchAll reads a whole partition from offset 0, paging: one fetch
// answers at most 10,000 records. (A checker that read only the first page
// once reported 30,627 "lost" writes that were all stored.)
func (n *node) fetchAll(queue, partition string) fetchAnswer {
	n.t.Helper()
	var out fetchAnswer
	for offset := uint64(0); ; {
		var page fetchAnswer
		req := map[string]any{"entries": []map[string]any{{"queue": queue, "partition": partition, "offset": offset, "maxBytes": 16 << 20}}}
		if status := postJSON(n.t, n.url("/api/v1/fetch"), req, &page); status != http.StatusOK {
			n.t.Fatalf("fetch: status %d", status)
		}
		if out.Entries == nil {
			out = page
		} else {
			out.Entries[0].Records = append(out.Entries[0].Records, page.Entries[0].Records...)
			out.Entries[0].HighWatermark = page.Entries[0].HighWatermark
		}
		recs := page.Entries[0].Records
		if len(recs) == 0 || recs[len(recs)-1].Offset+1 >= page.Entries[0].HighWatermark {
			return out
		}
		offset = recs[len(recs)-1].Offset + 1
	}
}

func requireStatus(t testing.TB, a pushAnswer, status string, offset uint64) {
	t.Helper()
	if a.Status != status || a.Offset == nil || *a.Offset != offset || a.MessageID == nil {
		t.Fatalf("answer %+v: want status %s at offset %d with a message_id", a, status, offset)
	}
}

func ptr[T any](v T) *T { return &v }

func strRepeat(n int) string { return strings.Repeat("x", n) }

func jsonBody(t testing.TB, v any) io.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

func decodeJSON(t testing.TB, resp *http.Response, out any) {
	t.Helper()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("undecodable answer: %v", err)
	}
}

func withArgs(n *node, args []string) *node {
	n.args = args
	return n
}

// runWithTimeout runs a client command and kills it if it has not finished
// within timeout, failing the test.
func runWithTimeout(t testing.TB, cmd *exec.Cmd, timeout time.Duration) ([]byte, error) {
	t.Helper()
	done := make(chan struct{})
	var out []byte
	var err error
	go func() {
		out, err = cmd.CombinedOutput()
		close(done)
	}()
	select {
	case <-done:
		return out, err
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s did not finish in %v:\n%s", cmd.Path, timeout, out)
		return nil, nil
	}
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
