package kafka

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// commitPart is one partition of an OffsetCommit.
type commitPart struct {
	topic     string
	partition int32
	offset    int64
	metadata  string
}

func offsetCommitRequest(group, member string, generation int32, parts ...commitPart) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 8, group, member, generation
	for _, p := range parts {
		if len(req.Topics) == 0 || req.Topics[len(req.Topics)-1].Topic != p.topic {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = p.topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p.partition, p.offset, 5, kmsg.StringPtr(p.metadata)
		rt := &req.Topics[len(req.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return req
}

// commitCodes lists an OffsetCommit answer as "topic/partition=CODE".
func commitCodes(resp kmsg.Response) []string {
	var out []string
	for _, t := range resp.(*kmsg.OffsetCommitResponse).Topics {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s/%d=%s", t.Topic, p.Partition, short(p.ErrorCode)))
		}
	}
	slices.Sort(out)
	return out
}

// short is an error code's name alone.
func short(code int16) string { return strings.SplitN(codeName(code), ":", 2)[0] }

// TestOffsetCommitAgainstTheFake: a simple commit (no member) stores the
// offsets through the broker; refusals are per request (group id, not the
// coordinator, the broker failing, an unknown member) or per partition
// (metadata too large, a name no topic has, the broker's outcome), and a
// partition refused on its own does not stop the others.
func TestOffsetCommitAgainstTheFake(t *testing.T) {
	big := strings.Repeat("m", broker.MaxOffsetMetadata+1)
	for _, tc := range []struct {
		name       string
		setup      func(*fakeBroker)
		group      string
		member     string
		generation int32
		parts      []commitPart
		want       []string // "topic/partition=CODE", sorted
		committed  int      // offsets the broker stored
	}{
		{name: "simple commit", group: "g", generation: -1,
			parts: []commitPart{{"orders", 0, 10, "m"}, {"orders", 1, 20, ""}},
			want:  []string{"orders/0=NONE", "orders/1=NONE"}, committed: 2},
		{name: "empty group id", group: "", generation: -1, parts: []commitPart{{"orders", 0, 10, ""}},
			want: []string{"orders/0=" + short(kerr.InvalidGroupID.Code)}},
		{name: "follower", group: "g", generation: -1, setup: func(f *fakeBroker) { f.leaderID = "2" },
			parts: []commitPart{{"orders", 0, 10, ""}}, want: []string{"orders/0=" + short(kerr.NotCoordinator.Code)}},
		{name: "broker fails", group: "g", generation: -1, setup: func(f *fakeBroker) { f.commitErr = broker.ErrNotLeader },
			parts: []commitPart{{"orders", 0, 10, ""}}, want: []string{"orders/0=" + short(kerr.NotCoordinator.Code)}},
		{name: "unknown member", group: "g", member: "m-1", generation: 3, parts: []commitPart{{"orders", 0, 10, ""}},
			want: []string{"orders/0=" + short(kerr.UnknownMemberID.Code)}},
		{name: "metadata too large, others committed", group: "g", generation: -1,
			parts: []commitPart{{"orders", 0, 10, big}, {"orders", 1, 20, ""}},
			want:  []string{"orders/0=" + short(kerr.OffsetMetadataTooLarge.Code), "orders/1=NONE"}, committed: 1},
		{name: "invalid topic name", group: "g", generation: -1,
			parts: []commitPart{{"bad name", 0, 10, ""}, {"orders", 1, 20, ""}},
			want:  []string{"bad name/0=" + short(kerr.UnknownTopicOrPartition.Code), "orders/1=NONE"}, committed: 1},
		{name: "internal topic: position 0 taken without a commit", group: "g", generation: -1,
			parts:     []commitPart{{consumerOffsetsTopic, 0, 0, ""}, {consumerOffsetsTopic, 0, 5, ""}, {"orders", 1, 20, ""}},
			want:      []string{consumerOffsetsTopic + "/0=NONE", consumerOffsetsTopic + "/0=" + short(kerr.UnknownTopicOrPartition.Code), "orders/1=NONE"},
			committed: 1},
		{name: "broker's outcome per partition", group: "g", generation: -1,
			setup: func(f *fakeBroker) {
				f.commitOutcome = func(o command.OffsetCommit) command.TopicOutcome {
					if o.Topic == "gone" {
						return command.TopicUnknown
					}
					return command.TopicOK
				}
			},
			parts: []commitPart{{"gone", 0, 10, ""}, {"orders", 1, 20, ""}},
			want:  []string{"gone/0=" + short(kerr.UnknownTopicOrPartition.Code), "orders/1=NONE"}, committed: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := newFakeBroker()
			if tc.setup != nil {
				tc.setup(fb)
			}
			c := newTestConn(t, newTestServer(t, fb, DefaultConfig()), nil)
			got := commitCodes(roundTrip(t, c, offsetCommitRequest(tc.group, tc.member, tc.generation, tc.parts...)))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("answer %v, want %v", got, tc.want)
			}
			if n := len(fb.offsets[tc.group]); n != tc.committed {
				t.Fatalf("%d offsets stored, want %d", n, tc.committed)
			}
		})
	}
}

