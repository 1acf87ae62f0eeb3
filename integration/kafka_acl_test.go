package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/waggle-mq/waggle/command"
)

// Kafka ACLs on a three-node cluster with --auth, managed with kadm through
// a follower and enforced by the one authorizer of both listeners: an
// ALLOW binding lets a read-only principal write to topics of a prefix
// (Kafka produce and HTTP push alike, for the SASL user and the token of
// the same name), a DENY binding keeps a read-write principal from a topic
// whatever its role says, an admin passes every binding, only a principal
// allowed ALTER on the cluster manages bindings, and deleting a binding
// takes its grant away.
func TestKafkaACLsOnBothListeners(t *testing.T) {
	c := startCluster(t, 3, authFlags(t)...)
	leader, follower := c.leader(), c.followers()[0]
	waitFor(t, 30*time.Second, func() error {
		var cl struct {
			LogFormat int `json:"logFormat"`
		}
		if status := authDo(t, http.MethodGet, leader.url("/api/v1/cluster"), bootstrapToken, nil, &cl); status != http.StatusOK || cl.LogFormat < int(command.LogFormat10) {
			return fmt.Errorf("cluster: status %d, log format %d; want format %d", status, cl.LogFormat, command.LogFormat10)
		}
		return nil
	})
	addUser(t, leader, "root", "admin")
	addUser(t, leader, "ann", "read-only")
	addUser(t, leader, "bob", "read-write")
	annToken, bobToken := createToken(t, leader, "ann", "read-only"), createToken(t, leader, "bob", "read-write")
	waitFor(t, 10*time.Second, func() error { // the users and tokens reach the follower's store
		if status := authDo(t, http.MethodGet, follower.url("/api/v1/auth/whoami"), bobToken, nil, nil); status != http.StatusOK {
			return fmt.Errorf("whoami on the follower: %d", status)
		}
		return nil
	})
	sasl := func(user string, opts ...kgo.Opt) *kgo.Client {
		m := scram.Auth{User: user, Pass: user + "-secret"}.AsSha256Mechanism()
		return kafkaClient(t, []string{follower.kafkaAddr}, append([]kgo.Opt{kgo.SASL(m), kgo.RetryTimeout(3 * time.Second), kgo.ProducerLinger(0)}, opts...)...)
	}
	root, bob := sasl("root"), sasl("bob")
	createTopic(t, root, "audit-1", 1, nil)
	createTopic(t, root, "secret", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	produce := func(cl *kgo.Client, topic string) error {
		return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr()
	}
	// What ann and bob may do over both listeners, as the bindings change
	// (each node reads them from its replica of group 0: polled).
	expect := func(what string, kafkaErr error, want error, httpStatus, wantStatus int) error {
		if !errors.Is(kafkaErr, want) && !(want == nil && kafkaErr == nil) {
			return fmt.Errorf("%s over Kafka: %v, want %v", what, kafkaErr, want)
		}
		if httpStatus != wantStatus {
			return fmt.Errorf("%s over HTTP: %d, want %d", what, httpStatus, wantStatus)
		}
		return nil
	}
	// ann's idempotent producer asks for a producer id first, which a
	// principal that may write nowhere is refused (CLUSTER_AUTHORIZATION_
	// FAILED, as Kafka answers without IDEMPOTENT_WRITE): a fresh client
	// each time, since kgo keeps that refusal.
	annWrites := func(want error, wantStatus int) {
		t.Helper()
		waitFor(t, 20*time.Second, func() error {
			cl := sasl("ann")
			defer cl.Close()
			err := produce(cl, "audit-1")
			if want != nil && errors.Is(err, kerr.ClusterAuthorizationFailed) {
				err = want
			}
			return expect("ann writes audit-1", err, want, pushAs(t, follower, annToken, "audit-1"), wantStatus)
		})
	}
	annWrites(kerr.TopicAuthorizationFailed, http.StatusForbidden) // the role alone

	adm, annAdm := kadm.NewClient(root), kadm.NewClient(sasl("ann"))
	grant := kadm.NewACLs().Allow("User:ann").Topics("audit-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite)
	if rs, err := annAdm.CreateACLs(ctx, grant); err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("ann creates a binding: %+v, %v; want CLUSTER_AUTHORIZATION_FAILED", rs, err)
	}
	// A binding waggle would not apply is refused, not stored: an ALLOW of
	// DESCRIBE alone (describing follows READ and WRITE).
	describeOnly := kadm.NewACLs().Allow("User:ann").Topics("audit-").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpDescribe)
	if rs, err := adm.CreateACLs(ctx, describeOnly); err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, kerr.InvalidRequest) {
		t.Fatalf("creating an ALLOW DESCRIBE binding: %+v, %v; want INVALID_REQUEST", rs, err)
	}
	deny := kadm.NewACLs().Deny("User:*").Topics("secret").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpAll)
	for _, b := range []*kadm.ACLBuilder{grant, deny} {
		rs, err := adm.CreateACLs(ctx, b)
		if err != nil || len(rs) != 1 || rs[0].Err != nil {
			t.Fatalf("root creates a binding: %+v, %v", rs, err)
		}
	}
	describe := kmsg.NewPtrDescribeACLsRequest()
	describe.ResourceType, describe.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	describe.Operation, describe.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	described, err := describe.RequestWith(ctx, root)
	if err != nil || described.ErrorCode != 0 || len(described.Resources) != 2 {
		t.Fatalf("DescribeAcls: %+v, %v; want the two bindings", described, err)
	}

	annWrites(nil, http.StatusCreated) // the ALLOW binding
	waitFor(t, 20*time.Second, func() error {
		return expect("bob writes secret", produce(bob, "secret"), kerr.TopicAuthorizationFailed, pushAs(t, follower, bobToken, "secret"), http.StatusForbidden)
	})
	if err := expect("bob writes audit-1", produce(bob, "audit-1"), nil, pushAs(t, follower, bobToken, "audit-1"), http.StatusCreated); err != nil {
		t.Fatal(err) // his role, untouched by the DENY on another topic
	}
	if err := expect("root writes secret", produce(root, "secret"), nil, pushAs(t, follower, bootstrapToken, "secret"), http.StatusCreated); err != nil {
		t.Fatal(err) // an admin passes every binding
	}

	deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().Allow("User:ann").AllowHosts("*").Topics("audit-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite))
	if err != nil || len(deleted) != 1 || deleted[0].Err != nil || len(deleted[0].Deleted) != 1 {
		t.Fatalf("DeleteAcls: %+v, %v; want one binding deleted", deleted, err)
	}
	annWrites(kerr.TopicAuthorizationFailed, http.StatusForbidden) // the grant is gone
}
