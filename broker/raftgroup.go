package broker

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/fsm"
	"github.com/waggle-mq/waggle/router"
	"github.com/waggle-mq/waggle/store"
)

// A node runs one Service per raft group (raftgroups). Group 0 also holds
// the cluster's shape (its members' addresses, users, tokens); a data
// group's service reads those from group 0's.

// JoinGroup makes s the service of raft group id, beside meta (group 0's
// service, s itself for group 0), and tells it how to reach the group's
// leader: through client (scheme "http" or "https"). A data group's writes
// then mint ids in the group's own range (a SeedIDs entry goes first),
// Forwarding hands writes to the leader and CatchUp asks it how far to
// apply. Call before serving, with one group too.
func (s *Service) JoinGroup(id uint32, meta *Service, client *http.Client, scheme string) {
	s.group, s.meta = id, meta
	s.idBase = router.IDBase(id)
	s.remote = &peerLink{client: client, scheme: scheme}
	fwd := s.settings()
	fwd.forwards = true
	s.forwarding = fwd
}

// Group is the raft group this service serves (0: the metadata group).
func (s *Service) Group() uint32 { return s.group }

// Forwarding returns a service for the same group whose writes, on a node
// that does not lead the group, are sent to the leader and applied there
// (see ApplyEntry). It serves calls that must write to several groups at
// once: deleting a consumer group everywhere, committing a Kafka group's
// offsets for topics of other groups. Without JoinGroup it is s.
func (s *Service) Forwarding() *Service {
	if s.forwarding == nil {
		return s
	}
	return s.forwarding
}

// settings copies what configures s, without its leader-only state.
func (s *Service) settings() *Service {
	return &Service{nodeID: s.nodeID, node: s.node, store: s.store, ApplyTimeout: s.ApplyTimeout, Metrics: s.Metrics,
		RequestWindow: s.RequestWindow, KafkaRetentionMs: s.KafkaRetentionMs, now: s.now,
		group: s.group, meta: s.meta, idBase: s.idBase, remote: s.remote}
}

// registry is the store that holds the members' addresses: group 0's.
func (s *Service) registry() *store.Store {
	if s.meta != nil {
		return s.meta.store
	}
	return s.store
}

// seedIDs applies the group's SeedIDs entry before the first write this
// node proposes in it, unless the counter is already in the group's range.
func (s *Service) seedIDs() error {
	if s.idBase == 0 || s.seeded.Load() {
		return nil
	}
	var next uint64
	if err := s.store.View(func(tx *store.Tx) error {
		m, err := tx.Meta()
		next = m.NextID
		return err
	}); err != nil {
		return err
	}
	if next < s.idBase {
		if _, err := s.proposeNow(&command.SeedIDsCommand{Base: s.idBase})(); err != nil {
			return err
		}
	}
	s.seeded.Store(true)
	return nil
}

// newLeaseID mints a lease id; a data group's ends in "@" and the group,
// so a request naming only the lease finds its group.
func (s *Service) newLeaseID() string {
	if s.group == 0 {
		return uuid.NewString()
	}
	return uuid.NewString() + "@" + strconv.FormatUint(uint64(s.group), 10)
}

// peerLink is how a node reaches its group's leader over HTTP: to send it
// entries (Forwarding) and to ask its commit index (CatchUp).
type peerLink struct {
	client *http.Client
	scheme string
}

// ApplyPath is the route a node sends another node's group leader an entry
// to apply: POST with the encoded command as the body and ?group=.
const ApplyPath = "/api/v1/internal/apply"

// AppliedEntry is the leader's answer to an entry sent to ApplyPath.
type AppliedEntry struct {
	Index  uint64          `json:"index"`  // the raft index the entry took
	Answer json.RawMessage `json:"answer"` // the state machine's answer as JSON
}

