package httpapi

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httputil"
	rtmetrics "runtime/metrics"
	"slices"
	"sync"
	"time"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/fsm"
)

// forwardedHeader marks a request a follower forwarded to the leader. A
// forwarded request that reaches a node that is not the leader (leadership
// moved in between) is answered 503, not forwarded again, so requests
// never loop between nodes.
const forwardedHeader = "X-Waggle-Forwarded-By"

// peerLinks is how this node talks HTTP to other nodes.
type peerLinks struct {
	scheme string // http or https
	// forward is shared by all forwarded requests so connections to the
	// leader are kept alive.
	forward *http.Transport
	health  *http.Client // asks members for their /health
}

func newPeerLinks(tlsConf *tls.Config) peerLinks {
	l := peerLinks{scheme: "http", forward: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second, TLSClientConfig: tlsConf}}
	if tlsConf != nil {
		l.scheme = "https"
	}
	l.health = &http.Client{Timeout: peerHealthTimeout, Transport: &http.Transport{TLSClientConfig: tlsConf}}
	return l
}

// leaderOnly serves h on the leader. Elsewhere it forwards the request,
// body and headers unchanged, to the leader's registered HTTP address and
// relays the answer. Right after an election it waits (a few seconds at
// most) for the leader's address to reach this node; with no leader known
// by then it answers 503 no_leader.
func (s *Server) leaderOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if g, ok := s.elsewhere(r); ok {
			s.relay(w, r, g)
			return
		}
		b := s.b(r) // the request's raft group (placement.go)
		if b.IsLeader() {
			h(w, r)
			return
		}
		if by := r.Header.Get(forwardedHeader); by != "" {
			noLeader(w, "forwarded by node "+by+" but this node is no longer the leader")
			return
		}
		addr, local, err := b.AwaitLeaderHTTPAddr(r.Context())
		if err != nil {
			s.writeBrokerError(w, err)
			return
		}
		if local { // this node won an election meanwhile
			h(w, r)
			return
		}
		s.proxy(w, r, addr, "the leader", forwardedHeader, nil)
	}
}

// proxy sends r, body and headers unchanged, to the node at addr (what
// names it in errors) with mark set to this node's id, and relays the
// answer. unreachable, if set, is called when the node could not be
// reached.
func (s *Server) proxy(w http.ResponseWriter, r *http.Request, addr, what, mark string, unreachable func()) {
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = s.peers.scheme, addr, addr
			pr.Out.Header.Set(mark, s.svc.NodeID())
		},
		Transport: s.peers.forward,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			if broker.NeverSent(err) {
				if unreachable != nil {
					unreachable()
				}
				noLeader(w, what+" at "+addr+" could not be reached: "+err.Error())
				return
			}
			// The node may have received the request and applied it
			// before the connection broke.
			s.writeBrokerError(w, fmt.Errorf("%w: forwarding to %s at %s broke off: %v", broker.ErrOutcomeUnknown, what, addr, err))
		},
	}
	proxy.ServeHTTP(w, r)
}

// noLeader answers 503: nothing was written; try again shortly.
func noLeader(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, "no_leader", msg)
}

type memberJSON struct {
	ID        json.Number `json:"id"`
	RaftAddr  string      `json:"raftAddr"`
	HTTPAddr  string      `json:"httpAddr"`
	KafkaAddr string      `json:"kafkaAddr"`
	Voter     bool        `json:"voter"`
	// VotesWithheld: the member's /health says it grants no votes yet.
	VotesWithheld bool `json:"votesWithheld,omitempty"`
	Leader        bool `json:"leader"`
	// State is "up" when the member answered its /health, "unreachable"
	// (with Error) when it did not; Role, Term, Applied, Version and
	// UptimeSeconds come from that answer (empty and null without one).
	// Lag is how many entries it has applied fewer than the leader, when
	// both answered.
	State         string  `json:"state"`
	Error         string  `json:"error,omitempty"`
	Role          string  `json:"role"`
	Term          *uint64 `json:"term"`
	Applied       *uint64 `json:"applied"`
	Lag           *uint64 `json:"lag"`
	Version       string  `json:"version,omitempty"`
	UptimeSeconds *int64  `json:"uptimeSeconds"`
	// LogFormat is the newest raft log format the member reads: as it
	// registered it, or else as its /health says (1 from a binary older
	// than formats); null when neither is known.
	LogFormat *uint32 `json:"logFormat"`
	// The member's resources as its /health reports them; null when
	// unknown (unreachable, or a binary that does not report them).
	resourcesJSON
	// Groups is the member's view of each raft group, as its /health
	// lists them (absent with a single group, or when unreachable).
	Groups []raftGroupJSON `json:"groups,omitempty"`
	// ClockOffsetMs is how far the member's wall clock is from the
	// voters' median, as its /health says; null when unknown.
	ClockOffsetMs *int64 `json:"clockOffsetMs"`
	// StateDigest is the member's digest of raft group 0, as its /health
	// says (absent when unreachable or from a binary without digests).
	StateDigest *digestJSON `json:"stateDigest,omitempty"`
	// StateCheck is how the member's state checks of raft group 0 stand,
	// as its /health says (absent when none was asked for).
	StateCheck *checkJSON `json:"stateCheck,omitempty"`
}

