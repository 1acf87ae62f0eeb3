package integration

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// runClient runs a client script from integration/clients against a fresh
// node and returns what it printed. Each script produces three records and
// reads them back as a consumer-group member.
func runClient(t *testing.T, name string, args ...string) string {
	t.Helper()
	n := startSingle(t)
	waitLogFormat(t, n, 2) // the transaction scripts write format 2 entries
	cmd := exec.Command(name, append(args, n.kafkaAddr, "clients-topic", "clients-group")...)
	cmd.Dir = "clients"
	out, err := runWithTimeout(t, cmd, 2*time.Minute)
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// kafka-python 2.0.2 (Debian python3-kafka): it picks old API versions from
// what ApiVersions offers.
func TestKafkaPythonClient(t *testing.T) {
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Fatal("/usr/bin/python3 is missing")
	}
	if err := exec.Command(py, "-c", "import kafka").Run(); err != nil {
		t.Fatal("kafka-python is not installed (apt-get install -y python3-kafka; .ci/run does this)")
	}
	if got := runClient(t, py, "kafka_python_roundtrip.py"); got != "py-0,py-1,py-2" {
		t.Fatalf("kafka-python read %q", got)
	}
}

// KafkaJS 2.2.4 (npm): old non-flexible versions, idempotent producer,
// consumer group.
func TestKafkaJSClient(t *testing.T) {
	if _, err := os.Stat("clients/node_modules/kafkajs"); err != nil {
		t.Fatal("kafkajs is not installed (cd integration/clients && npm ci; .ci/run does this)")
	}
	if got := runClient(t, "node", "kafkajs_roundtrip.js"); got != "js-0,js-1,js-2" {
		t.Fatalf("KafkaJS read %q", got)
	}
}

// KafkaJS 2.2.4 transactions: a committed transaction's records and
// offset are visible, an aborted one's are not (its read_committed
// consumer skips them, its offset never lands).
func TestKafkaJSTransactions(t *testing.T) {
	if _, err := os.Stat("clients/node_modules/kafkajs"); err != nil {
		t.Fatal("kafkajs is not installed (cd integration/clients && npm ci; .ci/run does this)")
	}
	if got := runClient(t, "node", "kafkajs_txn.js"); got != "js-c0,js-c1,js-c2;offset=2" {
		t.Fatalf("KafkaJS transactions: %q", got)
	}
}

// confluent-kafka-python 1.7.0 (librdkafka 2.0.2) transactions:
// init_transactions, commit_transaction, abort_transaction, a
// read_committed consumer, and send_offsets_to_transaction with the
// consumer's group metadata (TxnOffsetCommit v3 checks its generation).
func TestConfluentKafkaPythonTransactions(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import confluent_kafka").Run(); err != nil {
		t.Fatal("confluent-kafka-python is not installed (apt-get install -y python3-confluent-kafka; .ci/run does this)")
	}
	if got := runClient(t, py, "confluent_txn.py"); got != "py-c0,py-c1,py-c2;offsets=ok" {
		t.Fatalf("confluent-kafka-python transactions: %q", got)
	}
}
