package raftnode

import (
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// The gate sends a heartbeat down raft's fast path only on a running
// follower and only when the heartbeat's term is not newer than the
// node's; every other heartbeat, and every other RPC, reaches the main
// loop. Real network transports on loopback carry the RPCs.
func TestHeartbeatGateKeepsTermChangesOnTheMainLoop(t *testing.T) {
	recv, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	send, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer send.Close()
	gate := newHeartbeatGate(recv)
	defer gate.Close()

	// Which path answered is what each path puts in the response's LastLog.
	const fast, main = 1, 2
	gate.SetHeartbeatHandler(func(rpc raft.RPC) {
		rpc.Respond(&raft.AppendEntriesResponse{Success: true, LastLog: fast}, nil)
	})
	go func() {
		for rpc := range gate.Consumer() {
			rpc.Respond(&raft.AppendEntriesResponse{Success: true, LastLog: main}, nil)
		}
	}()
	path := func(req *raft.AppendEntriesRequest) uint64 {
		t.Helper()
		req.RPCHeader = raft.RPCHeader{ID: []byte("2"), Addr: []byte(send.LocalAddr())}
		var resp raft.AppendEntriesResponse
		if err := send.AppendEntries("1", recv.LocalAddr(), req, &resp); err != nil {
			t.Fatal(err)
		}
		return resp.LastLog
	}
	heartbeat := func(term uint64) *raft.AppendEntriesRequest { return &raft.AppendEntriesRequest{Term: term} }

	if got := path(heartbeat(5)); got != main {
		t.Errorf("before raft runs a heartbeat took path %d, want the main loop", got)
	}
	node := &fakeNode{}
	node.term.Store(5)
	gate.watch(node)
	for _, c := range []struct {
		name  string
		state raft.RaftState
		req   *raft.AppendEntriesRequest
		want  uint64
	}{
		{"a heartbeat of the current term", raft.Follower, heartbeat(5), fast},
		{"a heartbeat of an older term", raft.Follower, heartbeat(4), fast},
		{"a heartbeat of a newer term", raft.Follower, heartbeat(6), main},
		{"a heartbeat of the current term to a candidate", raft.Candidate, heartbeat(5), main},
		{"a heartbeat of a newer term to a leader", raft.Leader, heartbeat(6), main},
		{"an append with entries", raft.Follower, &raft.AppendEntriesRequest{Term: 5, PrevLogEntry: 9, PrevLogTerm: 5, LeaderCommitIndex: 9,
			Entries: []*raft.Log{{Index: 10, Term: 5, Type: raft.LogCommand, Data: []byte("x")}}}, main},
	} {
		node.state.Store(uint32(c.state))
		if got := path(c.req); got != c.want {
			t.Errorf("%s took path %d, want %d (1 fast, 2 main loop)", c.name, got, c.want)
		}
	}
}

// fakeNode is a node's term and role as the gate reads them (from the
// transport's goroutines).
type fakeNode struct {
	term  atomic.Uint64
	state atomic.Uint32
}

func (n *fakeNode) CurrentTerm() uint64   { return n.term.Load() }
func (n *fakeNode) State() raft.RaftState { return raft.RaftState(n.state.Load()) }