// TestOffsetCommitAuthorization: a principal that may not use the group
// is refused every partition; topics it may not read are refused on their
// own while the others are committed.
func TestOffsetCommitAuthorization(t *testing.T) {
	consumer := &auth.Principal{Name: "c", Role: auth.ReadOnly, Queues: []string{"orders"}, Groups: []string{"app-*"}}
	for _, tc := range []struct {
		group     string
		want      []string
		committed int
	}{
		{"other", []string{"orders/0=" + short(kerr.GroupAuthorizationFailed.Code), "secret/0=" + short(kerr.GroupAuthorizationFailed.Code)}, 0},
		{"app-1", []string{"orders/0=NONE", "secret/0=" + short(kerr.TopicAuthorizationFailed.Code)}, 1},
	} {
		fb := newFakeBroker()
		c := newTestConn(t, newTestServer(t, fb, authConfig(false)), consumer)
		got := commitCodes(roundTrip(t, c, offsetCommitRequest(tc.group, "", -1, commitPart{"orders", 0, 1, ""}, commitPart{"secret", 0, 1, ""})))
		if !slices.Equal(got, tc.want) {
			t.Errorf("group %s: answer %v, want %v", tc.group, got, tc.want)
		}
		if n := len(fb.offsets[tc.group]); n != tc.committed {
			t.Errorf("group %s: %d offsets stored, want %d", tc.group, n, tc.committed)
		}
	}
}

// TestOffsetFetchAgainstTheFake: committed offsets come back with their
// leader epoch and metadata, a partition without one as -1, all of the
// group's when no topics are named; with RequireStable an offset a
// transaction has staged answers UNSTABLE_OFFSET_COMMIT.
func TestOffsetFetchAgainstTheFake(t *testing.T) {
	fb := newFakeBroker()
	fb.offsets["g"] = []command.OffsetCommit{
		{Topic: "orders", Partition: 0, Offset: 10, LeaderEpoch: 4, Metadata: "m0"},
		{Topic: "orders", Partition: 2, Offset: 30, LeaderEpoch: 5},
	}
	fb.pending["g"] = []store.TxnOffset{{Group: "g", Topic: "orders", Partition: 2, Offset: 31}}
	c := newTestConn(t, newTestServer(t, fb, DefaultConfig()), nil)

	// v7: one group; topics named.
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group = 7, "g"
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = "orders", []int32{0, 1, 2}
	req.Topics = []kmsg.OffsetFetchRequestTopic{rt}
	resp := roundTrip(t, c, req).(*kmsg.OffsetFetchResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
		t.Fatalf("v7 answer %+v", resp)
	}
	ps := resp.Topics[0].Partitions
	if ps[0].Offset != 10 || ps[0].LeaderEpoch != 4 || ps[0].Metadata == nil || *ps[0].Metadata != "m0" {
		t.Errorf("partition 0: %+v, want offset 10, epoch 4, metadata m0", ps[0])
	}
	if ps[1].Offset != -1 || ps[1].LeaderEpoch != -1 || ps[1].ErrorCode != 0 {
		t.Errorf("partition 1 (no commit): %+v, want -1 and no error", ps[1])
	}
	if ps[2].Offset != 30 || ps[2].ErrorCode != 0 {
		t.Errorf("partition 2 without RequireStable: %+v, want 30", ps[2])
	}

	// v8: groups; null topics is every committed offset; RequireStable.
	req8 := kmsg.NewPtrOffsetFetchRequest()
	req8.Version, req8.RequireStable = 8, true
	for _, g := range []string{"g", "empty"} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		req8.Groups = append(req8.Groups, rg)
	}
	resp = roundTrip(t, c, req8).(*kmsg.OffsetFetchResponse)
	if len(resp.Groups) != 2 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Topics) != 1 {
		t.Fatalf("v8 answer %+v", resp.Groups)
	}
	gp := resp.Groups[0].Topics[0].Partitions
	if len(gp) != 2 || gp[0].Offset != 10 || gp[1].ErrorCode != kerr.UnstableOffsetCommit.Code || gp[1].Offset != -1 {
		t.Fatalf("group g: %+v, want offset 10 and partition 2 unstable", gp)
	}
	if len(resp.Groups[1].Topics) != 0 || resp.Groups[1].ErrorCode != 0 {
		t.Fatalf("group without offsets: %+v", resp.Groups[1])
	}
}

