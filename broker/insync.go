package broker

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// contactWatch follows, while this node leads, which voters' heartbeats
// fail: raft reports each failed heartbeat and each resumed one. It is
// what Kafka's min.insync.replicas counts under raft (InSync).
type contactWatch struct {
	mu      sync.Mutex
	failing map[raft.ServerID]bool
}

// observe is a raft observer's filter: it records what it sees and
// queues nothing.
func (w *contactWatch) observe(o *raft.Observation) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch d := o.Data.(type) {
	case raft.LeaderObservation:
		w.failing = nil // a new term: the old view of the peers is gone
	case raft.FailedHeartbeatObservation:
		if w.failing == nil {
			w.failing = map[raft.ServerID]bool{}
		}
		w.failing[d.PeerID] = true
	case raft.ResumedHeartbeatObservation:
		delete(w.failing, d.PeerID)
	}
	return false
}

func (s *Service) watchContact() {
	s.node.Raft.RegisterObserver(raft.NewObserver(make(chan raft.Observation, 1), false, s.contact.observe))
}

// InSync lists the voters this leader is in touch with, itself included,
// in the configuration's order: Kafka's in-sync replicas under raft, where
// a write is committed once a majority of them hold it. Nil on a
// follower.
func (s *Service) InSync() []string {
	if !s.IsLeader() {
		return nil
	}
	f := s.node.Raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	s.contact.mu.Lock()
	defer s.contact.mu.Unlock()
	var out []string
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage == raft.Voter && !s.contact.failing[srv.ID] {
			out = append(out, string(srv.ID))
		}
	}
	return out
}

// GroupMembers lists the nodes in this group's raft configuration, voters
// and non-voters, as the leader has it; nil on a follower (whose copy may
// miss its own removal: a removed member hears nothing more).
func (s *Service) GroupMembers() []string {
	members, _ := s.groupConfiguration()
	return members
}

// groupConfiguration is the leader's raft configuration: every member,
// and the voters among them; nil on a follower.
func (s *Service) groupConfiguration() (members, voters []string) {
	if !s.IsLeader() {
		return nil, nil
	}
	f := s.node.Raft.GetConfiguration()
	if f.Error() != nil {
		return nil, nil
	}
	for _, srv := range f.Configuration().Servers {
		members = append(members, string(srv.ID))
		if srv.Suffrage == raft.Voter {
			voters = append(voters, string(srv.ID))
		}
	}
	return members, voters
}

// CommittedMembers is GroupMembers once committed: the leader's newest
// configuration may not be (a leader stops replicating to a member as
// soon as it appends the member's removal), so it first commits an entry
// after it (a barrier). A node told it is no longer a member deletes its
// copy; an uncommitted removal could still be undone. ErrNotLeader on a
// follower.
func (s *Service) CommittedMembers() ([]string, error) {
	if !s.IsLeader() {
		return nil, ErrNotLeader
	}
	members := s.GroupMembers()
	if err := s.node.Raft.Barrier(2 * time.Second).Error(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotLeader, err)
	}
	return members, nil
}
