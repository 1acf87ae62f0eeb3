package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// In a cluster with a replication factor a node runs only the data groups
// it replicates. What it is asked of another group it asks a node that
// replicates it: RemoteGroup sends the call on GroupCallPath, and that
// node's Service.ServeGroupCall answers it from its own member of the
// group (a write is forwarded to the group's leader from there, as any
// follower's is).

// GroupCallPath is the route a node asks a replica of a raft group it does
// not run to serve a call: POST with ?group= and ?call=, the arguments as
// a JSON body.
const GroupCallPath = "/api/v1/internal/group-call"

// GroupLeader is a replica's view of its group's leader.
type GroupLeader struct {
	ID    string `json:"id"`    // the leader's node id; "" while there is none
	Epoch int32  `json:"epoch"` // its Kafka leader epoch (LeaderEpoch)
	// InSync lists the voters the leader is in touch with (Service.InSync)
	// when the leader itself answered; empty from a follower.
	InSync []string `json:"inSync,omitempty"`
	// Members lists the group's raft configuration, voters and non-voters
	// (Service.GroupMembers), and Voters the voters among them, when the
	// leader itself answered.
	Members []string `json:"members,omitempty"`
	Voters  []string `json:"voters,omitempty"`
}

// RemoteGroup is a raft group another node replicates and this one does
// not. Its calls go to the group's leader when known, else to each of
// its replicas in turn.
type RemoteGroup struct {
	id       uint32
	meta     *Service        // group 0 on this node: the members' addresses
	replicas func() []string // the group's nodes now, its preferred leader first
	link     *peerLink

	mu       sync.Mutex
	leader   GroupLeader
	leaderAt time.Time // when leader was learnt
}

// leaderFresh is how long a RemoteGroup trusts the leader it learnt.
const leaderFresh = time.Second

// callTimeout bounds one call to a replica.
const callTimeout = 10 * time.Second

// NewRemoteGroup is group id as this node reaches it: through the nodes
// replicas answers (node ids, the preferred leader first; they change as
// replicas move), whose addresses meta knows.
func NewRemoteGroup(id uint32, meta *Service, replicas func() []string, client *http.Client, scheme string) *RemoteGroup {
	return &RemoteGroup{id: id, meta: meta, replicas: replicas, link: &peerLink{client: client, scheme: scheme}}
}

// ID is the group's id.
func (r *RemoteGroup) ID() uint32 { return r.id }

// Replicas lists the nodes that replicate the group, its preferred leader
// first.
func (r *RemoteGroup) Replicas() []string { return r.replicas() }

