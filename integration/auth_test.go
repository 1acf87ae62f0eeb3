package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const bootstrapToken = "bootstrap-token-for-tests-0123456789"

// startSecured starts a single node with --auth, the bootstrap token and
// the extra flags, and waits until it leads.
func startSecured(t *testing.T, extra ...string) *node {
	return startSecuredNode(t, newNode(t, 1), extra...)
}

// startSecuredNode starts n (with its own flags, a certificate say) the
// way startSecured does.
func startSecuredNode(t *testing.T, n *node, extra ...string) *node {
	n.args = append(append(authFlags(t), extra...), n.ownArgs...)
	n.start()
	n.waitLeader()
	return n
}

// authFlags turn --auth on with the bootstrap token in a file.
func authFlags(t *testing.T) []string {
	tokenFile := filepath.Join(t.TempDir(), "bootstrap")
	if err := os.WriteFile(tokenFile, []byte(bootstrapToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--auth", "--bootstrap-token-file", tokenFile}
}

// authDo sends a request with a bearer token (none when empty) and returns
// the status, decoding a JSON answer into out.
func authDo(t testing.TB, method, url, token string, in, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, jsonBody(t, in))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		decodeJSON(t, resp, out)
	}
	return resp.StatusCode
}

// addUser adds a SASL user whose password is <name>-secret.
func addUser(t *testing.T, n *node, name, role string, queuesAndGroups ...[]string) {
	body := map[string]any{"name": name, "password": name + "-secret", "role": role}
	if len(queuesAndGroups) == 2 {
		body["queues"], body["groups"] = queuesAndGroups[0], queuesAndGroups[1]
	}
	if status := authDo(t, http.MethodPost, n.url("/api/v1/auth/users"), bootstrapToken, body, nil); status != http.StatusOK {
		t.Fatalf("add user %s: %d", name, status)
	}
}

// createToken makes a token with the bootstrap admin token.
func createToken(t *testing.T, n *node, name, role string, queues ...string) string {
	var out struct{ Token string }
	if status := authDo(t, http.MethodPost, n.url("/api/v1/auth/tokens"), bootstrapToken, map[string]any{"name": name, "role": role, "queues": queues}, &out); status != http.StatusOK || out.Token == "" {
		t.Fatalf("create token %s: status %d", name, status)
	}
	return out.Token
}

func pushAs(t *testing.T, n *node, token, queue string) int {
	return authDo(t, http.MethodPost, n.url("/api/v1/push"), token, map[string]any{"items": []pushItem{{Queue: queue, TransactionID: fmt.Sprint(time.Now().UnixNano()), Payload: "x"}}}, nil)
}

func fetchAs(t *testing.T, n *node, token, queue string) int {
	return authDo(t, http.MethodPost, n.url("/api/v1/fetch"), token, map[string]any{"entries": []map[string]any{{"queue": queue, "partition": "Default", "offset": 0}}}, nil)
}

