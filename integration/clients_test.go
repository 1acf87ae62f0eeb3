package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Kafka client matrix: every client the suite drives, against one node
// and against 3-node clusters reached the way users reach them: through a
// follower only (the bootstrap address is often not the leader), through
// every node, and through one node of a cluster with three raft groups
// (each node leads one, so most of what a client names lives elsewhere).
// A client that works on one node must work on all of them unchanged.

// kafkaTarget is one deployment a client is pointed at.
type kafkaTarget struct {
	name      string
	bootstrap []string // the addresses the client is given
	log       func() string
}

// startKafkaTargets starts a single node and two 3-node clusters and lists
// the ways into them.
func startKafkaTargets(t *testing.T) []kafkaTarget {
	t.Helper()
	single := startSingle(t)
	waitLogFormat(t, single, 2) // the transaction scripts write format 2 entries
	one := startCluster(t, 3)
	waitLogFormat(t, one.leader(), 2)
	follower := one.followers()[0]
	three := startCluster(t, 3, "--data-groups", "3")
	waitGroupLeaders(t, three.nodes, 3, preferred)
	waitLogFormat(t, three.nodes[0], 2)
	return []kafkaTarget{
		{"single", []string{single.kafkaAddr}, single.logTail},
		{"follower", []string{follower.kafkaAddr}, one.diagnose},
		{"all-nodes", one.kafkaAddrs(), one.diagnose},
		{"three-groups", []string{three.nodes[0].kafkaAddr}, three.diagnose},
	}
}

// kafkaClientCase is one client's check: it gets the bootstrap addresses
// and a topic and group name of its own.
type kafkaClientCase struct {
	name string
	run  func(t *testing.T, bootstrap []string, topic, group string)
}

func TestKafkaClientMatrix(t *testing.T) {
	cases := []kafkaClientCase{
		{"kgo", kgoRoundTrip},
		{"kgo-848", kgoServerSideGroup},
		{"kgo-txn", kgoTransactions},
		{"kadm", kadmAdmin},
		{"kcat", kcatRoundTrip},
		{"kcat-idempotent", kcatIdempotentProducer},
		{"kcat-group", kcatGroupConsumer},
		{"kafka-python", kafkaPythonRoundTrip},
		{"kafkajs", kafkaJSRoundTrip},
		{"kafkajs-txn", kafkaJSTransactions},
		{"confluent-txn", confluentTransactions},
	}
	for _, target := range startKafkaTargets(t) {
		t.Run(target.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					name := target.name + "-" + c.name
					c.run(t, target.bootstrap, "t-"+name, "g-"+name)
					if t.Failed() {
						t.Log(target.log())
					}
				})
			}
		})
	}
}

// kgoRoundTrip: franz-go's idempotent producer writes 200 keyed records to
// a topic the first produce creates, a group member reads them all back
// and commits, and the committed offsets are there.
func kgoRoundTrip(t *testing.T, bootstrap []string, topic, group string) {
	cl := kafkaClient(t, bootstrap, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic), kgoLogger(t, "producer"))
	recs := make([]*kgo.Record, 200)
	for i := range recs {
		recs[i] = &kgo.Record{Key: []byte(strconv.Itoa(i % 7)), Value: []byte("v" + strconv.Itoa(i))}
	}
	produceSync(t, cl, recs...)
	member := kafkaClient(t, bootstrap, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgoLogger(t, "member"))
	seen := map[string]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for len(seen) < len(recs) {
		fs := member.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the group member read %d of %d records", len(seen), len(recs))
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	if err := member.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	offsets, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil || offsets.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, offsets.Error())
	}
	var total int64
	offsets.Each(func(o kadm.OffsetResponse) { total += o.At })
	if total != int64(len(recs)) {
		t.Fatalf("committed offsets add up to %d, want %d", total, len(recs))
	}
}