// Leader is the group's leader as a replica sees it, learnt at most a
// second ago; the zero GroupLeader when no replica answers.
func (r *RemoteGroup) Leader() GroupLeader {
	r.mu.Lock()
	l, at := r.leader, r.leaderAt
	r.mu.Unlock()
	if time.Since(at) < leaderFresh {
		return l
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	l, err := remoteCall[GroupLeader](ctx, r, "leader", nil)
	if err == nil && l.ID != "" && len(l.InSync) == 0 {
		// A follower answered: ask the leader it named, which knows
		// which voters are in sync.
		r.mu.Lock()
		r.leader = l
		r.mu.Unlock()
		if fromLeader, err := remoteCall[GroupLeader](ctx, r, "leader", nil); err == nil && fromLeader.ID != "" {
			l = fromLeader
		}
	}
	if err != nil {
		l = GroupLeader{}
	}
	r.mu.Lock()
	r.leader, r.leaderAt = l, time.Now()
	r.mu.Unlock()
	return l
}

// LeaderHTTPAddr is the HTTP address of the group's leader, or of a
// replica when the leader is unknown; "" when no replica has one.
func (r *RemoteGroup) LeaderHTTPAddr() string {
	addrs := r.addrs(r.Leader().ID)
	if len(addrs) == 0 {
		return ""
	}
	return addrs[0]
}

// addrs lists the HTTP addresses to try, first's first (the leader).
func (r *RemoteGroup) addrs(first string) []string {
	members, err := r.meta.Members()
	if err != nil {
		return nil
	}
	byID := map[string]string{}
	for _, m := range members {
		byID[m.ID] = m.HTTPAddr
	}
	var out []string
	if a := byID[first]; first != "" && a != "" {
		out = append(out, a)
	}
	for _, id := range r.replicas() {
		if a := byID[id]; a != "" && id != first {
			out = append(out, a)
		}
	}
	return out
}

// remoteCall asks a replica of r to serve call with args, and decodes its
// answer. A replica that cannot be reached, or that answers it has no
// leader, is passed for the next; the last error is returned.
func remoteCall[T any](ctx context.Context, r *RemoteGroup, call string, args any) (T, error) {
	var out T
	body, err := json.Marshal(args)
	if err != nil {
		return out, err
	}
	r.mu.Lock()
	leader := r.leader.ID
	r.mu.Unlock()
	addrs := r.addrs(leader)
	if len(addrs) == 0 {
		return out, fmt.Errorf("%w: no replica of raft group %d has an address yet", ErrNotLeader, r.id)
	}
	err = fmt.Errorf("%w: no replica of raft group %d answered", ErrNotLeader, r.id)
	for _, addr := range addrs {
		var answer []byte
		answer, err = r.post(ctx, addr, call, body)
		if err == nil {
			return out, json.Unmarshal(answer, &out)
		}
		if !errors.Is(err, ErrNotLeader) || ctx.Err() != nil {
			return out, err
		}
	}
	return out, err
}

// post sends one call to the node at addr.
func (r *RemoteGroup) post(ctx context.Context, addr, call string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	url := r.link.scheme + "://" + addr + GroupCallPath + "?group=" + strconv.FormatUint(uint64(r.id), 10) + "&call=" + call
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := r.link.client.Do(req)
	if err != nil {
		r.ForgetLeader()
		if NeverSent(err) { // another replica may take it
			return nil, fmt.Errorf("%w: raft group %d's replica at %s: %v", ErrNotLeader, r.id, addr, err)
		}
		// Sent or not, a write may have been applied.
		return nil, fmt.Errorf("%w: raft group %d's replica at %s: %v", ErrOutcomeUnknown, r.id, addr, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxCallAnswer))
	if err != nil {
		return nil, fmt.Errorf("%w: reading raft group %d's replica's answer: %v", ErrOutcomeUnknown, r.id, err)
	}
	if resp.StatusCode != http.StatusOK {
		if resp.StatusCode == http.StatusServiceUnavailable {
			r.ForgetLeader()
		}
		return nil, remoteError(r.id, addr, resp.StatusCode, answer)
	}
	return answer, nil
}

// NeverSent reports whether a request to another node failed before any
// byte of it could reach that node: the connection was never made.
func NeverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// ForgetLeader drops the leader learnt, after it failed to answer.
func (r *RemoteGroup) ForgetLeader() {
	r.mu.Lock()
	r.leader, r.leaderAt = GroupLeader{}, time.Time{}
	r.mu.Unlock()
}

// maxCallAnswer bounds a replica's answer to a call: the lists it answers
// (topics, queues, offsets) are bounded by the group's state.
const maxCallAnswer = 256 << 20

// Args of the calls ServeGroupCall serves, by name.
type (
	groupArgs struct {
		Group string `json:"group"`
		// Key is the request key a keyed delete carries (WithRequestKey),
		// so that a retry is answered, in every group, as the first was.
		Key *RequestKey `json:"key,omitempty"`
	}
	queueArgs struct {
		Queue string `json:"queue"`
	}
	topicsArgs struct {
		Names []string `json:"names"`
	}
	topicByIDArgs struct {
		ID [16]byte `json:"id"`
	}
	offsetsArgs struct {
		Group   string                 `json:"group"`
		All     bool                   `json:"all"`
		Offsets []command.OffsetCommit `json:"offsets"`
	}
	createTopicArgs struct {
		Name       string                 `json:"name"`
		Partitions int32                  `json:"partitions"`
		Settings   []command.TopicSetting `json:"settings"`
	}
	groupConfigArgs struct {
		Group   string                      `json:"group"`
		Replace bool                        `json:"replace"`
		Changes []command.GroupConfigChange `json:"changes"`
	}
	topicByIDAnswer struct {
		Topic TopicInfo `json:"topic"`
		Found bool      `json:"found"`
	}
)

// reads are the calls ServeGroupCall answers from this node's copy of the
// group, once it is current (readsCurrent).
var reads = map[string]bool{"queues": true, "group-partitions": true, "offset-groups": true, "dead-letters": true, "topics": true,
	"topic-by-id": true, "group-offsets": true, "pending-txn-offsets": true, "txns": true, "group-config": true}

// readsCurrent waits, up to CatchUpWait, until this node's copy of the
// group holds every write acknowledged before the call: it is not
// re-applying its log, and it has applied what the leader has committed.
// A copy that cannot get there answers ErrNotLeader, so the caller asks
// another replica.
func (s *Service) readsCurrent(ctx context.Context) error {
	switch {
	case !s.ServesReads():
		return fmt.Errorf("%w: this replica is still re-applying its log", ErrNotLeader)
	case s.IsLeader() && !s.LeaderCaughtUp():
		// A new leader knows what is committed only once it has
		// committed an entry of its own term.
		return fmt.Errorf("%w: this replica took the lead and is still applying its log", ErrNotLeader)
	}
	ctx, cancel := context.WithTimeout(ctx, CatchUpWait)
	defer cancel()
	err := s.CatchUp(ctx)
	if err != nil && !errors.Is(err, ErrNotLeader) {
		err = fmt.Errorf("%w: %v", ErrNotLeader, err)
	}
	return err
}

// ServeGroupCall serves a call another node's RemoteGroup sent this
// node's member of the group: reads from this node's copy, writes through
// the group's leader. An unknown call or bad arguments are ErrInvalid.
func (s *Service) ServeGroupCall(ctx context.Context, call string, args []byte) (any, error) {
	if reads[call] {
		if err := s.readsCurrent(ctx); err != nil {
			return nil, err
		}
	}
	fwd := s.Forwarding()
	switch call {
	case "leader":
		_, id := s.LeaderWithID()
		members, voters := s.groupConfiguration()
		return GroupLeader{ID: id, Epoch: s.LeaderEpoch(), InSync: s.InSync(), Members: members, Voters: voters}, nil
	case "committed-members":
		return s.CommittedMembers()
	case "queues":
		return s.Queues()
	case "group-partitions":
		return withArgs(call, args, func(a groupArgs) (any, error) { return s.GroupPartitions(a.Group) })
	case "offset-groups":
		return s.OffsetGroups()
	case "dead-letters":
		return withArgs(call, args, func(a queueArgs) (any, error) { return s.DeadLetters(a.Queue) })
	case "delete-group":
		return withArgs(call, args, func(a groupArgs) (any, error) {
			ctx := ctx
			if a.Key != nil {
				ctx = WithRequestKey(ctx, *a.Key)
			}
			return struct{}{}, fwd.DeleteGroup(ctx, a.Group)
		})
	case "purge-dead-letters":
		return withArgs(call, args, func(a queueArgs) (any, error) { return fwd.PurgeDeadLetters(a.Queue) })
	case "topics":
		return withArgs(call, args, func(a topicsArgs) (any, error) { return s.Topics(a.Names) })
	case "topic-by-id":
		return withArgs(call, args, func(a topicByIDArgs) (any, error) {
			t, found, err := s.TopicByID(a.ID)
			return topicByIDAnswer{t, found}, err
		})
	case "group-offsets":
		return withArgs(call, args, func(a groupArgs) (any, error) { return s.GroupOffsets(a.Group) })
	case "pending-txn-offsets":
		return withArgs(call, args, func(a groupArgs) (any, error) { return s.PendingTxnOffsets(a.Group) })
	case "txns":
		var out []store.TxnState
		err := s.EachTxn(func(t store.TxnState) { out = append(out, t) })
		return out, err
	case "commit-offsets":
		return withArgs(call, args, func(a offsetsArgs) (any, error) { return fwd.CommitOffsets(a.Group, a.Offsets) })
	case "delete-offsets":
		return withArgs(call, args, func(a offsetsArgs) (any, error) { return fwd.DeleteOffsets(a.Group, a.All, a.Offsets) })
	case "create-topic":
		return withArgs(call, args, func(a createTopicArgs) (any, error) { return fwd.CreateTopic(a.Name, a.Partitions, a.Settings) })
	case "alter-topic":
		return withArgs(call, args, func(a createTopicArgs) (any, error) { return fwd.AlterTopic(a.Name, a.Settings) })
	case "add-partitions":
		return withArgs(call, args, func(a createTopicArgs) (any, error) { return fwd.AddPartitions(a.Name, a.Partitions) })
	case "delete-topic":
		return withArgs(call, args, func(a createTopicArgs) (any, error) { return fwd.DeleteTopic(ctx, a.Name) })
	case "group-config":
		return withArgs(call, args, func(a groupArgs) (any, error) { return s.GroupConfig(a.Group) })
	case "alter-group-config":
		return withArgs(call, args, func(a groupConfigArgs) (any, error) {
			return struct{}{}, fwd.AlterGroupConfig(a.Group, a.Replace, a.Changes)
		})
	}
	return nil, fmt.Errorf("%w: no call %q", ErrInvalid, call)
}

// withArgs decodes a call's arguments as A and serves it with fn;
// arguments that do not decode are ErrInvalid.
func withArgs[A any](call string, args []byte, fn func(A) (any, error)) (any, error) {
	var a A
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, fmt.Errorf("%w: the arguments of %s: %v", ErrInvalid, call, err)
	}
	return fn(a)
}