// HTTP with --auth: 401 without or with a bad token, 403 for a role or a
// name pattern that does not allow the call, /health stays public.
func TestHTTPTokensAndRoles(t *testing.T) {
	n := startSecured(t)
	if status := authDo(t, http.MethodGet, n.url("/health"), "", nil, nil); status != http.StatusOK {
		t.Fatalf("/health without a token: %d, want 200", status)
	}
	for name, token := range map[string]string{"no token": "", "unknown token": "wgl_0000", "bad JWT": "a.b.c"} {
		if status := pushAs(t, n, token, "orders.eu"); status != http.StatusUnauthorized {
			t.Errorf("push with %s: %d, want 401", name, status)
		}
	}
	reader := createToken(t, n, "reader", "read-only")
	writer := createToken(t, n, "writer", "write-only")
	orders := createToken(t, n, "orders", "read-write", "orders.*")
	for _, c := range []struct {
		what   string
		status int
		want   int
	}{
		{"write-only pushes", pushAs(t, n, writer, "orders.eu"), http.StatusCreated},
		{"read-only pushes", pushAs(t, n, reader, "orders.eu"), http.StatusForbidden},
		{"read-only fetches", fetchAs(t, n, reader, "orders.eu"), http.StatusOK},
		{"write-only fetches", fetchAs(t, n, writer, "orders.eu"), http.StatusForbidden},
		{"orders.* pushes to orders.us", pushAs(t, n, orders, "orders.us"), http.StatusCreated},
		{"orders.* pushes to payroll", pushAs(t, n, orders, "payroll"), http.StatusForbidden},
		{"orders.* fetches payroll", fetchAs(t, n, orders, "payroll"), http.StatusForbidden},
		{"read-write configures a queue", authDo(t, http.MethodPost, n.url("/api/v1/configure"), orders, map[string]any{"queue": "orders.eu", "options": map[string]any{}}, nil), http.StatusForbidden},
		{"read-write makes a token", authDo(t, http.MethodPost, n.url("/api/v1/auth/tokens"), orders, map[string]any{"name": "x", "role": "admin"}, nil), http.StatusForbidden},
		{"admin configures a queue", authDo(t, http.MethodPost, n.url("/api/v1/configure"), bootstrapToken, map[string]any{"queue": "orders.eu", "options": map[string]any{}}, nil), http.StatusOK},
		{"read-write uses the KV store's reserved namespace", authDo(t, http.MethodPost, n.url("/api/v1/kv"), orders, map[string]any{"operations": []map[string]any{{"op": "get", "ns": "__waggle.auth", "key": "n/reader"}}}, nil), http.StatusBadRequest},
	} {
		if c.status != c.want {
			t.Errorf("%s: %d, want %d", c.what, c.status, c.want)
		}
	}
	// Groups: a token limited to group billing may not ack in another.
	var grp struct{ Token string }
	authDo(t, http.MethodPost, n.url("/api/v1/auth/tokens"), bootstrapToken, map[string]any{"name": "grp", "role": "read-write", "groups": []string{"billing"}}, &grp)
	ack := func(group string) int {
		return authDo(t, http.MethodPost, n.url("/api/v1/ack"), grp.Token, map[string]any{"transactionId": "x", "partitionId": "p", "leaseId": "l", "consumerGroup": group, "status": "completed"}, nil)
	}
	if ack("other") != http.StatusForbidden || ack("billing") != http.StatusOK {
		t.Errorf("acks of a billing-only token: other %d (want 403), billing %d (want 200, an item error)", ack("other"), ack("billing"))
	}

	// Extending a lease checks the lease's group and queue.
	var popped popAnswer
	if status := authDo(t, http.MethodGet, n.url("/api/v1/pop/queue/orders.us?consumerGroup=billing"), grp.Token, nil, &popped); status != http.StatusOK || popped.LeaseID == "" {
		t.Fatalf("pop orders.us in billing: %d %+v", status, popped)
	}
	other := createToken(t, n, "other", "read-write", "other.*")
	extend := func(token string) int {
		return authDo(t, http.MethodPost, n.url("/api/v1/lease/"+popped.LeaseID+"/extend"), token, map[string]any{"seconds": 30}, nil)
	}
	if got := extend(other); got != http.StatusForbidden {
		t.Errorf("a token for other.* extends a lease on orders.us: %d, want 403", got)
	}
	if got := extend(grp.Token); got != http.StatusOK {
		t.Errorf("the popping token extends its lease: %d, want 200", got)
	}

	// Replaying a dead letter checks the queue it goes back to.
	authDo(t, http.MethodPost, n.url("/api/v1/configure"), bootstrapToken, map[string]any{"queue": "orders.dl", "options": map[string]any{"retryLimit": 1}}, nil)
	pushAs(t, n, bootstrapToken, "orders.dl")
	for range 2 {
		var got popAnswer
		if status := authDo(t, http.MethodGet, n.url("/api/v1/pop/queue/orders.dl"), bootstrapToken, nil, &got); status != http.StatusOK {
			t.Fatalf("pop orders.dl: %d", status)
		}
		m := got.Messages[0]
		authDo(t, http.MethodPost, n.url("/api/v1/ack"), bootstrapToken, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "failed", "error": "test"}, nil)
	}
	var dl struct{ Messages []struct{ ID string } }
	if authDo(t, http.MethodGet, n.url("/api/v1/dlq?queue=orders.dl"), bootstrapToken, nil, &dl); len(dl.Messages) != 1 {
		t.Fatalf("dead letters of orders.dl: %+v", dl)
	}
	replay := func(token string) int {
		return authDo(t, http.MethodPost, n.url("/api/v1/dlq/"+dl.Messages[0].ID+"/replay"), token, struct{}{}, nil)
	}
	if got := replay(other); got != http.StatusForbidden {
		t.Errorf("a token for other.* replays into orders.dl: %d, want 403", got)
	}
	if got := replay(orders); got != http.StatusOK {
		t.Errorf("a token for orders.* replays into orders.dl: %d, want 200", got)
	}

	// The CLI: `waggle token create` with the bootstrap token prints a
	// token that works with its role.
	out, err := exec.Command(waggleBinary, "token", "create", "cli-reader", "--role", "read-only",
		"--server", "http://"+n.httpAddr, "--token", bootstrapToken).Output()
	if err != nil {
		t.Fatalf("waggle token create: %v", err)
	}
	cliToken := strings.TrimSpace(string(out))
	if fetchAs(t, n, cliToken, "orders.eu") != http.StatusOK || pushAs(t, n, cliToken, "orders.eu") != http.StatusForbidden {
		t.Fatal("the CLI-made read-only token does not act read-only")
	}
	if out, err := exec.Command(waggleBinary, "token", "list", "--server", "http://"+n.httpAddr, "--token", cliToken).CombinedOutput(); err == nil {
		t.Fatalf("a read-only token listed tokens: %s", out)
	}
	// A revoked token stops working.
	if status := authDo(t, http.MethodDelete, n.url("/api/v1/auth/tokens/writer"), bootstrapToken, nil, nil); status != http.StatusOK {
		t.Fatalf("revoke: %d", status)
	}
	if status := pushAs(t, n, writer, "orders.eu"); status != http.StatusUnauthorized {
		t.Fatalf("push with a revoked token: %d, want 401", status)
	}
}

