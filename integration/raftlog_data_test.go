package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// From log format 5 a Kafka batch is written to disk once, in the raft log
// entry that carried it; the topic's segment holds a ref to it. These
// tests check the paths where the log alone would not do.

// produceJSONRecords produces n records with JSON values (n/batches per
// produce call, so several raft entries) and returns the values.
func produceJSONRecords(t *testing.T, cl *kgo.Client, topic string, n, batches int) []string {
	t.Helper()
	var values []string
	for b := range batches {
		var recs []*kgo.Record
		for i := range n / batches {
			pad := make([]byte, 100)
			for j := range pad {
				pad[j] = "0123456789abcdef"[rand.IntN(16)]
			}
			v := fmt.Sprintf(`{"n":%d,"pad":"%s"}`, b*(n/batches)+i, pad)
			values = append(values, v)
			recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(v)})
		}
		produceSync(t, cl, recs...)
	}
	return values
}

// requireRecords checks that n holds exactly values in partition 0 of
// topic, read over HTTP from its own store.
func requireRecords(t *testing.T, n *node, topic string, values []string) {
	t.Helper()
	got := n.fetchAll(topic, "0").Entries[0].Records
	if len(got) != len(values) {
		t.Fatalf("node %d holds %d records of %s, want %d", n.id, len(got), topic, len(values))
	}
	for i, r := range got {
		var buf bytes.Buffer
		if err := json.Compact(&buf, r.Payload); err != nil || buf.String() != values[i] || r.Offset != uint64(i) {
			t.Fatalf("node %d, %s offset %d: %s (%v), want %s at %d", n.id, topic, r.Offset, r.Payload, err, values[i], i)
		}
	}
}

// sidecars lists the sidecar files of n's segments (batches copied out of
// the raft log, or received in a snapshot).
func sidecars(n *node) []string {
	files, _ := filepath.Glob(filepath.Join(n.dataDir, "state", "segments", "*", "*.ref"))
	return files
}

func pushFiller(t *testing.T, c *cluster, queue string, pushes, items, size int) {
	t.Helper()
	payload := strings.Repeat("f", size)
	for p := range pushes {
		batch := make([]pushItem, items)
		for i := range batch {
			batch[i] = pushItem{Queue: queue, TransactionID: fmt.Sprintf("%d-%d", p, i), Payload: payload}
		}
		c.pushUntilAccepted(20*time.Second, batch...)
	}
}

// A follower wiped once the leader's log was compacted past its first
// entry installs a snapshot whose sidecars hold every batch; it then
// serves every record, after a restart too, and becomes a leader that
// serves them through Kafka.
func TestWipedFollowerGetsBatchesFromSnapshotSidecars(t *testing.T) {
	c := startCluster(t, 3, "--raft-snapshot-threshold", "32", "--raft-trailing-logs", "16")
	requireLogFormat(t, c.leader(), 5)
	// Entries no ref names come first, so compaction passes them.
	pushFiller(t, c, "filler", 60, 10, 64)
	c.snapshotAll()
	cl := kafkaClient(t, c.kafkaAddrs())
	createTopic(t, cl, "kept", 1, nil)
	values := produceJSONRecords(t, cl, "kept", 2000, 40)
	pushFiller(t, c, "filler", 60, 10, 64)
	c.snapshotAll()

	wiped := c.followers()[0]
	wiped.wipe()
	wiped.start()
	c.waitCaughtUp(wiped)
	if len(sidecars(wiped)) == 0 {
		t.Fatalf("node %d caught up without a sidecar: it replayed the log instead of installing a snapshot\n%s", wiped.id, wiped.logTail())
	}
	requireRecords(t, wiped, "kept", values)

	// More batches after the snapshot come from the wiped node's own log.
	values = append(values, produceJSONRecords(t, cl, "kept", 200, 4)...)
	c.waitCaughtUp(wiped)
	requireRecords(t, wiped, "kept", values)
	wiped.stop()
	wiped.start()
	c.waitCaughtUp(wiped)
	requireRecords(t, wiped, "kept", values)

	// With the old leader gone, the wiped node may lead; every record is
	// still there through Kafka.
	old := c.leader()
	old.stop()
	c.leader()
	consumer := kafkaClient(t, []string{wiped.kafkaAddr}, kgo.ConsumeTopics("kept"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := 0
	deadline := time.Now().Add(30 * time.Second)
	for seen < len(values) && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		fs := consumer.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			if seen < len(values) && (string(r.Value) != values[seen] || r.Offset != int64(seen)) {
				t.Fatalf("Kafka offset %d: %s, want %s at %d", r.Offset, r.Value, values[seen], seen)
			}
			seen++
		})
	}
	if seen != len(values) {
		t.Fatalf("consumed %d of %d records after the leader stopped", seen, len(values))
	}
}

// A topic whose old batch pins the raft log while other traffic fills it:
// past --raft-log-hold-mib the node copies the pinning segment's batches
// into its sidecar and the log is compacted past them; the records read
// the same, before and after a restart.
func TestPinnedBatchesAreCopiedOutOfTheRaftLog(t *testing.T) {
	n := withArgs(newNode(t, 1), []string{"--raft-snapshot-threshold", "64", "--raft-trailing-logs", "16", "--raft-log-hold-mib", "1"})
	n.start()
	n.waitLeader()
	c := &cluster{t: t, nodes: []*node{n}}
	requireLogFormat(t, n, 5)
	cl := kafkaClient(t, []string{n.kafkaAddr})
	createTopic(t, cl, "pinned", 1, nil)
	values := produceJSONRecords(t, cl, "pinned", 100, 5)
	var status clusterAnswer
	getJSON(t, n.url("/api/v1/cluster"), &status)
	produced := *status.Members[0].Applied // at or past the last produce entry
	// 80 MiB of pushes: more than one 64 MiB raft-wal file.
	waitFor(t, 180*time.Second, func() error {
		pushFiller(t, c, "filler", 10, 100, 8192)
		c.snapshotAll()
		if len(sidecars(n)) == 0 {
			return fmt.Errorf("no sidecar yet")
		}
		return nil
	})
	requireRecords(t, n, "pinned", values)
	if copied := metricValue(t, n, "waggle_raft_log_copied_bytes_total"); copied <= 0 {
		t.Errorf("a sidecar was written, and waggle_raft_log_copied_bytes_total is %v", copied)
	}
	waitFor(t, 60*time.Second, func() error {
		pushFiller(t, c, "filler", 2, 100, 8192)
		c.snapshotAll()
		files, _ := filepath.Glob(filepath.Join(n.dataDir, "raft", "wal", "*.wal"))
		var first uint64
		if len(files) > 0 {
			fmt.Sscanf(filepath.Base(files[0]), "%d-", &first)
		}
		if first <= produced {
			return fmt.Errorf("the raft log's oldest file begins at %d, before the batches' entries (up to %d)", first, produced)
		}
		return nil
	})
	n.stop()
	n.restart()
	requireRecords(t, n, "pinned", values)
}

// metricValue is the value of an unlabelled metric in n's /metrics.
func metricValue(t *testing.T, n *node, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(metricsText(t, n), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

// requireLogFormat waits until n's cluster writes log format want or a
// later one (each format keeps what the earlier ones changed).
func requireLogFormat(t testing.TB, n *node, want int) {
	t.Helper()
	waitFor(t, 30*time.Second, func() error {
		l, err := readLogFormat(n)
		if err != nil {
			return err
		}
		if got := formatOr1(l.LogFormat); got < want {
			return fmt.Errorf("log format %d, want %d or later", got, want)
		}
		return nil
	})
}
