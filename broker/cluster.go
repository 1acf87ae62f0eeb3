package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// membershipTimeout bounds a membership change or leadership transfer.
const membershipTimeout = 10 * time.Second

// NodeAddrs are the addresses a member advertises to clients.
type NodeAddrs struct {
	ID        string
	HTTPAddr  string
	KafkaAddr string
	// LogFormat is the newest raft log format the node reads, as it
	// registered it (0: not recorded; registrations carry it once the
	// cluster is at format 2).
	LogFormat uint32
}

// Member is one server of the raft configuration, with the addresses it
// registered (empty until it has).
type Member struct {
	NodeAddrs
	RaftAddr string
	Voter    bool
}

// IsLeader reports whether this node leads the raft group now.
func (s *Service) IsLeader() bool { return s.node.Raft.State() == raft.Leader }

// LeaderTerm reports whether this node leads the raft group now, and in
// which term: a leader whose term changed lost the lead in between.
func (s *Service) LeaderTerm() (term uint64, leading bool) {
	r := s.node.Raft
	if r.State() != raft.Leader {
		return 0, false
	}
	return r.CurrentTerm(), true
}

// NodeID is this node's id.
func (s *Service) NodeID() string { return s.nodeID }

// LeaderHTTPAddr returns the advertised HTTP address of the current leader,
// for forwarding writes. ErrNotLeader when no leader (or its address) is
// known yet.
func (s *Service) LeaderHTTPAddr() (string, error) {
	_, id := s.node.Raft.LeaderWithID()
	if id == "" {
		return "", fmt.Errorf("%w: no leader known", ErrNotLeader)
	}
	n, err := s.registeredNode(string(id))
	if err != nil {
		return "", fmt.Errorf("%w: leader %s has not registered its address", ErrNotLeader, id)
	}
	return n.HTTPAddr, nil
}

// ForwardWait bounds how long AwaitLeaderHTTPAddr waits for a leader it can
// forward to.
const ForwardWait = 3 * time.Second

// NoLeaderWait bounds the wait while no leader is known at all: long enough
// for an election under way to end and reach this node, short enough that
// a node cut off from the majority answers no_leader (nothing written)
// before a client's timeout would leave it guessing.
const NoLeaderWait = time.Second

// CatchUpWait bounds how long a read that finds nothing waits for this
// node to catch up with its group's leader (CatchUp) before it answers
// "not found" (HTTP) or a retriable error (Kafka).
const CatchUpWait = 2 * time.Second

// forwardPoll is how often AwaitLeaderHTTPAddr looks at raft's leader and
// the FSM's applied index.
const forwardPoll = 5 * time.Millisecond

// AwaitLeaderHTTPAddr is LeaderHTTPAddr for a write about to be forwarded:
// it waits, up to ForwardWait (NoLeaderWait while no leader is known) or
// until ctx ends, for a leader whose
// address this node has applied, or for this node to lead (then local is
// true and the write is to be served here). A newly elected leader writes
// its address to the registry only after it has won, so right after an
// election a follower knows the leader but not yet where to send the
// write; answering no_leader then would refuse writes in a cluster that
// has a leader. Each poll looks at raft's state and the FSM's applied
// index; the registry is read again only when one of them moved.
func (s *Service) AwaitLeaderHTTPAddr(ctx context.Context) (addr string, local bool, err error) {
	if s.IsLeader() {
		return "", true, nil
	}
	addr, err = s.LeaderHTTPAddr()
	if err == nil || !errors.Is(err, ErrNotLeader) {
		return addr, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, ForwardWait)
	defer cancel()
	tick := time.NewTicker(forwardPoll)
	defer tick.Stop()
	leaderless := time.Now().Add(NoLeaderWait)
	_, lastLeader := s.node.Raft.LeaderWithID()
	lastApplied := s.node.FSM.AppliedIndex()
	for {
		select {
		case <-ctx.Done():
			return "", false, err // the last answer says what was missing
		case <-tick.C:
		}
		if s.IsLeader() {
			return "", true, nil
		}
		_, leader := s.node.Raft.LeaderWithID()
		if leader == "" && time.Now().After(leaderless) {
			return "", false, err
		}
		applied := s.node.FSM.AppliedIndex()
		if leader == lastLeader && applied == lastApplied {
			continue
		}
		lastLeader, lastApplied = leader, applied
		if addr, err = s.LeaderHTTPAddr(); err == nil {
			return addr, false, nil
		}
	}
}

func (s *Service) registeredNode(id string) (store.Node, error) {
	var n store.Node
	err := s.registry().View(func(tx *store.Tx) error {
		var err error
		n, err = tx.Node(id)
		return err
	})
	return n, err
}

// RegisterNode records a member's advertised addresses in the replicated
// state. Leader only.
func (s *Service) RegisterNode(a NodeAddrs) error {
	if err := validateNodeID(a.ID); err != nil {
		return err
	}
	for _, addr := range []string{a.HTTPAddr, a.KafkaAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%w: address %q: %v", ErrInvalid, addr, err)
		}
	}
	cmd := command.RegisterNodeCommand{Node: store.Node{ID: a.ID, HTTPAddr: a.HTTPAddr, KafkaAddr: a.KafkaAddr, LogFormat: a.LogFormat}}
	_, err := apply(s, &cmd)
	return err
}