// clockJSON is this node's wall clock beside the voters'. WallMs is read
// as the answer is made: peers estimate this node's clock from it.
// OffsetMs is how far the wall clock is from the lower median of the
// voters' clocks (what this node stamps while it leads), over Peers
// recent answers from other voters.
type clockJSON struct {
	WallMs   int64 `json:"wallMs"`
	OffsetMs int64 `json:"offsetMs"`
	Peers    int   `json:"peers"`
}

// clockJSON reads this node's clock beside the voters', as /health and
// its own row of /api/v1/cluster report it.
func (s *Server) clockJSON() *clockJSON {
	wall := s.clock.Wall()
	offset, peers := s.clock.Offset()
	return &clockJSON{WallMs: wall.UnixMilli(), OffsetMs: offset.Milliseconds(), Peers: peers}
}

type clusterJSON struct {
	Leader *json.Number `json:"leader"`
	// LogFormat is the format the cluster writes: raised by the leader
	// once every member reads the next one.
	LogFormat uint32       `json:"logFormat"`
	Members   []memberJSON `json:"members"`
	// Replicas compares the members' state digests, per raft group.
	Replicas []replicasJSON `json:"replicas"`
	// Checks compares the members' newest state checks, per raft group
	// that has been checked.
	Checks []checksCompared `json:"checks"`
	// NotAMember is set when the node asked is not in the cluster's
	// membership: started with --join and not added yet.
	NotAMember string `json:"notAMember,omitempty"`
}

// peerHealthTimeout bounds how long GET /api/v1/cluster waits for each
// member's /health.
const peerHealthTimeout = time.Second