// ApplyEntry applies an encoded command another node of the group sent
// (Forwarding) and answers its raft index and its answer as JSON. Leader
// only: elsewhere ErrNotLeader, and the sender answers as for its own
// write.
func (s *Service) ApplyEntry(entry []byte) (AppliedEntry, error) {
	if err := command.CheckEntry(entry); err != nil {
		return AppliedEntry{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if !s.IsLeader() {
		return AppliedEntry{}, ErrNotLeader
	}
	if err := s.seedIDs(); err != nil {
		return AppliedEntry{}, err
	}
	answer, index, err := s.proposeEntry(entry)()
	if err != nil {
		return AppliedEntry{}, err
	}
	b, err := json.Marshal(answer)
	return AppliedEntry{Index: index, Answer: b}, err
}

// proposeRemote sends cmd to the group's leader, then waits (briefly) for
// this node to apply the entry too, so a read here right after the write
// sees it.
func (s *Service) proposeRemote(cmd command.Command) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.ApplyTimeout)
	defer cancel()
	addr, local, err := s.AwaitLeaderHTTPAddr(ctx)
	if err != nil {
		return nil, err
	}
	if local {
		return s.proposeLeading(cmd)()
	}
	entry, err := command.EncodeAs(cmd, s.node.FSM.LogFormat())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUpgradeInProgress, err)
	}
	url := s.remote.scheme + "://" + addr + ApplyPath + "?group=" + strconv.FormatUint(uint64(s.group), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(entry))
	if err != nil {
		return nil, err
	}
	resp, err := s.remote.client.Do(req)
	if err != nil {
		// Sent or not, the leader may have applied it.
		return nil, fmt.Errorf("%w: sending the entry to group %d's leader at %s: %v", ErrOutcomeUnknown, s.group, addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: reading group %d's leader's answer: %v", ErrOutcomeUnknown, s.group, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, remoteError(s.group, addr, resp.StatusCode, body)
	}
	var applied AppliedEntry
	if err := json.Unmarshal(body, &applied); err != nil {
		return nil, fmt.Errorf("%w: group %d's leader's answer: %v", ErrOutcomeUnknown, s.group, err)
	}
	answer, err := fsm.DecodeAnswer(entry, applied.Answer)
	if err != nil { // applied, but its answer is unreadable here
		return nil, fmt.Errorf("%w: group %d's leader's answer: %v", ErrOutcomeUnknown, s.group, err)
	}
	wait, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.awaitApplied(wait, applied.Index)
	return answer, nil
}

// remoteError turns a group leader's refusal of a forwarded entry back
// into the broker error it answered, so the caller answers as for a write
// of its own: what the leader refused with nothing written stays so.
func remoteError(group uint32, addr string, status int, body []byte) error {
	var e struct{ Error, Code string }
	json.Unmarshal(body, &e)
	var kind error
	switch e.Code {
	case "no_leader", "overloaded":
		kind = ErrNotLeader // not appended: try again
	case "upgrade_in_progress":
		kind = ErrUpgradeInProgress
	case "storage_full":
		kind = ErrStorageFull
	case "invalid_request":
		kind = ErrInvalid
	case "too_large":
		kind = ErrTooLarge
	case "not_found":
		kind = ErrNotFound
	default: // outcome_unknown, or anything else: it may have been applied
		kind = ErrOutcomeUnknown
	}
	return fmt.Errorf("%w: group %d's leader at %s answered %d: %s", kind, group, addr, status, cmp.Or(e.Error, string(bytes.TrimSpace(body))))
}

// awaitApplied waits until this node has applied index or ctx ends, and
// reports whether it has.
func (s *Service) awaitApplied(ctx context.Context, index uint64) bool {
	for s.node.FSM.AppliedIndex() < index {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(forwardPoll):
		}
	}
	return true
}

// CommitPath is the route a node asks a group's leader how far the group
// has committed: GET with ?group=, answered as a LeaderCommit.
const CommitPath = "/api/v1/internal/commit"

// LeaderCommit is a group leader's answer on CommitPath.
type LeaderCommit struct {
	Index uint64 `json:"index"` // the leader's commit index
}

// LeaderCommitIndex answers the group's commit index once this node has
// confirmed it still leads (raft's read index, section 6.4 of Ongaro's
// thesis): every write acknowledged to a client before the call lies at or
// below it. Leader only: elsewhere ErrNotLeader.
func (s *Service) LeaderCommitIndex() (uint64, error) {
	r := s.node.Raft
	if r.State() != raft.Leader {
		return 0, ErrNotLeader
	}
	index := r.CommitIndex()
	if err := r.VerifyLeader().Error(); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrNotLeader, err)
	}
	return index, nil
}