// AddVoter adds a server to the raft configuration. The new node catches
// up from the log, or from a snapshot where the log was compacted. Once
// the cluster writes a log format above 1, the caller adds the node with
// AddNonvoter first and promotes it here only after checking that its
// binary reads that format (see httpapi's addNode).
func (s *Service) AddVoter(id, raftAddr string) error {
	return s.addServer(id, raftAddr, s.node.Raft.AddVoter)
}

// AddNonvoter adds a server that replicates the log but does not vote: a
// node that fails (a binary too old for the log) costs no quorum. An
// existing voter stays a voter.
func (s *Service) AddNonvoter(id, raftAddr string) error {
	return s.addServer(id, raftAddr, s.node.Raft.AddNonvoter)
}

func (s *Service) addServer(id, raftAddr string, add func(raft.ServerID, raft.ServerAddress, uint64, time.Duration) raft.IndexFuture) error {
	if err := validateNodeID(id); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(raftAddr); err != nil {
		return fmt.Errorf("%w: raftAddr %q: %v", ErrInvalid, raftAddr, err)
	}
	return membershipError(add(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, membershipTimeout).Error())
}

// RemoveNode removes a server from the raft configuration and forgets its
// addresses.
func (s *Service) RemoveNode(id string) error {
	if err := validateNodeID(id); err != nil {
		return err
	}
	members, err := s.Members()
	if err != nil {
		return err
	}
	if !containsMember(members, id) {
		return fmt.Errorf("node %s: %w", id, ErrNotFound)
	}
	forget := func() error {
		cmd := command.ForgetNodeCommand{ID: id}
		_, err := apply(s, &cmd)
		return err
	}
	remove := func() error {
		return membershipError(s.node.Raft.RemoveServer(raft.ServerID(id), 0, membershipTimeout).Error())
	}
	// A leader that removes itself steps down, and could not write the
	// registry change afterwards: forget first in that case.
	if id == s.nodeID {
		if err := forget(); err != nil {
			return err
		}
		return remove()
	}
	if err := remove(); err != nil {
		return err
	}
	return forget()
}

func containsMember(members []Member, id string) bool {
	for _, m := range members {
		if m.ID == id {
			return true
		}
	}
	return false
}

func membershipError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %v", ErrNotLeader, err)
	default:
		return fmt.Errorf("%w: %v", ErrOutcomeUnknown, err)
	}
}

func validateNodeID(id string) error {
	if n, err := strconv.ParseUint(id, 10, 32); err != nil || n == 0 {
		return fmt.Errorf("%w: node id %q must be a positive number", ErrInvalid, id)
	}
	return nil
}

// Members lists the raft configuration as this node knows it, in id order.
func (s *Service) Members() ([]Member, error) {
	f := s.node.Raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	var members []Member
	err := s.registry().View(func(tx *store.Tx) error {
		for _, srv := range f.Configuration().Servers {
			m := Member{NodeAddrs: NodeAddrs{ID: string(srv.ID)}, RaftAddr: string(srv.Address), Voter: srv.Suffrage == raft.Voter}
			n, err := tx.Node(m.ID)
			if err == nil {
				m.HTTPAddr, m.KafkaAddr, m.LogFormat = n.HTTPAddr, n.KafkaAddr, n.LogFormat
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
			members = append(members, m)
		}
		return nil
	})
	sort.Slice(members, func(i, j int) bool {
		a, _ := strconv.Atoi(members[i].ID)
		b, _ := strconv.Atoi(members[j].ID)
		return a < b
	})
	return members, err
}

// Snapshot takes a raft snapshot on this node now; raft then compacts the
// log up to TrailingLogs entries behind it. It returns the snapshot's index.
func (s *Service) Snapshot() (uint64, error) {
	f := s.node.Raft.Snapshot()
	if err := f.Error(); err != nil {
		return 0, err
	}
	meta, rc, err := f.Open()
	if err != nil {
		return 0, err
	}
	rc.Close()
	return meta.Index, nil
}

// HandOffTo transfers leadership to the voter m.
func (s *Service) HandOffTo(m Member) error {
	return s.node.Raft.LeadershipTransferToServer(raft.ServerID(m.ID), raft.ServerAddress(m.RaftAddr)).Error()
}

// HandOff transfers leadership to another voter, if this node leads and
// there is one, so a planned stop does not wait for an election timeout.
func (s *Service) HandOff() error {
	if !s.IsLeader() {
		return nil
	}
	members, err := s.Members()
	if err != nil {
		return err
	}
	voters := 0
	for _, m := range members {
		if m.Voter {
			voters++
		}
	}
	if voters < 2 {
		return nil
	}
	return s.node.Raft.LeadershipTransfer().Error()
}