// The calls a node makes of a group it does not replicate: each is the
// same method of Service on a replica.

// CommittedMembers is the group's raft configuration once committed, as
// its leader answers it (Service.CommittedMembers).
func (r *RemoteGroup) CommittedMembers(ctx context.Context) ([]string, error) {
	return remoteCall[[]string](ctx, r, "committed-members", nil)
}

// Queues lists the group's queues.
func (r *RemoteGroup) Queues() ([]QueueInfo, error) {
	return remoteCall[[]QueueInfo](context.Background(), r, "queues", nil)
}

// GroupPartitions lists a consumer group's cursors in the group.
func (r *RemoteGroup) GroupPartitions(group string) ([]Cursor, error) {
	return remoteCall[[]Cursor](context.Background(), r, "group-partitions", groupArgs{Group: group})
}

// OffsetGroups lists the consumer groups with offsets in the group.
func (r *RemoteGroup) OffsetGroups() ([]string, error) {
	return remoteCall[[]string](context.Background(), r, "offset-groups", nil)
}

// DeadLetters lists the group's dead letters (of queue, or all).
func (r *RemoteGroup) DeadLetters(queue string) ([]DeadLetter, error) {
	return remoteCall[[]DeadLetter](context.Background(), r, "dead-letters", queueArgs{queue})
}

