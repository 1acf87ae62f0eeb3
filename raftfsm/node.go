package raftfsm

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/waggle-mq/waggle/store"
)

// Peer is one voting member of a static cluster.
type Peer struct {
	ID   string
	Addr string
}

// ParsePeers reads "1=host:port,2=host:port". An empty string is no peers:
// a single node that bootstraps itself.
func ParsePeers(s string) ([]Peer, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var peers []Peer
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("peer %q: want ID=HOST:PORT", part)
		}
		if _, err := strconv.ParseUint(id, 10, 32); err != nil {
			return nil, fmt.Errorf("peer %q: node id must be a positive number", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("peer %q: %v", part, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("peer id %s listed twice", id)
		}
		seen[id] = true
		peers = append(peers, Peer{ID: id, Addr: addr})
	}
	return peers, nil
}

// NodeConfig says where a node keeps its raft state and how it reaches peers.
type NodeConfig struct {
	ID       string
	RaftAddr string // listen and advertised address of the raft transport
	Dir      string // raft log and snapshots live in Dir/raft
	Peers    []Peer // empty: a single node
	Logger   hclog.Logger
}

// Node is a running raft member with waggle's state machine.
type Node struct {
	Raft *raft.Raft
	FSM  *FSM

	transport *raft.NetworkTransport
	logs      *raftboltdb.BoltStore
}

// StartNode opens the raft log and snapshots under cfg.Dir, catches the
// store up to the newest snapshot if it fell behind, and starts raft. A node
// with no raft state bootstraps the configured cluster (itself alone when
// there are no peers); every node of a static cluster bootstraps the same
// configuration, which raft allows.
func StartNode(cfg NodeConfig, st *store.Store) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn})
	}
	dir := filepath.Join(cfg.Dir, "raft")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logs, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
	if err != nil {
		return nil, fmt.Errorf("open raft log: %w", err)
	}
	n := &Node{logs: logs}
	ok := false
	defer func() {
		if !ok {
			n.close()
		}
	}()
	cached, err := raft.NewLogCache(1024, logs)
	if err != nil {
		return nil, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("open snapshots: %w", err)
	}
	fsm, err := NewFSM(st)
	if err != nil {
		return nil, err
	}
	if err := catchUpFromSnapshot(fsm, snaps); err != nil {
		return nil, err
	}
	n.FSM = fsm

	addr, err := net.ResolveTCPAddr("tcp", cfg.RaftAddr)
	if err != nil {
		return nil, fmt.Errorf("raft address %q: %w", cfg.RaftAddr, err)
	}
	n.transport, err = raft.NewTCPTransportWithLogger(cfg.RaftAddr, addr, 8, 10*time.Second, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("raft transport on %s: %w", cfg.RaftAddr, err)
	}

	rc := raftConfig(cfg)
	exists, err := raft.HasExistingState(cached, logs, snaps)
	if err != nil {
		return nil, err
	}
	if !exists {
		if err := raft.BootstrapCluster(rc, cached, logs, snaps, n.transport, clusterConfig(cfg)); err != nil {
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
	}
	n.Raft, err = raft.NewRaft(rc, fsm, cached, logs, snaps, n.transport)
	if err != nil {
		return nil, fmt.Errorf("start raft: %w", err)
	}
	ok = true
	return n, nil
}

func raftConfig(cfg NodeConfig) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = cfg.Logger
	// The store keeps its own applied index, so a restart need not reload
	// the newest snapshot; catchUpFromSnapshot covers a store left behind it.
	rc.NoSnapshotRestoreOnStart = true
	// Queue many concurrent Applys so one append and one fsync carry them.
	rc.BatchApplyCh = true
	return rc
}

func clusterConfig(cfg NodeConfig) raft.Configuration {
	peers := cfg.Peers
	if len(peers) == 0 {
		peers = []Peer{{ID: cfg.ID, Addr: cfg.RaftAddr}}
	}
	var c raft.Configuration
	for _, p := range peers {
		c.Servers = append(c.Servers, raft.Server{
			Suffrage: raft.Voter,
			ID:       raft.ServerID(p.ID),
			Address:  raft.ServerAddress(p.Addr),
		})
	}
	sort.Slice(c.Servers, func(i, j int) bool { return c.Servers[i].ID < c.Servers[j].ID })
	return c
}

// catchUpFromSnapshot restores the newest snapshot into the store when the
// store's applied index is older than it. Badger does not fsync, so after a
// machine crash the store can lag entries that raft already compacted away
// behind a snapshot; with NoSnapshotRestoreOnStart raft would not notice.
func catchUpFromSnapshot(fsm *FSM, snaps raft.SnapshotStore) error {
	list, err := snaps.List()
	if err != nil || len(list) == 0 {
		return err
	}
	newest := list[0]
	if fsm.AppliedIndex() >= newest.Index {
		return nil
	}
	_, rc, err := snaps.Open(newest.ID)
	if err != nil {
		return fmt.Errorf("open snapshot %s: %w", newest.ID, err)
	}
	if err := fsm.Restore(rc); err != nil {
		return fmt.Errorf("restore snapshot %s: %w", newest.ID, err)
	}
	return nil
}

// Shutdown stops raft and closes the transport and the log.
func (n *Node) Shutdown() error {
	err := n.Raft.Shutdown().Error()
	return errors.Join(err, n.close())
}

func (n *Node) close() error {
	var errs []error
	if n.transport != nil {
		errs = append(errs, n.transport.Close())
	}
	if n.logs != nil {
		errs = append(errs, n.logs.Close())
	}
	return errors.Join(errs...)
}
