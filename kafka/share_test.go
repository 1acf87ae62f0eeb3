package kafka

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/command"
)

// Share sessions follow KIP-932's epochs: 0 opens (replacing), the
// session's epoch moves it on (adds before forgets), another epoch or no
// session is refused, -1 closes, and the count of sessions is bounded.
func TestShareSessionEpochs(t *testing.T) {
	ss := newShareSessions()
	k := shareSessionKey{"g", "m"}
	a, b := sharePart{[16]byte{1}, 0}, sharePart{[16]byte{1}, 1}
	if _, code := ss.next(k, 1, nil, nil); code != kerr.ShareSessionNotFound.Code {
		t.Fatalf("no session: %v", kerr.ErrorForCode(code))
	}
	if parts, code := ss.open(k, nil, []sharePart{a}); code != 0 || !slices.Equal(parts, []sharePart{a}) {
		t.Fatalf("open: %v %v", parts, code)
	}
	if _, code := ss.next(k, 2, nil, nil); code != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("wrong epoch: %v", kerr.ErrorForCode(code))
	}
	// Added and forgotten in one request: the partition is in the session
	// for the request's acks, then gone.
	parts, code := ss.next(k, 1, []sharePart{b}, []sharePart{a})
	if code != 0 || !slices.Equal(parts, []sharePart{b}) {
		t.Fatalf("add b, forget a: %v %v", parts, code)
	}
	if _, code := ss.next(k, 2, nil, nil); code != 0 {
		t.Fatalf("epoch 2: %v", kerr.ErrorForCode(code))
	}
	if parts, code := ss.close(k); code != 0 || !slices.Equal(parts, []sharePart{b}) {
		t.Fatalf("close: %v %v", parts, code)
	}
	if _, code := ss.close(k); code != kerr.ShareSessionNotFound.Code {
		t.Fatalf("closed twice: %v", kerr.ErrorForCode(code))
	}
	for i := range maxShareSessions {
		if _, code := ss.open(shareSessionKey{"g", fmt.Sprint("member-", i)}, nil, nil); code != 0 {
			t.Fatalf("session %d: %v", i, kerr.ErrorForCode(code))
		}
	}
	if _, code := ss.open(k, nil, nil); code != kerr.ShareSessionLimitReached.Code {
		t.Fatalf("past the limit: %v", kerr.ErrorForCode(code))
	}
	if nextShareEpoch(math.MaxInt32) != 1 {
		t.Fatal("epochs do not wrap to 1")
	}
}

func TestAckBatchesAreChecked(t *testing.T) {
	for name, tc := range map[string]struct {
		batches []ackBatch
		renew   bool
		ok      bool
	}{
		"one type":            {[]ackBatch{{0, 4, []int8{1}}, {5, 5, []int8{3}}}, false, true},
		"per offset":          {[]ackBatch{{0, 2, []int8{1, 2, 0}}}, false, true},
		"renew when asked":    {[]ackBatch{{0, 2, []int8{4}}}, true, true},
		"renew not asked":     {[]ackBatch{{0, 2, []int8{4}}}, false, false},
		"backwards":           {[]ackBatch{{3, 2, []int8{1}}}, false, false},
		"overlap":             {[]ackBatch{{0, 3, []int8{1}}, {3, 4, []int8{1}}}, false, false},
		"no type":             {[]ackBatch{{0, 3, nil}}, false, false},
		"type count mismatch": {[]ackBatch{{0, 3, []int8{1, 1}}}, false, false},
		"unknown type":        {[]ackBatch{{0, 0, []int8{7}}}, false, false},
		"negative type":       {[]ackBatch{{0, 0, []int8{-1}}}, false, false},
	} {
		if got := checkAckBatches(tc.batches, tc.renew) == ""; got != tc.ok {
			t.Errorf("%s: accepted %v, want %v", name, got, tc.ok)
		}
	}
}

// Per-offset types become one ack per run of a type.
func TestShareAcksAreRuns(t *testing.T) {
	got := shareAcks("q", "m", partAcks{part: sharePart{partition: 3}, batches: []ackBatch{{10, 14, []int8{1, 1, 2, 2, 1}}, {20, 21, []int8{4}}}}, 5000)
	want := []command.ShareAck{
		{Queue: "q", Partition: "3", Holder: "m", First: 10, Last: 11, Kind: command.ShareAccept},
		{Queue: "q", Partition: "3", Holder: "m", First: 12, Last: 13, Kind: command.ShareRelease},
		{Queue: "q", Partition: "3", Holder: "m", First: 14, Last: 14, Kind: command.ShareAccept},
		{Queue: "q", Partition: "3", Holder: "m", First: 20, Last: 21, Kind: command.ShareRenew, RenewMs: 5000},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("acks %+v\nwant %+v", got, want)
	}
}

// A share member is assigned every partition of what it subscribes to;
// its epoch follows the group's on its own heartbeat; a stale epoch is
// fenced; leaving empties and drops the group; a consumer group's id is
// refused.
func TestShareGroupMembership(t *testing.T) {
	co, clk := newTestCoordinator()
	fetched := map[string]*topicMeta{"a": &topicA, "b": &topicB}
	beat := func(member string, epoch int32, topics ...string) *kmsg.ShareGroupHeartbeatResponse {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch = "sg", member, epoch
		if topics != nil {
			req.SubscribedTopicNames = topics
		}
		return co.shareHeartbeat(req, "c", "h", fetched, 0, 0)
	}
	r1 := beat("m1", 0, "a")
	if r1.ErrorCode != 0 || r1.MemberEpoch < 1 || r1.Assignment == nil || len(r1.Assignment.TopicPartitions) != 1 ||
		len(r1.Assignment.TopicPartitions[0].Partitions) != int(topicA.partitions) {
		t.Fatalf("join: %+v", r1)
	}
	r2 := beat("m2", 0, "a", "b")
	if r2.ErrorCode != 0 || len(r2.Assignment.TopicPartitions) != 2 {
		t.Fatalf("second member: %+v", r2)
	}
	// m1 learns of the new epoch on its own heartbeat and keeps all of a.
	r1b := beat("m1", r1.MemberEpoch)
	if r1b.ErrorCode != 0 || r1b.MemberEpoch != r2.MemberEpoch || r1b.Assignment == nil {
		t.Fatalf("m1 after m2 joined: %+v (m2 at %d)", r1b, r2.MemberEpoch)
	}
	if r := beat("m1", r1b.MemberEpoch+5); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("stale epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := beat("nobody", 3); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if v, _ := co.describeShare("sg"); len(v.members) != 2 || v.state() != cstateStable {
		t.Fatalf("describe: %+v", v)
	}
	clk.add(co.consumerCfg.SessionTimeout + 1)
	beat("m2", r2.MemberEpoch)
	co.expireShares(clk.now())
	if v, _ := co.describeShare("sg"); len(v.members) != 1 || v.members[0].id != "m2" {
		t.Fatalf("after m1's session timed out: %+v", v)
	}
	if r := beat("m2", epochLeave); r.ErrorCode != 0 || r.MemberEpoch != epochLeave {
		t.Fatalf("leave: %+v", r)
	}
	if _, found := co.describeShare("sg"); found {
		t.Fatal("the group outlived its last member")
	}
	newClient(t, co, "cg", "x", "a").beat()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.SubscribedTopicNames = "cg", "m", []string{"a"}
	if r := co.shareHeartbeat(req, "c", "h", fetched, 0, 0); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("share heartbeat on a consumer group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}
