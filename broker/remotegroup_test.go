package broker

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// serveGroupCalls answers GroupCallPath from s as the HTTP API does: the
// answer as JSON, a broker error as its code.
func serveGroupCalls(t *testing.T, s *Service) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		args, _ := io.ReadAll(r.Body)
		answer, err := s.ServeGroupCall(r.Context(), r.URL.Query().Get("call"), args)
		switch {
		case errors.Is(err, ErrInvalid):
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{"error": err.Error(), "code": "invalid_request"})
		case err != nil:
			w.WriteHeader(http.StatusServiceUnavailable)
			json.NewEncoder(w).Encode(map[string]string{"error": err.Error(), "code": "no_leader"})
		default:
			json.NewEncoder(w).Encode(answer)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A RemoteGroup reaches its group through whichever replica answers: a
// replica that cannot be dialled is passed for the next, writes made
// through it are read back through it, and the leader it reports knows
// its in-sync voters. An unknown call or bad arguments are the caller's
// mistake (ErrInvalid), not an unknown outcome.
func TestRemoteGroupCallsAReplica(t *testing.T) {
	s := startService(t)
	live := serveGroupCalls(t, s)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	// Node 2 is a non-voter whose HTTP address refuses connections; node 1
	// answers. The group's replicas list node 2 first.
	if err := s.AddNonvoter("2", "127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	for id, addr := range map[string]string{"1": live.Listener.Addr().String(), "2": deadAddr} {
		if err := s.RegisterNode(NodeAddrs{ID: id, HTTPAddr: addr, KafkaAddr: addr}); err != nil {
			t.Fatal(err)
		}
	}
	r := NewRemoteGroup(0, s, func() []string { return []string{"2", "1"} }, http.DefaultClient, "http")

	if l := r.Leader(); l.ID != "1" || !slices.Equal(l.InSync, []string{"1"}) || !slices.Equal(l.Members, []string{"1", "2"}) {
		t.Fatalf("leader %+v, want node 1 in sync alone, nodes 1 and 2 members", l)
	}
	if out, err := r.CreateTopic("remote-t", 3, nil); err != nil || out != command.TopicOK {
		t.Fatalf("create through the replica: %v %v", out, err)
	}
	ts, err := r.Topics([]string{"remote-t"})
	if err != nil || len(ts) != 1 || ts[0].Partitions != 3 {
		t.Fatalf("topics: %+v %v", ts, err)
	}
	local, _, _ := s.TopicByID(topicIDOf(ts[0]))
	if got, found, err := r.TopicByID(topicIDOf(ts[0])); err != nil || !found || got.Name != "remote-t" || got.ID != local.ID {
		t.Fatalf("topic by id: %+v %v %v", got, found, err)
	}
	commit := []command.OffsetCommit{{Topic: "remote-t", Partition: 1, Offset: 42, LeaderEpoch: -1}}
	if outs, err := r.CommitOffsets("readers", commit); err != nil || len(outs) != 1 || outs[0] != command.TopicOK {
		t.Fatalf("commit: %v %v", outs, err)
	}
	if got, err := r.GroupOffsets("readers"); err != nil || len(got) != 1 || got[0].Offset != 42 {
		t.Fatalf("offsets read back: %+v %v", got, err)
	}
	if names, err := r.OffsetGroups(); err != nil || !slices.Equal(names, []string{"readers"}) {
		t.Fatalf("offset groups: %v %v", names, err)
	}
	if n, err := r.DeleteOffsets("readers", true, nil); err != nil || n != 1 {
		t.Fatalf("delete offsets: %d %v", n, err)
	}

	if _, err := remoteCall[any](t.Context(), r, "no-such-call", nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an unknown call: %v, want ErrInvalid", err)
	}
	if _, err := remoteCall[any](t.Context(), r, "topics", "not an object"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad arguments: %v, want ErrInvalid", err)
	}
}

func topicIDOf(t TopicInfo) [16]byte { return store.Queue{ID: t.ID}.TopicID() }
