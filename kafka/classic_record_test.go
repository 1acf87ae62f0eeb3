package kafka

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// recordingCoordinator is a coordinator leading in term, keeping its
// records in fb.
func recordingCoordinator(fb *fakeBroker, term uint64) *coordinator {
	co := newCoordinator()
	co.records = func() classicRecords { return fb }
	co.lead(term)
	return co
}

// joinAlone has one member join group "g" and returns its id and
// generation.
func joinAlone(t *testing.T, co *coordinator) (id string, gen int32) {
	t.Helper()
	req := joinRequest("g", "")
	req.Version = 3 // no MEMBER_ID_REQUIRED round
	j := joined(t, co.join(req, "client", "/127.0.0.1"))
	if j.ErrorCode != 0 {
		t.Fatalf("join: %s", kerr.ErrorForCode(j.ErrorCode))
	}
	return j.MemberID, j.Generation
}

// formGroup has one member join group "g" and, as its leader, assign
// itself "a"; it returns the member's id and generation once the SyncGroup
// is answered.
func formGroup(t *testing.T, co *coordinator) (id string, gen int32, sync *kmsg.SyncGroupResponse) {
	t.Helper()
	id, gen = joinAlone(t, co)
	return id, gen, synced(t, co, "g", id, nil, gen, map[string]string{id: "a"})
}

// A new leader loads a recorded group: its member heartbeats on in its
// generation and keeps its assignment, where an unrecorded group's member
// is unknown and must rejoin. Until the new leader has applied its log it
// answers COORDINATOR_LOAD_IN_PROGRESS.
func TestRecordedGroupKeepsItsMembersAcrossALeaderChange(t *testing.T) {
	fb := newFakeBroker()
	id, gen, sync := formGroup(t, recordingCoordinator(fb, 1))
	if sync.ErrorCode != 0 || string(sync.MemberAssignment) != "a" {
		t.Fatalf("sync: %s %q", kerr.ErrorForCode(sync.ErrorCode), sync.MemberAssignment)
	}
	if rec := fb.classic["g"]; rec.Generation != gen || len(rec.Members) != 1 || rec.Members[0].ID != id || string(rec.Members[0].Assignment) != "a" {
		t.Fatalf("record %+v, want generation %d of %s assigned a", rec, gen, id)
	}

	fb.applying = true
	next := recordingCoordinator(fb, 2)
	if code := next.load("g"); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("load on a leader still applying: %s, want COORDINATOR_LOAD_IN_PROGRESS", kerr.ErrorForCode(code))
	}
	fb.applying = false
	if code := next.load("g"); code != 0 {
		t.Fatalf("load: %s", kerr.ErrorForCode(code))
	}
	if code := next.heartbeat("g", id, nil, gen); code != 0 {
		t.Fatalf("heartbeat on the new leader: %s, want none", kerr.ErrorForCode(code))
	}
	v, _ := next.describe("g")
	if v.state != stateStable || len(v.members) != 1 || string(v.members[0].assignment) != "a" {
		t.Fatalf("loaded group %+v, want stable with the member's assignment", v)
	}

	unrecorded := recordingCoordinator(newFakeBroker(), 2)
	if code := unrecorded.load("g"); code != 0 {
		t.Fatalf("load of nothing: %s", kerr.ErrorForCode(code))
	}
	if code := unrecorded.heartbeat("g", id, nil, gen); code != kerr.UnknownMemberID.Code {
		t.Fatalf("heartbeat of an unrecorded member: %s, want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(code))
	}
}

// SyncGroup hands out the assignment only once the generation is
// recorded, so a member never consumes in a generation a new leader would
// not know. A save whose outcome is unknown starts a new generation; a
// cluster below log format 6 coordinates without records.
func TestSyncGroupAnswersOnceTheGenerationIsRecorded(t *testing.T) {
	fb := newFakeBroker()
	fb.saveGate, fb.saving = make(chan struct{}), make(chan store.ClassicGroup, 1)
	co := recordingCoordinator(fb, 1)
	id, gen := joinAlone(t, co)
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 5, "g", id, gen
	a := kmsg.NewSyncGroupRequestGroupAssignment()
	a.MemberID, a.MemberAssignment = id, []byte("a")
	req.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{a}
	answered := make(chan *kmsg.SyncGroupResponse, 1)
	go func() {
		resp, _ := co.syncGroup(req)()
		answered <- resp.(*kmsg.SyncGroupResponse)
	}()
	select {
	case rec := <-fb.saving:
		if rec.Generation != 1 || len(rec.Members) != 1 {
			t.Fatalf("saving %+v", rec)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the generation was never saved")
	}
	select {
	case s := <-answered:
		t.Fatalf("SyncGroup answered (%s) before its generation was recorded", kerr.ErrorForCode(s.ErrorCode))
	default:
	}
	close(fb.saveGate)
	if s := <-answered; s.ErrorCode != 0 || string(s.MemberAssignment) != "a" {
		t.Fatalf("sync after the record: %s %q", kerr.ErrorForCode(s.ErrorCode), s.MemberAssignment)
	}

	for _, c := range []struct {
		err  error
		want int16
	}{
		{errors.New("raft: timed out enqueuing operation"), kerr.RebalanceInProgress.Code},
		{fmt.Errorf("recording: %w", command.ErrLogFormatTooOld), 0},
	} {
		fb := newFakeBroker()
		fb.saveErr = c.err
		if _, _, s := formGroup(t, recordingCoordinator(fb, 1)); s.ErrorCode != c.want {
			t.Errorf("save failing with %q: sync %s, want %s", c.err, kerr.ErrorForCode(s.ErrorCode), kerr.ErrorForCode(c.want))
		}
		if len(fb.classic) != 0 {
			t.Errorf("a failed save left %+v", fb.classic)
		}
	}
}

// A group whose last member left removes its record, so a new leader
// does not bring back members that are gone.
func TestEmptiedGroupRemovesItsRecord(t *testing.T) {
	fb := newFakeBroker()
	co := recordingCoordinator(fb, 1)
	id, _, _ := formGroup(t, co)
	if codes := co.leave("g", []leaver{{memberID: id}}); codes[0] != 0 {
		t.Fatalf("leave: %s", kerr.ErrorForCode(codes[0]))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		fb.mu.Lock()
		_, kept := fb.classic["g"]
		fb.mu.Unlock()
		if !kept {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the emptied group's record is still there")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