// JWTs signed with the configured HS256 secret are accepted while valid;
// expired ones, ones for another audience and unsigned ("none") ones are
// refused.
func TestHTTPJWT(t *testing.T) {
	secret := []byte("a-shared-secret-of-at-least-32-bytes!!")
	keyFile := filepath.Join(t.TempDir(), "jwt.key")
	os.WriteFile(keyFile, secret, 0o600)
	n := startSecured(t, "--jwt-hs256-key-file", keyFile, "--jwt-audience", "waggle")
	sign := func(method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(method, claims).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	valid := jwt.MapClaims{"sub": "svc-a", "role": "write-only", "aud": "waggle", "exp": time.Now().Add(time.Hour).Unix()}
	expired := jwt.MapClaims{"sub": "svc-a", "role": "write-only", "aud": "waggle", "exp": time.Now().Add(-time.Minute).Unix()}
	otherAud := jwt.MapClaims{"sub": "svc-a", "role": "write-only", "aud": "someone-else", "exp": time.Now().Add(time.Hour).Unix()}
	for _, c := range []struct {
		what  string
		token string
		want  int
	}{
		{"valid HS256", sign(jwt.SigningMethodHS256, secret, valid), http.StatusCreated},
		{"expired", sign(jwt.SigningMethodHS256, secret, expired), http.StatusUnauthorized},
		{"other audience", sign(jwt.SigningMethodHS256, secret, otherAud), http.StatusUnauthorized},
		{"alg none", sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, valid), http.StatusUnauthorized},
		{"wrong secret", sign(jwt.SigningMethodHS256, []byte("another-secret-of-at-least-32-bytes!!!"), valid), http.StatusUnauthorized},
	} {
		if status := pushAs(t, n, c.token, "jwt-q"); status != c.want {
			t.Errorf("%s: %d, want %d", c.what, status, c.want)
		}
	}
	if status := fetchAs(t, n, sign(jwt.SigningMethodHS256, secret, valid), "jwt-q"); status != http.StatusForbidden {
		t.Errorf("a write-only JWT fetches: %d, want 403", status)
	}
}