func (s *Server) cluster(w http.ResponseWriter, r *http.Request) {
	out, err := s.clusterView(r.Context())
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// clusterView is every member as it answered its /health, with the
// comparisons of their state digests and state checks.
func (s *Server) clusterView(ctx context.Context) (clusterJSON, error) {
	members, err := s.svc.Members()
	if err != nil {
		return clusterJSON{}, err
	}
	h := s.svc.Health()
	out := clusterJSON{Members: make([]memberJSON, len(members)), LogFormat: uint32(s.svc.LogFormat())}
	if h.LeaderID != "" {
		out.Leader = ptr(json.Number(h.LeaderID))
	}
	var wg sync.WaitGroup
	for i, m := range members {
		out.Members[i] = memberJSON{
			ID: json.Number(m.ID), RaftAddr: m.RaftAddr, HTTPAddr: m.HTTPAddr, KafkaAddr: m.KafkaAddr,
			Voter: m.Voter, Leader: m.ID == h.LeaderID,
		}
		if m.LogFormat != 0 {
			out.Members[i].LogFormat = ptr(m.LogFormat)
		}
		mj := &out.Members[i]
		if m.ID == h.NodeID {
			mj.State, mj.Role, mj.Term, mj.Applied = "up", h.Role, ptr(h.Term), ptr(h.Applied)
			mj.VotesWithheld = h.VotesWithheld
			mj.Version, mj.UptimeSeconds = s.version, ptr(int64(time.Since(s.started).Seconds()))
			mj.LogFormat = ptr(uint32(command.MaxLogFormat))
			mj.resourcesJSON = s.resources()
			mj.Groups = s.raftGroupsJSON()
			mj.ClockOffsetMs = ptr(s.clockJSON().OffsetMs)
			mj.StateDigest = ptr(stateDigestJSON(h.Digest))
			mj.StateCheck = stateCheckJSON(h.Check)
			continue
		}
		if m.HTTPAddr == "" {
			mj.State, mj.Error = "unreachable", "has not registered its addresses (not started, or not yet joined)"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			peer, err := s.fetchHealth(ctx, mj.HTTPAddr)
			if err != nil {
				mj.State, mj.Error = "unreachable", err.Error()
				return
			}
			mj.State, mj.Role, mj.Term, mj.Applied = "up", peer.Raft.Role, ptr(peer.Raft.Term), ptr(peer.Raft.Applied)
			mj.VotesWithheld = peer.Raft.VotesWithheld
			mj.Version, mj.UptimeSeconds = peer.Version, ptr(peer.UptimeSeconds)
			mj.resourcesJSON = peer.resourcesJSON
			mj.Groups = peer.Groups
			if peer.Raft.StateDigest.Applied.Digest != "" {
				mj.StateDigest = ptr(peer.Raft.StateDigest)
			}
			mj.StateCheck = peer.Raft.StateCheck
			if peer.Clock != nil {
				mj.ClockOffsetMs = ptr(peer.Clock.OffsetMs)
			}
			if mj.LogFormat == nil {
				mj.LogFormat = ptr(max(peer.LogFormat, 1))
			}
		}()
	}
	wg.Wait()
	out.Replicas = compareReplicas(out.Members)
	out.Checks = compareChecks(out.Members)
	switch {
	case slices.ContainsFunc(members, func(m broker.Member) bool { return m.ID == h.NodeID }):
	case len(members) == 0: // started with --join, never added: no configuration at all
		out.NotAMember = "node " + h.NodeID + " is not a member yet: add it from a member with `waggle cluster add " + h.NodeID + " RAFT_ADDR`"
	default: // the configuration it last applied leaves it out
		out.NotAMember = "node " + h.NodeID + " is no longer a member: it was removed from the cluster. To bring it back, stop it, empty its data directory, " +
			"start it with --join and add it from a member with `waggle cluster add " + h.NodeID + " RAFT_ADDR`"
	}
	// The leader is the one that says so itself; a member that cannot be
	// reached is not shown as leader, whatever this node last heard.
	var leaderApplied *uint64
	for i := range out.Members {
		mj := &out.Members[i]
		mj.Leader = mj.Leader && mj.State == "up"
		if mj.Role == "leader" {
			leaderApplied = mj.Applied
		}
	}
	for i := range out.Members {
		if mj := &out.Members[i]; leaderApplied != nil && mj.Applied != nil {
			mj.Lag = ptr(*leaderApplied - min(*mj.Applied, *leaderApplied))
		}
	}
	return out, nil
}

// fetchHealth asks a member for its /health; any answer with a body counts
// (a member without a leader answers 503 and still says how it stands).
func (s *Server) fetchHealth(ctx context.Context, addr string) (healthJSON, error) {
	var h healthJSON
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.peers.scheme+"://"+addr+"/health", nil)
	if err != nil {
		return h, err
	}
	resp, err := s.peers.health.Do(req)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return h, fmt.Errorf("%s/health answered HTTP %d without a health report", addr, resp.StatusCode)
	}
	return h, nil
}

type addNodeRequest struct {
	ID       json.Number `json:"id"`
	RaftAddr string      `json:"raftAddr"`
}

// joinFormatWait bounds how long addNode waits for a node added at log
// format 2 or above to register and report the format its binary reads.
const joinFormatWait = 20 * time.Second

