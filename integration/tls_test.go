package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/waggle-mq/waggle/command"
)

// devCerts runs `waggle certs dev` into a new directory and returns it.
func devCerts(t *testing.T, nodes int) string {
	dir := t.TempDir()
	if out, err := exec.Command(waggleBinary, "certs", "dev", "--out", dir, "--nodes", fmt.Sprint(nodes)).CombinedOutput(); err != nil {
		t.Fatalf("waggle certs dev: %v %s", err, out)
	}
	return dir
}

// trustCA makes the harness's HTTP client trust the CAs in dirs for the
// rest of the test, and present the first one's client certificate (which
// makes it an admin of a node with --auth), and returns a TLS client
// configuration that trusts the CAs and presents no certificate.
func trustCA(t *testing.T, dirs ...string) *tls.Config {
	pool := x509.NewCertPool()
	for _, dir := range dirs {
		pem, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
		if err != nil {
			t.Fatal(err)
		}
		pool.AppendCertsFromPEM(pem)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dirs[0], "client.pem"), filepath.Join(dirs[0], "client-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	conf := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	withCert := conf.Clone()
	withCert.Certificates = []tls.Certificate{cert}
	old := client.Transport
	client.Transport = &http.Transport{TLSClientConfig: withCert}
	t.Cleanup(func() { client.Transport = old })
	return conf
}

// useCerts makes n serve TLS with node-<i> from certDir.
func useCerts(n *node, certDir string, i int) {
	n.scheme = "https"
	n.ownArgs = append(n.ownArgs,
		"--tls-cert", filepath.Join(certDir, fmt.Sprintf("node-%d.pem", i)),
		"--tls-key", filepath.Join(certDir, fmt.Sprintf("node-%d-key.pem", i)),
		"--tls-ca", filepath.Join(certDir, "ca.pem"))
}

// A cluster over TLS: raft between nodes is mutual TLS, HTTP (forwarding
// included) is HTTPS, the Kafka listener is TLS; a plaintext client is
// refused at the Kafka port.
func TestTLSClusterServesHTTPSAndKafkaOverTLS(t *testing.T) {
	certs := devCerts(t, 3)
	clientTLS := trustCA(t, certs)
	c := newCluster(t, 3)
	for i, n := range c.nodes {
		useCerts(n, certs, i+1)
	}
	c.start()

	// The leader asks each member over HTTPS which log format it reads,
	// and raises the cluster's to the newest.
	waitFor(t, 30*time.Second, func() error {
		var cl struct {
			LogFormat int `json:"logFormat"`
		}
		if status := getJSON(t, c.leader().url("/api/v1/cluster"), &cl); status != http.StatusOK || cl.LogFormat != int(command.MaxLogFormat) {
			return fmt.Errorf("cluster log format %d (status %d), want %d", cl.LogFormat, status, command.MaxLogFormat)
		}
		return nil
	})

	// A write to a follower is forwarded to the leader over HTTPS.
	f := c.followers()[0]
	var out []pushAnswer
	if status := postJSON(t, f.url("/api/v1/push"), map[string]any{"items": []pushItem{{Queue: "tls", TransactionID: "a", Payload: "x"}}}, &out); status != http.StatusCreated {
		t.Fatalf("push through a follower over HTTPS: status %d", status)
	}

	brokers := c.kafkaAddrs()
	cl := kafkaClient(t, brokers, kgo.DialTLSConfig(clientTLS), kgo.DefaultProduceTopic("tls-k"), kgo.ConsumeTopics("tls-k"))
	createTopic(t, cl, "tls-k", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("over tls")}).FirstErr(); err != nil {
		t.Fatalf("produce over TLS: %v", err)
	}
	if recs := cl.PollFetches(ctx).Records(); len(recs) != 1 || string(recs[0].Value) != "over tls" {
		t.Fatalf("consume over TLS: %v", recs)
	}

	plain := kafkaClient(t, brokers, kgo.RetryTimeout(2*time.Second), kgo.RequestRetries(1))
	pctx, pcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer pcancel()
	if err := plain.Ping(pctx); err == nil {
		t.Fatal("a plaintext Kafka client was served on the TLS port")
	}
}

// A node whose certificate another CA signed cannot join: the others end
// its raft connections in the handshake, so it never learns the leader or
// applies an entry, and the cluster goes on without it.
func TestNodeWithForeignCertificateCannotJoin(t *testing.T) {
	certs, foreign := devCerts(t, 3), devCerts(t, 3)
	// The harness's client certificate is from certs; the intruder, which
	// trusts only foreign, is asked with no certificate at all.
	anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: trustCA(t, certs, foreign)}, Timeout: 5 * time.Second}
	c := newCluster(t, 3)
	for i, n := range c.nodes[:2] {
		useCerts(n, certs, i+1)
	}
	intruder := c.nodes[2]
	useCerts(intruder, foreign, 3)
	var peers []string
	for _, n := range c.nodes {
		peers = append(peers, fmt.Sprintf("%d=%s", n.id, n.raftAddr))
	}
	for _, n := range c.nodes {
		n.args = append([]string{"--peers", strings.Join(peers, ",")}, n.ownArgs...)
		n.start()
	}
	l := c.leader()
	if l == intruder {
		t.Fatal("the node with a foreign certificate leads")
	}
	c.pushUntilAccepted(10*time.Second, pushItem{Queue: "tls", TransactionID: "a", Payload: "x"})
	// The leader tries to reach the intruder every heartbeat; its TLS
	// handshakes fail on both sides.
	waitFor(t, 10*time.Second, func() error {
		if log, _ := os.ReadFile(intruder.logPath); !strings.Contains(string(log), "certificate") {
			return errors.New("the intruder's log shows no refused certificate yet")
		}
		return nil
	})
	resp, err := anonymous.Get(intruder.url("/health"))
	if err != nil {
		t.Fatal(err)
	}
	var h healthAnswer
	decodeJSON(t, resp, &h)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || h.Raft.Applied > 0 || h.Raft.LeaderHTTP != "" {
		t.Fatalf("the intruder is part of the cluster: status %d %+v", resp.StatusCode, h.Raft)
	}
	if got := idSet(l.fetchAll("tls", "Default")); !got["a"] {
		t.Fatal("the cluster lost its write")
	}
}