// kgoServerSideGroup: two KIP-848 members (the broker assigns) share a
// 4-partition topic and read every record between them, once.
func kgoServerSideGroup(t *testing.T, bootstrap []string, topic, group string) {
	cl := kafkaClient(t, bootstrap, kgo.DefaultProduceTopic(topic))
	createTopic(t, cl, topic, 4, nil)
	recs := make([]*kgo.Record, 100)
	for i := range recs {
		recs[i] = &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))}
	}
	produceSync(t, cl, recs...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var members []*kgo.Client
	for i := range 2 {
		members = append(members, kafkaClient(t, bootstrap, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.Balancers(kgo.StickyBalancer()), kgo.ServerSideBalancer(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgoLogger(t, fmt.Sprintf("member-%d", i))))
	}
	seen := map[string]int{}
	for len(seen) < len(recs) {
		for _, m := range members {
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			m.PollFetches(pctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
			pcancel()
		}
		if ctx.Err() != nil {
			t.Fatalf("the KIP-848 members read %d of %d records", len(seen), len(recs))
		}
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("record %s read %d times", v, n)
		}
	}
}

// kgoTransactions: franz-go's transactional producer commits ten records
// and aborts five; a read_committed consumer reads the ten only.
func kgoTransactions(t *testing.T, bootstrap []string, topic, _ string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The transactional id shares the topic's name up to its first dot: with
	// several raft groups a transaction writes its own group's topics.
	txn := kafkaClient(t, bootstrap, kgo.TransactionalID(topic+".txn"), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgoLogger(t, "txn"))
	for _, end := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		n := map[kgo.TransactionEndTry]int{kgo.TryCommit: 10, kgo.TryAbort: 5}[end]
		for i := range n {
			txn.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%v-%d", end, i))}, nil)
		}
		if err := txn.Flush(ctx); err != nil {
			t.Fatalf("flush: %v", err)
		}
		if err := txn.EndTransaction(ctx, end); err != nil {
			t.Fatalf("end transaction (%v): %v", end, err)
		}
	}
	// The last stable offset is past the abort marker once the consumer
	// has read ten records and reached the end.
	got := consumeN(t, bootstrap, topic, 10, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	for _, r := range got {
		if !strings.HasPrefix(string(r.Value), fmt.Sprint(kgo.TryCommit)) {
			t.Fatalf("read_committed read an aborted record %q", r.Value)
		}
	}
}

// kadmAdmin reproduces issue 30's admin failures through a follower:
// right after CreateTopics every broker describes the topic and its
// configs (none answers UNKNOWN_TOPIC_OR_PARTITION), offsets commit and
// delete at once, and ListGroups, DescribeGroups and DeleteGroups, which
// kadm sends to every broker or to the coordinator, succeed.
func kadmAdmin(t *testing.T, bootstrap []string, topic, group string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, bootstrap, kgoLogger(t, "admin"))
	adm := kadm.NewClient(cl)
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		t.Fatalf("list brokers: %v", err)
	}
	created, err := adm.CreateTopic(ctx, 2, -1, map[string]*string{"retention.ms": kmsg.StringPtr("3600000")}, topic)
	if err != nil || created.Err != nil {
		t.Fatalf("create topic: %v %v", err, created.Err)
	}
	// describeOnEvery asks each broker for the topic's retention.ms.
	describeOnEvery := func(when, want string) {
		t.Helper()
		for _, b := range brokers {
			req := kmsg.NewPtrDescribeConfigsRequest()
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
			req.Resources = append(req.Resources, r)
			resp, err := req.RequestWith(ctx, cl.Broker(int(b.NodeID)))
			if err != nil {
				t.Fatalf("describe configs on broker %d: %v", b.NodeID, err)
			}
			got := resp.Resources[0]
			if err := kerr.ErrorForCode(got.ErrorCode); err != nil {
				t.Fatalf("describe configs on broker %d right after %s: %v", b.NodeID, when, err)
			}
			value := "(not listed)"
			for _, c := range got.Configs {
				if c.Name == "retention.ms" && c.Value != nil {
					value = *c.Value
				}
			}
			if value != want {
				t.Fatalf("broker %d describes retention.ms=%s right after %s, want %s", b.NodeID, value, when, want)
			}
		}
	}
	describeOnEvery("the topic was created", "3600000")
	altered, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kmsg.StringPtr("7200000")}}, topic)
	if err != nil || len(altered) != 1 || altered[0].Err != nil {
		t.Fatalf("alter topic configs: %v %+v", err, altered)
	}
	describeOnEvery("the config was altered", "7200000")
	for _, b := range brokers {
		meta := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		meta.Topics = append(meta.Topics, mt)
		mresp, err := meta.RequestWith(ctx, cl.Broker(int(b.NodeID)))
		if err != nil || kerr.ErrorForCode(mresp.Topics[0].ErrorCode) != nil || len(mresp.Topics[0].Partitions) != 2 {
			t.Fatalf("metadata on broker %d right after the topic was created: %v %+v", b.NodeID, err, mresp)
		}
	}

	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: 0, LeaderEpoch: -1})
	offsets.Add(kadm.Offset{Topic: topic, Partition: 1, At: 0, LeaderEpoch: -1})
	committed, err := adm.CommitOffsets(ctx, group, offsets)
	if err != nil || committed.Error() != nil {
		t.Fatalf("commit offsets right after the topic was created: %v %v", err, committed.Error())
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatalf("list groups (sent to every broker): %v", err)
	}
	if !slices.Contains(listed.Groups(), group) {
		t.Fatalf("list groups: %v, want %s among them", listed.Groups(), group)
	}
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil || described.Error() != nil {
		t.Fatalf("describe groups: %v %v", err, described.Error())
	}
	deleted, err := adm.DeleteOffsets(ctx, group, kadm.TopicsSet{topic: {1: {}}})
	if err != nil || deleted.Error() != nil {
		t.Fatalf("delete offsets: %v %v", err, deleted.Error())
	}
	fetched, err := adm.FetchOffsets(ctx, group)
	if err != nil || fetched.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, fetched.Error())
	}
	if _, ok := fetched.Lookup(topic, 1); ok {
		t.Fatalf("partition 1's offset is still committed after OffsetDelete")
	}
	if _, ok := fetched.Lookup(topic, 0); !ok {
		t.Fatalf("partition 0's offset is gone: %+v", fetched)
	}
	gone, err := adm.DeleteGroups(ctx, group)
	if err != nil || gone.Error() != nil {
		t.Fatalf("delete groups: %v %v", err, gone.Error())
	}
	if _, err := adm.ListTransactions(ctx, nil, nil); err != nil {
		t.Fatalf("list transactions (sent to every broker): %v", err)
	}
}