// addNode adds a voter. While the cluster writes log format 1 (which
// every binary reads) it is added at once. From format 2 on, a node whose
// binary reads only an older format must not become a voter: it would
// stop at the first entry it cannot read, and a cluster of two would lose
// its quorum. So it joins as a non-voter, and is promoted once its /health
// reports a format at least the cluster's; a node that reports an older
// one is removed again, as is one that runs another number of raft groups
// (--data-groups: it would place queues in other groups than the
// cluster's).
func (s *Server) addNode(w http.ResponseWriter, r *http.Request) {
	var req addNodeRequest
	if !decodeBody(w, r, &req) {
		return
	}
	id := req.ID.String()
	cluster := uint32(s.svc.LogFormat())
	if cluster > uint32(command.LogFormat1) {
		if err := s.svc.AddNonvoter(id, req.RaftAddr); err != nil {
			s.writeBrokerError(w, err)
			return
		}
		h, ok := s.joinerHealth(r, id)
		reads, groups := max(h.LogFormat, uint32(command.LogFormat1)), cmp.Or(h.GroupCount, max(len(h.Groups), 1))
		switch {
		case !ok:
			writeError(w, http.StatusGatewayTimeout, "node_not_ready", fmt.Sprintf(
				"node %s was added as a non-voter but has not reported the log format it reads within %v: is it running, with --join? (a release that reads an older format than the cluster's stops at the first entry it cannot read: see its log); add it again to make it a voter", id, joinFormatWait))
			return
		case reads < cluster:
			err := s.svc.RemoveNode(id)
			writeError(w, http.StatusConflict, "log_format_too_old", fmt.Sprintf(
				"node %s runs a waggle that reads raft log format %d; the cluster writes %d: start it with a release that reads %d (removed again: %v)", id, reads, cluster, cluster, err))
			return
		case groups != s.groupCount():
			err := s.svc.RemoveNode(id)
			writeError(w, http.StatusConflict, "data_groups_differ", fmt.Sprintf(
				"node %s runs %d raft groups; the cluster runs %d, and nodes with different counts place queues in different groups: start it again with an empty data directory and --data-groups %d (removed again: %v)",
				id, groups, s.groupCount(), s.groupCount(), err))
			return
		}
	}
	if err := s.svc.AddVoter(id, req.RaftAddr); err != nil {
		s.writeBrokerError(w, err)
		return
	}
	s.cluster(w, r)
}

// joinerHealth waits until node id has registered its HTTP address and
// answers /health, and returns the answer (binaries older than log
// formats report none: format 1).
func (s *Server) joinerHealth(r *http.Request, id string) (healthJSON, bool) {
	deadline := time.Now().Add(joinFormatWait)
	for time.Now().Before(deadline) && r.Context().Err() == nil {
		members, err := s.svc.Members()
		if err == nil {
			for _, m := range members {
				if m.ID != id || m.HTTPAddr == "" {
					continue
				}
				if h, err := s.fetchHealth(r.Context(), m.HTTPAddr); err == nil {
					return h, true
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return healthJSON{}, false
}

func (s *Server) removeNode(w http.ResponseWriter, r *http.Request) {
	for g := uint32(1); s.remote != nil && g < uint32(s.groupCount()); g++ {
		if slices.Contains(s.replicasOf(g), r.PathValue("id")) || slices.Contains(s.remote[g].Leader().Members, r.PathValue("id")) {
			writeError(w, http.StatusConflict, "replicas_on_node", fmt.Sprintf("node %s still replicates raft group %d, or is still a member of it: decommission it first (POST /api/v1/cluster/decommission) and wait for its groups to move",
				r.PathValue("id"), g))
			return
		}
	}
	if err := s.svc.RemoveNode(r.PathValue("id")); err != nil {
		s.writeBrokerError(w, err)
		return
	}
	s.cluster(w, r)
}

type registerRequest struct {
	ID        json.Number `json:"id"`
	HTTPAddr  string      `json:"httpAddr"`
	KafkaAddr string      `json:"kafkaAddr"`
	// LogFormat: the newest raft log format the node reads. Nodes send it
	// once the cluster is at format 2 (older leaders refuse the field).
	LogFormat uint32 `json:"logFormat,omitempty"`
}

// register records a node's advertised addresses; each node calls it on
// itself at start-up, and a follower forwards it like any write.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var req registerRequest
	if !decodeBody(w, r, &req) {
		return
	}
	err := s.svc.RegisterNode(broker.NodeAddrs{ID: req.ID.String(), HTTPAddr: req.HTTPAddr, KafkaAddr: req.KafkaAddr, LogFormat: req.LogFormat})
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"registered": true})
}

// snapshot takes a raft snapshot on this node (not forwarded: snapshots
// are per node) and answers its index.
//
// With several raft groups each takes one; index is group 0's and groups
// lists every group's.
func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) {
	index, err := s.svc.Snapshot()
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	if s.groupCount() <= 1 {
		writeJSON(w, http.StatusOK, map[string]uint64{"index": index})
		return
	}
	type groupSnapshot struct {
		Group uint32 `json:"group"`
		Index uint64 `json:"index"`
	}
	out := []groupSnapshot{{0, index}}
	for g, b := range s.route.All()[1:] {
		if !s.route.Replicated(uint32(g + 1)) {
			continue
		}
		i, err := b.Snapshot()
		if err != nil {
			s.writeBrokerError(w, fmt.Errorf("raft group %d: %w", g+1, err))
			return
		}
		out = append(out, groupSnapshot{uint32(g + 1), i})
	}
	writeJSON(w, http.StatusOK, map[string]any{"index": index, "groups": out})
}