// Kafka SASL over TLS: SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN with the
// right password work; a wrong password, an unknown user, no SASL at all
// and plaintext to the TLS port fail cleanly; kcat with SASL_SSL works.
func TestKafkaSASLOverTLS(t *testing.T) {
	certs := devCerts(t, 1)
	clientTLS := trustCA(t, certs)
	n := newNode(t, 1)
	useCerts(n, certs, 1)
	startSecuredNode(t, n)
	addUser(t, n, "alice", "read-write")
	addUser(t, n, "root", "admin")
	connect := func(mech sasl.Mechanism, extra ...kgo.Opt) *kgo.Client {
		opts := append([]kgo.Opt{kgo.DialTLSConfig(clientTLS), kgo.RetryTimeout(3 * time.Second), kgo.RequestRetries(1)}, extra...)
		if mech != nil {
			opts = append(opts, kgo.SASL(mech))
		}
		return kafkaClient(t, []string{n.kafkaAddr}, opts...)
	}
	root := connect(scram.Auth{User: "root", Pass: "root-secret"}.AsSha512Mechanism())
	for _, topic := range []string{"sasl-scramsha256", "sasl-scramsha512", "sasl-plain", "sasl-kcat"} {
		createTopic(t, root, topic, 1, nil)
	}
	// With --auth the ACL APIs answer (kafka_acl_test.go has the rest):
	// no bindings yet.
	acls := kmsg.NewPtrDescribeACLsRequest()
	acls.ResourceType, acls.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	acls.Operation, acls.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if resp, err := acls.RequestWith(context.Background(), root); err != nil || resp.ErrorCode != 0 || len(resp.Resources) != 0 {
		t.Fatalf("DescribeAcls with --auth: %+v, %v; want no bindings", resp, err)
	}
	alice := scram.Auth{User: "alice", Pass: "alice-secret"}
	for name, mech := range map[string]sasl.Mechanism{
		"SCRAM-SHA-256": alice.AsSha256Mechanism(),
		"SCRAM-SHA-512": alice.AsSha512Mechanism(),
		"PLAIN":         plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(),
	} {
		topic := "sasl-" + strings.ToLower(strings.ReplaceAll(name, "-", ""))
		cl := connect(mech, kgo.DefaultProduceTopic(topic), kgo.ConsumeTopics(topic))
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(name)}).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", name, err)
		}
		if recs := cl.PollFetches(ctx).Records(); len(recs) != 1 || string(recs[0].Value) != name {
			t.Fatalf("%s: consume: %v", name, recs)
		}
		cancel()
	}
	for name, cl := range map[string]*kgo.Client{
		"wrong password": connect(scram.Auth{User: "alice", Pass: "guess"}.AsSha256Mechanism()),
		"unknown user":   connect(scram.Auth{User: "mallory", Pass: "alice-secret"}.AsSha512Mechanism()),
		"PLAIN, wrong":   connect(plain.Auth{User: "alice", Pass: "guess"}.AsMechanism()),
		"no SASL":        connect(nil),
		"plaintext":      kafkaClient(t, []string{n.kafkaAddr}, kgo.RetryTimeout(3*time.Second), kgo.RequestRetries(1)),
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := cl.Ping(ctx); err == nil {
			t.Errorf("%s: the broker served the client", name)
		}
		cancel()
	}

	// kcat (librdkafka) with SASL_SSL and SCRAM-SHA-256.
	kcat := func(args ...string) ([]byte, error) {
		base := []string{"-b", n.kafkaAddr, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-256",
			"-X", "sasl.username=alice", "-X", "sasl.password=alice-secret", "-X", "ssl.ca.location=" + filepath.Join(certs, "ca.pem")}
		cmd := exec.Command("kcat", append(base, args...)...)
		cmd.Stdin = strings.NewReader("from kcat\n")
		return cmd.CombinedOutput()
	}
	if out, err := kcat("-P", "-t", "sasl-kcat"); err != nil {
		t.Fatalf("kcat produce over SASL_SSL: %v %s\n%s", err, out, n.logTail())
	}
	if out, err := kcat("-C", "-t", "sasl-kcat", "-o", "beginning", "-c", "1", "-e"); err != nil || !strings.Contains(string(out), "from kcat") {
		t.Fatalf("kcat consume over SASL_SSL: %v %s", err, out)
	}
}