// CatchUp waits, until ctx ends, for this node to apply every entry of the
// group committed when it was called, as the leader tells it: a read here
// afterwards sees every write acknowledged before, whichever node took it.
// A Kafka client that created a topic through one broker and names it to
// another a moment later must not be told it does not exist. Fails with
// ErrNotLeader when no leader can be asked, and with ctx's error when this
// node is still behind.
func (s *Service) CatchUp(ctx context.Context) error {
	index, err := s.leaderCommit(ctx)
	if err != nil {
		return err
	}
	if !s.awaitApplied(ctx, index) {
		return fmt.Errorf("catching up with group %d's leader: applied %d of %d: %w", s.group, s.node.FSM.AppliedIndex(), index, ctx.Err())
	}
	return nil
}

// leaderCommit is the group's commit index as its leader knows it: this
// node's own when it leads (a new leader may still be applying), else the
// leader's, asked on CommitPath.
func (s *Service) leaderCommit(ctx context.Context) (uint64, error) {
	addr, local, err := s.AwaitLeaderHTTPAddr(ctx)
	switch {
	case err != nil:
		return 0, err
	case local:
		return s.node.Raft.CommitIndex(), nil
	case s.remote == nil:
		return 0, fmt.Errorf("%w: group %d has no way to reach its leader", ErrNotLeader, s.group)
	}
	url := s.remote.scheme + "://" + addr + CommitPath + "?group=" + strconv.FormatUint(uint64(s.group), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.remote.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%w: asking group %d's leader at %s: %v", ErrNotLeader, s.group, addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if err != nil {
		return 0, fmt.Errorf("%w: reading group %d's leader's answer: %v", ErrNotLeader, s.group, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%w: group %d's leader at %s answered %d: %s", ErrNotLeader, s.group, addr, resp.StatusCode, bytes.TrimSpace(body))
	}
	var c LeaderCommit
	if err := json.Unmarshal(body, &c); err != nil {
		return 0, fmt.Errorf("%w: group %d's leader's answer: %v", ErrNotLeader, s.group, err)
	}
	return c.Index, nil
}

// PreferLeader records in group 0 (this service's) that raft group group
// should be led by node, a voter ("" forgets the choice: the group goes
// back to the voter its id picks). The group's leader hands leadership
// over within seconds, whenever the node can lead.
func (s *Service) PreferLeader(group uint32, node string) error {
	if node != "" {
		members, err := s.Members()
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(members, func(m Member) bool { return m.ID == node && m.Voter }) {
			return fmt.Errorf("%w: node %s is not a voter of the cluster", ErrInvalid, node)
		}
	}
	_, err := apply(s, &command.PreferLeaderCommand{Group: group, Node: node})
	return err
}

// LeaderPreference answers the node an operator chose to lead raft group
// group ("" for none), from this node's copy of group 0.
func (s *Service) LeaderPreference(group uint32) (string, error) {
	var node string
	err := s.registry().View(func(tx *store.Tx) (err error) {
		node, _, err = tx.LeaderPreference(group)
		return err
	})
	return node, err
}

// SetReplicas records in group 0 (this service's) that data group group
// should be replicated by nodes, voters of the cluster, the preferred
// leader first (nil forgets the record: the static placement applies).
// The group's leader then adds the new nodes, promotes them once they
// caught up, and removes the others (raftgroups).
func (s *Service) SetReplicas(group uint32, nodes []string) error {
	if len(nodes) > command.MaxReplicas {
		return fmt.Errorf("%w: %d replicas: at most %d", ErrInvalid, len(nodes), command.MaxReplicas)
	}
	if len(nodes) > 0 {
		members, err := s.Members()
		if err != nil {
			return err
		}
		for i, n := range nodes {
			if slices.Contains(nodes[:i], n) {
				return fmt.Errorf("%w: node %s is named twice", ErrInvalid, n)
			}
			if !slices.ContainsFunc(members, func(m Member) bool { return m.ID == n && m.Voter }) {
				return fmt.Errorf("%w: node %s is not a voter of the cluster", ErrInvalid, n)
			}
		}
	}
	if s.LogFormat() < command.LogFormat12 {
		return ErrUpgradeInProgress
	}
	_, err := apply(s, &command.SetReplicasCommand{Group: group, Replicas: nodes})
	return err
}

// RecordedReplicas answers the nodes group 0 (this node's copy) records
// for data group group, nil when it records none.
func (s *Service) RecordedReplicas(group uint32) ([]string, error) {
	var nodes []string
	err := s.registry().View(func(tx *store.Tx) (err error) {
		nodes, err = tx.Replicas(group)
		return err
	})
	return nodes, err
}