// DeleteGroup deletes a consumer group's state in the group.
func (r *RemoteGroup) DeleteGroup(ctx context.Context, group string) error {
	args := groupArgs{Group: group}
	if k, ok := ctx.Value(requestKeyCtx{}).(RequestKey); ok {
		args.Key = &k
	}
	_, err := remoteCall[struct{}](ctx, r, "delete-group", args)
	return err
}

// PurgeDeadLetters deletes the group's dead letters (of queue, or all).
func (r *RemoteGroup) PurgeDeadLetters(queue string) (int, error) {
	return remoteCall[int](context.Background(), r, "purge-dead-letters", queueArgs{queue})
}

// Topics answers the named topics of the group, or all of them (nil),
// after the replica caught up with the group's leader.
func (r *RemoteGroup) Topics(names []string) ([]TopicInfo, error) {
	return remoteCall[[]TopicInfo](context.Background(), r, "topics", topicsArgs{names})
}

// TopicByID finds a topic of the group by its Kafka id.
func (r *RemoteGroup) TopicByID(id [16]byte) (TopicInfo, bool, error) {
	a, err := remoteCall[topicByIDAnswer](context.Background(), r, "topic-by-id", topicByIDArgs{id})
	return a.Topic, a.Found, err
}

// GroupOffsets answers a consumer group's offsets in the group.
func (r *RemoteGroup) GroupOffsets(group string) ([]command.OffsetCommit, error) {
	return remoteCall[[]command.OffsetCommit](context.Background(), r, "group-offsets", groupArgs{Group: group})
}