func ptr[T any](v T) *T { return &v }

type healthJSON struct {
	Status string      `json:"status"`
	NodeID json.Number `json:"nodeId"`
	Raft   raftJSON    `json:"raft"`
	// StorageFull: this node refuses writes that add data (disk below
	// --storage-min-free-mib); a full leader hands off only to one without.
	StorageFull bool `json:"storageFull"`
	// LogFormat is the newest raft log format this node's binary reads;
	// the leader raises the cluster's format once every member's says so.
	LogFormat uint32 `json:"logFormat"`
	// Version is the node's binary; UptimeSeconds how long it has served.
	Version       string `json:"version"`
	UptimeSeconds int64  `json:"uptimeSeconds"`
	resourcesJSON
	// Groups lists each raft group on this node, group 0 (the one Raft
	// describes) first; absent when the cluster has only group 0.
	Groups []raftGroupJSON `json:"groups,omitempty"`
	// GroupCount is how many raft groups the cluster runs, when more
	// than one: with a replication factor Groups lists only this node's.
	GroupCount int `json:"groupCount,omitempty"`
	// Clock is absent from binaries older than the voters' median clock.
	Clock *clockJSON `json:"clock,omitempty"`
}

// raftGroupsJSON reports this node's raft groups (nil: only group 0).
func (s *Server) raftGroupsJSON() []raftGroupJSON {
	if s.raftGroups == nil {
		return nil
	}
	var out []raftGroupJSON
	for _, g := range s.raftGroups() {
		id := g.Group
		gj := raftGroupJSON{ID: id, Role: g.Role, Term: g.Term, Commit: g.Commit, Applied: g.Applied, StateDigest: stateDigestJSON(g.Digest), StateCheck: stateCheckJSON(g.Check),
			Replicas: numbers(s.replicasOf(id)), Moving: g.Moving}
		if g.LeaderID != "" {
			gj.Leader = ptr(json.Number(g.LeaderID))
		}
		if node, err := s.svc.LeaderPreference(id); err == nil && node != "" {
			gj.PreferredLeader = ptr(json.Number(node))
		}
		out = append(out, gj)
	}
	return out
}

// raftGroupJSON is one raft group's state on a node.
type raftGroupJSON struct {
	ID      uint32       `json:"id"`
	Role    string       `json:"role"`
	Leader  *json.Number `json:"leader"`
	Term    uint64       `json:"term"`
	Commit  uint64       `json:"commit"`
	Applied uint64       `json:"applied"`
	// PreferredLeader is the node an operator chose to lead the group.
	PreferredLeader *json.Number `json:"preferredLeader,omitempty"`
	// Replicas, with a replication factor, are the nodes that should
	// replicate the group; Moving is true on its leader while its members
	// are not yet those.
	Replicas    []json.Number `json:"replicas,omitempty"`
	Moving      bool          `json:"moving,omitempty"`
	StateDigest digestJSON    `json:"stateDigest"`
	StateCheck  *checkJSON    `json:"stateCheck,omitempty"`
}

// digestJSON is a group's state digest on this node (fsm.StateDigest):
// replicas whose since is the same hold the same state exactly when their
// digests at the same index are equal. Digests are 16 hex digits.
type digestJSON struct {
	Since   uint64            `json:"since"`
	Applied digestPointJSON   `json:"applied"`
	Recent  []digestPointJSON `json:"recent"`
}