// TestOffsetFetchRefusals: a follower is not the coordinator, a new
// leader still applying its log is COORDINATOR_LOAD_IN_PROGRESS, a broker
// failure is UNKNOWN_SERVER_ERROR, a group the principal may not read is
// GROUP_AUTHORIZATION_FAILED.
func TestOffsetFetchRefusals(t *testing.T) {
	for _, tc := range []struct {
		name      string
		setup     func(*fakeBroker)
		principal *auth.Principal
		want      int16
	}{
		{"follower", func(f *fakeBroker) { f.leaderID = "2" }, nil, kerr.NotCoordinator.Code},
		{"broker fails", func(f *fakeBroker) { f.groupsErr = errors.New("disk") }, nil, kerr.UnknownServerError.Code},
		// Regression: a new leader answered the offsets of its store
		// while still applying the log it took the lead with, older
		// than commits the old leader acknowledged, and the group's
		// members consumed those records a second time.
		{"new leader still applying", func(f *fakeBroker) { f.applying = true }, nil, kerr.CoordinatorLoadInProgress.Code},
		{"group denied", nil, &auth.Principal{Name: "c", Role: auth.ReadOnly, Groups: []string{"app-*"}}, kerr.GroupAuthorizationFailed.Code},
		{"group allowed", nil, &auth.Principal{Name: "c", Role: auth.ReadOnly, Groups: []string{"g*"}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := newFakeBroker()
			if tc.setup != nil {
				tc.setup(fb)
			}
			cfg := DefaultConfig()
			cfg.Auth.Enabled = tc.principal != nil
			c := newTestConn(t, newTestServer(t, fb, cfg), tc.principal)
			for _, version := range []int16{7, 8} {
				req := kmsg.NewPtrOffsetFetchRequest()
				req.Version, req.Group = version, "g"
				if version >= 8 {
					rg := kmsg.NewOffsetFetchRequestGroup()
					rg.Group = "g"
					req.Groups = append(req.Groups, rg)
				}
				resp := roundTrip(t, c, req).(*kmsg.OffsetFetchResponse)
				code := resp.ErrorCode
				if version >= 8 {
					code = resp.Groups[0].ErrorCode
				}
				if code != tc.want {
					t.Fatalf("v%d: error %s, want %s", version, codeName(code), codeName(tc.want))
				}
			}
		})
	}
}

// TestCoordinatorAsksTheBrokerForCommittedOffsets: the failover grace
// holds a re-formed group only when it has committed offsets (or the
// broker cannot tell), which New wires to the broker's GroupOffsets.
func TestCoordinatorAsksTheBrokerForCommittedOffsets(t *testing.T) {
	fb := newFakeBroker()
	fb.offsets["committed"] = []command.OffsetCommit{{Topic: "orders", Offset: 1}}
	s := newTestServer(t, fb, DefaultConfig())
	if !s.coords[0].hasOffsets("committed") || s.coords[0].hasOffsets("fresh") {
		t.Fatalf("hasOffsets: committed %v, fresh %v", s.coords[0].hasOffsets("committed"), s.coords[0].hasOffsets("fresh"))
	}
	fb.groupsErr = errors.New("store closed")
	if !s.coords[0].hasOffsets("fresh") {
		t.Fatal("a group whose offsets cannot be read is not held")
	}

	// In the grace after this node took the lead, a classic group with
	// committed offsets waits; one without is formed at once.
	clk := &fakeClock{t: s.coords[0].now()}
	s.coords[0].now = clk.now
	fb.groupsErr = nil
	c := newTestConn(t, s, nil)
	for _, tc := range []struct {
		group string
		held  bool
	}{{"committed", true}, {"fresh", false}} {
		_, _ = c.coordinator(tc.group) // takes the lead in term 5: the grace starts now
		if until := s.coords[0].holdFor(tc.group, 0); until.IsZero() == tc.held {
			t.Errorf("group %s: held until %v, want held %v", tc.group, until, tc.held)
		}
	}
	clk.add(s.cfg.ConsumerGroups.failoverGrace())
	if until := s.coords[0].holdFor("committed", 0); !until.IsZero() {
		t.Errorf("after the grace: held until %v", until)
	}
}