// PendingTxnOffsets answers a consumer group's offsets staged by open
// transactions in the group.
func (r *RemoteGroup) PendingTxnOffsets(group string) ([]store.TxnOffset, error) {
	return remoteCall[[]store.TxnOffset](context.Background(), r, "pending-txn-offsets", groupArgs{Group: group})
}

// EachTxn calls fn on each transaction the group coordinates.
func (r *RemoteGroup) EachTxn(fn func(store.TxnState)) error {
	txns, err := remoteCall[[]store.TxnState](context.Background(), r, "txns", nil)
	for _, t := range txns {
		fn(t)
	}
	return err
}

// CommitOffsets stores a consumer group's offsets of the group's topics.
func (r *RemoteGroup) CommitOffsets(group string, offsets []command.OffsetCommit) ([]command.TopicOutcome, error) {
	return remoteCall[[]command.TopicOutcome](context.Background(), r, "commit-offsets", offsetsArgs{Group: group, Offsets: offsets})
}

// DeleteOffsets deletes a consumer group's offsets in the group.
func (r *RemoteGroup) DeleteOffsets(group string, all bool, offsets []command.OffsetCommit) (int, error) {
	return remoteCall[int](context.Background(), r, "delete-offsets", offsetsArgs{group, all, offsets})
}

// CreateTopic creates a topic in the group.
func (r *RemoteGroup) CreateTopic(name string, partitions int32, settings []command.TopicSetting) (command.TopicOutcome, error) {
	return remoteCall[command.TopicOutcome](context.Background(), r, "create-topic", createTopicArgs{name, partitions, settings})
}

// AlterTopic changes a topic's settings.
func (r *RemoteGroup) AlterTopic(name string, settings []command.TopicSetting) (command.TopicOutcome, error) {
	return remoteCall[command.TopicOutcome](context.Background(), r, "alter-topic", createTopicArgs{Name: name, Settings: settings})
}

// AddPartitions grows a topic to count partitions.
func (r *RemoteGroup) AddPartitions(name string, count int32) (command.TopicOutcome, error) {
	return remoteCall[command.TopicOutcome](context.Background(), r, "add-partitions", createTopicArgs{Name: name, Partitions: count})
}

// DeleteTopic deletes a topic of the group.
func (r *RemoteGroup) DeleteTopic(ctx context.Context, name string) (command.TopicOutcome, error) {
	return remoteCall[command.TopicOutcome](ctx, r, "delete-topic", createTopicArgs{Name: name})
}

// GroupConfig answers a share or consumer group's configuration, kept in
// the group its name places it in.
func (r *RemoteGroup) GroupConfig(group string) (map[string]string, error) {
	return remoteCall[map[string]string](context.Background(), r, "group-config", groupArgs{Group: group})
}

// AlterGroupConfig changes a group's configuration.
func (r *RemoteGroup) AlterGroupConfig(group string, replace bool, changes []command.GroupConfigChange) error {
	_, err := remoteCall[struct{}](context.Background(), r, "alter-group-config", groupConfigArgs{group, replace, changes})
	return err
}
