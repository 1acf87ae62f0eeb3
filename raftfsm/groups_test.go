package raftfsm

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/raftmux"
	"github.com/waggle-mq/waggle/store"
)

// Three nodes run two raft groups, each group with its own store and raft
// directory, over one raft listener per node. A topic created in one group
// exists on every member of that group and on none of the other's.
func TestGroupsShareANodesListener(t *testing.T) {
	const nodes, groups = 3, 2
	muxes := make([]*raftmux.Mux, nodes)
	var peers []Peer
	for i := range muxes {
		m, err := Listen("127.0.0.1:0", "127.0.0.1:0", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		muxes[i] = m
		peers = append(peers, Peer{ID: fmt.Sprint(i + 1), Addr: m.Addr().String()})
	}
	var members [groups][nodes]*Node
	var stores [groups][nodes]*store.Store
	for g := range groups {
		for i := range nodes {
			dir := filepath.Join(t.TempDir(), fmt.Sprintf("group-%d", g))
			st, err := store.Open(filepath.Join(dir, "state"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			n, err := StartNode(NodeConfig{ID: peers[i].ID, Mux: muxes[i], Group: uint32(g), Dir: dir, Peers: peers}, st)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n.Shutdown() })
			members[g][i], stores[g][i] = n, st
		}
	}
	leader := func(g int) *Node {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			for _, n := range members[g] {
				if n.Raft.State() == raft.Leader {
					return n
				}
			}
		}
		t.Fatalf("group %d has no leader", g)
		return nil
	}
	for g := range groups {
		cmd := &CreateTopicCommand{NowMs: 1, Name: fmt.Sprintf("topic-of-group-%d", g), Partitions: 1}
		if err := leader(g).Raft.Apply(Seal(cmd.Encode()), 5*time.Second).Error(); err != nil {
			t.Fatalf("group %d: %v", g, err)
		}
	}
	for g := range groups {
		for i, st := range stores[g] {
			for other := range groups {
				name := fmt.Sprintf("topic-of-group-%d", other)
				want := other == g
				waitForTrue(t, fmt.Sprintf("node %d of group %d holds %s: %v", i+1, g, name, want), func() bool {
					err := st.View(func(tx *store.Tx) error { _, err := tx.Queue(name); return err })
					return (err == nil) == want && (err == nil || errors.Is(err, store.ErrNotFound))
				})
			}
		}
	}
}

// waitForTrue polls cond for up to 10 s.
func waitForTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not true after 10 s: %s", what)
		}
	}
}