// kcatRoundTrip reproduces issue 30's "Message timed out": kcat (librdkafka)
// produces to a topic that does not exist yet, which Metadata creates,
// reads it back, and -L names the topic's leader.
func kcatRoundTrip(t *testing.T, bootstrap []string, topic, _ string) {
	kcat, b := requireKcat(t), strings.Join(bootstrap, ",")
	produce := exec.Command(kcat, "-b", b, "-P", "-t", topic, "-K", ":", "-X", "message.timeout.ms=30000")
	produce.Stdin = strings.NewReader("a:first\nb:second\nc:{\"third\":3}\n")
	if out, err := runWithTimeout(t, produce, time.Minute); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	out, err := runWithTimeout(t, exec.Command(kcat, "-b", b, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%k=%s@%o\n"), time.Minute)
	if err != nil || string(out) != "a=first@0\nb=second@1\nc={\"third\":3}@2\n" {
		t.Fatalf("kcat -C: %v\n%q", err, out)
	}
	meta, err := runWithTimeout(t, exec.Command(kcat, "-b", b, "-L", "-t", topic), time.Minute)
	if err != nil || !strings.Contains(string(meta), fmt.Sprintf("topic %q with 1 partitions", topic)) ||
		!strings.Contains(string(meta), "leader ") || strings.Contains(string(meta), "Leader not available") {
		t.Fatalf("kcat -L: %v\n%s", err, meta)
	}
}

// kcatIdempotentProducer: librdkafka's idempotent producer (issue 30: 0 of
// 500 delivered through a follower) delivers 500 messages, each once, in
// order.
func kcatIdempotentProducer(t *testing.T, bootstrap []string, topic, _ string) {
	kcat, b := requireKcat(t), strings.Join(bootstrap, ",")
	var in strings.Builder
	for i := range 500 {
		fmt.Fprintf(&in, "%d\n", i)
	}
	produce := exec.Command(kcat, "-b", b, "-P", "-t", topic, "-X", "enable.idempotence=true", "-X", "message.timeout.ms=30000")
	produce.Stdin = strings.NewReader(in.String())
	if out, err := runWithTimeout(t, produce, time.Minute); err != nil {
		t.Fatalf("kcat -P idempotent: %v\n%s", err, out)
	}
	out, err := runWithTimeout(t, exec.Command(kcat, "-b", b, "-C", "-t", topic, "-o", "beginning", "-e", "-q"), time.Minute)
	if err != nil || string(out) != in.String() {
		t.Fatalf("kcat -C read %d bytes, want the 500 lines in order: %v\n%.300q", len(out), err, out)
	}
}

// kcatGroupConsumer: librdkafka's group consumer reads every record of a
// 2-partition topic.
func kcatGroupConsumer(t *testing.T, bootstrap []string, topic, group string) {
	kcat := requireKcat(t)
	cl := kafkaClient(t, bootstrap, kgo.DefaultProduceTopic(topic))
	createTopic(t, cl, topic, 2, nil)
	produceSync(t, cl, &kgo.Record{Key: []byte("a"), Value: []byte("one")}, &kgo.Record{Key: []byte("b"), Value: []byte("two")},
		&kgo.Record{Key: []byte("c"), Value: []byte("three")})
	cmd := exec.Command(kcat, "-b", strings.Join(bootstrap, ","), "-G", group, "-c", "3", "-f", "%s\n", "-X", "auto.offset.reset=earliest", topic)
	out, err := runWithTimeout(t, cmd, 60*time.Second)
	got := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		got[strings.TrimSpace(l)] = true
	}
	if err != nil || !got["one"] || !got["two"] || !got["three"] {
		t.Fatalf("kcat -G: %v\n%s", err, out)
	}
}

// runClient runs a client script from integration/clients with the
// bootstrap addresses (comma-separated), a topic and a group, and returns
// what it printed.
func runClient(t *testing.T, bootstrap []string, topic, group, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, append(args, strings.Join(bootstrap, ","), topic, group)...)
	cmd.Dir = "clients"
	out, err := runWithTimeout(t, cmd, 2*time.Minute)
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// python3 is Debian's interpreter with module importable (.ci/run installs
// the Debian package that has it).
func python3(t *testing.T, module, pkg string) string {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import "+module).Run(); err != nil {
		t.Fatalf("%s is not importable by %s (apt-get install -y %s; .ci/run does this)", module, py, pkg)
	}
	return py
}