// Kafka authorization: a user limited to orders.* and group billing
// produces and consumes there, is refused other topics (and does not see
// them in Metadata) and other groups, and cannot create topics.
func TestKafkaAuthorization(t *testing.T) {
	n := startSecured(t)
	addUser(t, n, "root", "admin")
	addUser(t, n, "bob", "read-write", []string{"orders.*"}, []string{"billing"})
	sasl := func(user string, opts ...kgo.Opt) *kgo.Client {
		m := scram.Auth{User: user, Pass: user + "-secret"}.AsSha256Mechanism()
		return kafkaClient(t, []string{n.kafkaAddr}, append([]kgo.Opt{kgo.SASL(m), kgo.RetryTimeout(3 * time.Second)}, opts...)...)
	}
	root := sasl("root")
	createTopic(t, root, "orders.eu", 1, nil)
	createTopic(t, root, "payroll", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	bob := sasl("bob")
	if err := bob.ProduceSync(ctx, &kgo.Record{Topic: "orders.eu", Value: []byte("ok")}).FirstErr(); err != nil {
		t.Fatalf("bob produces to orders.eu: %v", err)
	}
	if err := bob.ProduceSync(ctx, &kgo.Record{Topic: "payroll", Value: []byte("no")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob produces to payroll: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	meta := kmsg.NewPtrMetadataRequest()
	resp, err := meta.RequestWith(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range resp.Topics {
		if tp.Topic != nil && *tp.Topic == "payroll" {
			t.Fatal("Metadata shows bob the payroll topic")
		}
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "orders.new", 1, 1
	create.Topics = append(create.Topics, ct)
	if cr, err := create.RequestWith(ctx, bob); err != nil || cr.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("bob creates a topic: %v %+v", err, cr)
	}

	billing := sasl("bob", kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders.eu"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if recs := billing.PollFetches(ctx).Records(); len(recs) != 1 || string(recs[0].Value) != "ok" {
		t.Fatalf("bob consumes orders.eu in group billing: %v", recs)
	}
	billing.Close() // leaves the group empty, for the plain commit below

	// A commit naming an allowed and a refused topic commits the allowed
	// one only.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "billing", -1
	for _, topic := range []string{"orders.eu", "payroll"} {
		ct := kmsg.NewOffsetCommitRequestTopic()
		ct.Topic = topic
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset = 0, 1
		ct.Partitions = append(ct.Partitions, cp)
		commit.Topics = append(commit.Topics, ct)
	}
	cresp, err := bob.Broker(1).Request(ctx, commit)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int16{}
	for _, ct := range cresp.(*kmsg.OffsetCommitResponse).Topics {
		codes[ct.Topic] = ct.Partitions[0].ErrorCode
	}
	if codes["orders.eu"] != 0 || codes["payroll"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("mixed commit answered %v, want orders.eu 0 and payroll TOPIC_AUTHORIZATION_FAILED", codes)
	}
	var g struct {
		Cursors []struct {
			Queue  string `json:"queue"`
			Offset int64  `json:"offset"`
		} `json:"cursors"`
	}
	authDo(t, http.MethodGet, n.url("/api/v1/consumer-groups/billing"), bootstrapToken, nil, &g)
	committed := map[string]int64{}
	for _, cur := range g.Cursors {
		committed[cur.Queue] = cur.Offset
	}
	if _, refused := committed["payroll"]; refused || committed["orders.eu"] != 1 {
		t.Fatalf("after the mixed commit the group holds %v, want orders.eu at 1 and no payroll", committed)
	}

	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "other", "consumer", 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	// The client asks FindCoordinator first, which refuses already; sent
	// to the broker directly, JoinGroup is refused too.
	if _, err := join.RequestWith(ctx, bob); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("bob joins group other: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	if resp, err := bob.Broker(1).Request(ctx, join); err != nil || resp.(*kmsg.JoinGroupResponse).ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("bob's JoinGroup sent to the broker: %v %+v", err, resp)
	}
}

// In a cluster with TLS and auth, a follower forwards a client's write
// with the client's token, and the leader judges the client, not the
// follower whose certificate carried it: a token limited to orders.*
// cannot push elsewhere through a follower.
func TestAuthThroughAFollowerJudgesTheClient(t *testing.T) {
	certs := devCerts(t, 3)
	anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: trustCA(t, certs)}, Timeout: 10 * time.Second}
	c := newCluster(t, 3)
	for i, n := range c.nodes {
		useCerts(n, certs, i+1)
	}
	c.start(authFlags(t)...)
	l := c.leader()
	orders := createToken(t, l, "orders", "read-write", "orders.*")
	f := c.followers()[0]
	waitFor(t, 10*time.Second, func() error { // the token reaches the follower's store
		if status := authDo(t, http.MethodGet, f.url("/api/v1/auth/whoami"), orders, nil, nil); status != http.StatusOK {
			return fmt.Errorf("whoami on the follower: %d", status)
		}
		return nil
	})
	if status := pushAs(t, f, orders, "orders.eu"); status != http.StatusCreated {
		t.Fatalf("push to orders.eu through a follower: %d, want 201", status)
	}
	if status := pushAs(t, f, orders, "payroll"); status != http.StatusForbidden {
		t.Fatalf("push to payroll through a follower: %d, want 403", status)
	}
	resp, err := anonymous.Post(f.url("/api/v1/push"), "application/json", strings.NewReader(`{"items":[{"queue":"orders.eu","transactionId":"x","payload":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("push without a token or certificate through a follower: %d, want 401", resp.StatusCode)
	}
}

// The safe default: a listener reachable from other machines with no auth
// makes serve refuse to start, unless --insecure; raft between machines
// also needs TLS.
func TestExposedListenerWithoutAuthRefusesToStart(t *testing.T) {
	port := strings.TrimPrefix(freeAddr(t), "127.0.0.1:")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--http-addr", "0.0.0.0:" + port}, "--auth is off"},
		{[]string{"--auth", "--raft-addr", "0.0.0.0:" + port}, "without TLS"},
	} {
		args := append([]string{"serve", "--data-dir", t.TempDir(), "--kafka-addr", freeAddr(t), "--raft-addr", freeAddr(t), "--http-addr", freeAddr(t)}, c.args...)
		out, err := exec.Command(waggleBinary, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("serve %v: %v, %s; want a refusal saying %q", c.args, err, out, c.want)
		}
	}
	// With --insecure it starts (and is stopped at once).
	n := newNode(t, 1)
	n.httpAddr = "0.0.0.0:" + port
	n.args = []string{"--insecure"}
	n.start()
	waitFor(t, 15*time.Second, func() error {
		var h healthAnswer
		if getJSON(t, "http://127.0.0.1:"+port+"/health", &h) != http.StatusOK {
			return errors.New("not serving yet")
		}
		return nil
	}, n.logTail)
}

// With TLS, auth and three raft groups, a write one node makes in groups
// other nodes lead (deleting a consumer group everywhere) reaches those
// leaders through the internal apply route, authenticated by the node's
// certificate; a client token without manage permission cannot use that
// route itself.
func TestDataGroupsForwardWithTLSAndAuth(t *testing.T) {
	certs := devCerts(t, 3)
	trustCA(t, certs)
	c := newCluster(t, 3)
	for i, n := range c.nodes {
		useCerts(n, certs, i+1)
	}
	c.start(append(authFlags(t), "--data-groups", "3")...)
	waitGroupLeaders(t, c.nodes, 3, preferred)
	n := c.nodes[0]
	for g := range uint32(3) {
		q := nameIn(t, "secure-", g, 3)
		waitFor(t, 20*time.Second, func() error {
			if status := pushAs(t, n, bootstrapToken, q); status != http.StatusCreated {
				return fmt.Errorf("push to %s: %d", q, status)
			}
			return nil
		})
		var popped struct{ Messages []any }
		if status := authDo(t, http.MethodGet, n.url("/api/v1/pop/queue/"+q+"?consumerGroup=g&batch=1"), bootstrapToken, nil, &popped); status != http.StatusOK || len(popped.Messages) != 1 {
			t.Fatalf("pop of %s: %d, %d messages", q, status, len(popped.Messages))
		}
	}
	if status := authDo(t, http.MethodDelete, n.url("/api/v1/consumer-groups/g"), bootstrapToken, nil, nil); status != http.StatusOK {
		t.Fatalf("delete g through node 1: %d, want 200", status)
	}
	reader := createToken(t, n, "reader", "read-write", "secure-*")
	if status := authDo(t, http.MethodPost, n.url("/api/v1/internal/apply?group=1"), reader, nil, nil); status != http.StatusForbidden {
		t.Fatalf("internal apply with a read-write token: %d, want 403", status)
	}
}