type digestPointJSON struct {
	Index  uint64 `json:"index"`
	Digest string `json:"digest"`
}

func stateDigestJSON(d fsm.StateDigest) digestJSON {
	point := func(p fsm.DigestPoint) digestPointJSON {
		return digestPointJSON{Index: p.Index, Digest: fmt.Sprintf("%016x", p.Digest)}
	}
	out := digestJSON{Since: d.Since, Applied: point(d.Applied), Recent: []digestPointJSON{}}
	for _, p := range d.Recent {
		out.Recent = append(out.Recent, point(p))
	}
	return out
}

// resourcesJSON is what a node uses of its machine. DiskUsedBytes and
// DiskTotalBytes are of the file system holding its data directory (null
// when unknown); MemoryBytes is the memory the Go runtime holds from the
// operating system (mapped, less what it has given back; memory-mapped
// badger files are not counted).
type resourcesJSON struct {
	DiskUsedBytes  *uint64 `json:"diskUsedBytes"`
	DiskTotalBytes *uint64 `json:"diskTotalBytes"`
	MemoryBytes    *uint64 `json:"memoryBytes"`
}

// resources measures this node's resourcesJSON.
func (s *Server) resources() resourcesJSON {
	var out resourcesJSON
	if s.diskUsage != nil {
		if used, total, err := s.diskUsage(); err == nil {
			out.DiskUsedBytes, out.DiskTotalBytes = ptr(used), ptr(total)
		}
	}
	sample := []rtmetrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	rtmetrics.Read(sample)
	if sample[0].Value.Kind() == rtmetrics.KindUint64 && sample[1].Value.Kind() == rtmetrics.KindUint64 {
		out.MemoryBytes = ptr(sample[0].Value.Uint64() - sample[1].Value.Uint64())
	}
	return out
}

// Node ids are numbers; leader is null while none is known.
type raftJSON struct {
	Role              string       `json:"role"`
	Leader            *json.Number `json:"leader"`
	LeaderAddr        string       `json:"leaderAddr"` // raft address
	LeaderHTTP        string       `json:"leaderHttp"`
	Term              uint64       `json:"term"`
	Commit            uint64       `json:"commit"`
	Applied           uint64       `json:"applied"`
	LastSnapshotIndex uint64       `json:"lastSnapshotIndex"`
	// VotesWithheld: this node grants no votes until its log catches up.
	VotesWithheld bool `json:"votesWithheld,omitempty"`
	// ClockMs is the replicated clock (Unix ms) as of the last applied
	// entry, by which timers, leases and dedup windows expire.
	ClockMs     int64      `json:"clockMs"`
	StateDigest digestJSON `json:"stateDigest"`
	// StateCheck is how this node's state checks stand (statecheck.go).
	StateCheck *checkJSON `json:"stateCheck,omitempty"`
}

// health answers 200 while this node knows a leader, 503 otherwise, so a
// load balancer stops sending to a node cut off from the cluster.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	h := s.svc.Health()
	out := healthJSON{
		Clock:  s.clockJSON(),
		Status: "healthy",
		NodeID: json.Number(h.NodeID),
		Raft: raftJSON{Role: h.Role, LeaderAddr: h.LeaderRaft, LeaderHTTP: h.LeaderHTTP, Term: h.Term,
			Commit: h.Commit, Applied: h.Applied, LastSnapshotIndex: h.LastSnapshotIndex, VotesWithheld: h.VotesWithheld, ClockMs: h.ClockMs,
			StateDigest: stateDigestJSON(h.Digest), StateCheck: stateCheckJSON(h.Check)},
		StorageFull:   s.svc.StorageFull(),
		LogFormat:     uint32(command.MaxLogFormat),
		Version:       s.version,
		UptimeSeconds: int64(time.Since(s.started).Seconds()),
		resourcesJSON: s.resources(),
	}
	out.Groups = s.raftGroupsJSON()
	if s.groupCount() > 1 {
		out.GroupCount = s.groupCount()
	}
	status := http.StatusOK
	if h.LeaderID == "" {
		out.Status, status = "no_leader", http.StatusServiceUnavailable
	} else {
		leader := json.Number(h.LeaderID)
		out.Raft.Leader = &leader
	}
	writeJSON(w, status, out)
}