// requireKafkaJS fails the test when KafkaJS is not installed.
func requireKafkaJS(t *testing.T) {
	if _, err := os.Stat("clients/node_modules/kafkajs"); err != nil {
		t.Fatal("kafkajs is not installed (cd integration/clients && npm ci; .ci/run does this)")
	}
}

// kafka-python 2.0.2 (Debian python3-kafka): it picks old API versions from
// what ApiVersions offers; produces three records and reads them back as a
// consumer-group member.
func kafkaPythonRoundTrip(t *testing.T, bootstrap []string, topic, group string) {
	py := python3(t, "kafka", "python3-kafka")
	if got := runClient(t, bootstrap, topic, group, py, "kafka_python_roundtrip.py"); got != "py-0,py-1,py-2" {
		t.Fatalf("kafka-python read %q", got)
	}
}

// KafkaJS 2.2.4 (npm): old non-flexible versions, idempotent producer,
// consumer group.
func kafkaJSRoundTrip(t *testing.T, bootstrap []string, topic, group string) {
	requireKafkaJS(t)
	if got := runClient(t, bootstrap, topic, group, "node", "kafkajs_roundtrip.js"); got != "js-0,js-1,js-2" {
		t.Fatalf("KafkaJS read %q", got)
	}
}

// KafkaJS 2.2.4 transactions: a committed transaction's records and
// offset are visible, an aborted one's are not (its read_committed
// consumer skips them, its offset never lands).
func kafkaJSTransactions(t *testing.T, bootstrap []string, topic, group string) {
	requireKafkaJS(t)
	if got := runClient(t, bootstrap, topic, group, "node", "kafkajs_txn.js"); got != "js-c0,js-c1,js-c2;offset=2" {
		t.Fatalf("KafkaJS transactions: %q", got)
	}
}

// confluent-kafka-python 1.7.0 (librdkafka 2.0.2) transactions:
// init_transactions, commit_transaction, abort_transaction, a
// read_committed consumer, and send_offsets_to_transaction with the
// consumer's group metadata (TxnOffsetCommit v3 checks its generation).
func confluentTransactions(t *testing.T, bootstrap []string, topic, group string) {
	py := python3(t, "confluent_kafka", "python3-confluent-kafka")
	if got := runClient(t, bootstrap, topic, group, py, "confluent_txn.py"); got != "py-c0,py-c1,py-c2;offsets=ok" {
		t.Fatalf("confluent-kafka-python transactions: %q", got)
	}
}
