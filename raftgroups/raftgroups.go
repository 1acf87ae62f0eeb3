// Package raftgroups runs a node's raft groups and keeps them in shape.
//
// Group 0 is the metadata group: its membership is the cluster's. Data
// groups 1..n-1 run on the same raft listener (raftmux), each with its own
// store and raft log under the data directory's groups/<id>. Without a
// replication factor (Placement) every group has the cluster's voters as
// members: the leader of a data group adds and removes members until its
// configuration matches group 0's, and group g prefers the voter at
// position g (mod the voter count) in the voters sorted by id. With one,
// a node runs only the data groups it replicates, and group g prefers the
// first of its replicas. A group's leader hands leadership to the
// preferred voter whenever it is reachable, which also moves leadership
// back after a node returns.
package raftgroups

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/raftnode"
	"github.com/waggle-mq/waggle/store"
)

// Group is one raft group on this node.
type Group struct {
	ID    uint32          // 0 is the metadata group
	Store *store.Store    // the group's replicated state on this node
	Node  *raftnode.Node  // this node's raft member of the group
	Svc   *broker.Service // the broker over Node and Store

	left chan struct{} // closed by Set.Leave: the group's watchers stop
}

// Set is the node's groups, indexed by id. With a replication factor the
// groups change while the node runs, as replicas move (Join, Leave).
type Set struct {
	cfg        Config
	self       raft.ServerID
	log        *slog.Logger
	canLead    func(id string) bool
	preference func(group uint32) string
	placement  Placement

	mu          sync.Mutex
	groups      []*Group                          // by id, group 0 first; replaced, never changed in place
	running     context.Context                   // Run's, while it runs: for the heartbeat watch of a group joined
	unreachable map[uint32]map[raft.ServerID]bool // per group, peers whose heartbeats fail
	notBefore   map[uint32]time.Time              // per group, when the next hand-off may be tried
}

// Config says which data groups to start.
type Config struct {
	Count   int    // groups in the cluster, group 0 included; 0 or 1: no data groups
	DataDir string // the node's data directory
	// Node is the raft configuration every data group shares with group 0
	// (ID, Mux, Peers, Join, Logger, TLS); Dir and Group are set per group.
	Node raftnode.NodeConfig
	// NewService wraps a data group's raft member in a broker service.
	NewService func(*raftnode.Node, *store.Store) *broker.Service
	// OpenStore opens a data group's store in dir.
	OpenStore func(dir string) (*store.Store, error)
	// CanLead reports whether a node may be handed a group's leadership
	// now (nil: any reachable voter may): a node whose disk is full, or
	// that is shutting down, should not get it back.
	CanLead func(id string) bool
	// Preference answers the node an operator chose to lead a group (""
	// for none: the voter its id picks); nil: no choices.
	Preference func(group uint32) string
	// Placement says which data groups this node runs (all of them
	// without a replication factor) until Recorded records otherwise.
	Placement Placement
	// Recorded answers the replicas group 0 records for a data group, the
	// preferred leader first (nil: none recorded, Placement applies); nil
	// Recorded: replicas never move.
	Recorded func(group uint32) ([]string, error)
	// CaughtUp reports whether node's member of group has applied index
	// (a non-voter is promoted only once it has); nil: never.
	CaughtUp func(node string, group uint32, index uint64) bool
}

// MaxGroups bounds the raft groups of a cluster: each runs its own
// elections, heartbeats and store on every node.
const MaxGroups = 64

// checkEvery is how often a group's leader checks its membership and
// leadership.
const checkEvery = time.Second

// groupCount is the number of groups a --data-groups value asks for: 0
// means 1 (group 0 alone).
func groupCount(n int) (int, error) {
	if n < 0 || n > MaxGroups {
		return 0, fmt.Errorf("%d raft groups: from 1 (the metadata group alone) to %d", n, MaxGroups)
	}
	return max(n, 1), nil
}

// countFile records how many groups a data directory was created with:
// the placement of queues on groups depends on it.
const countFile = "count"

// Start starts the data groups of cfg beside meta, group 0 (CheckCount
// has checked the count). On an error the groups started are closed again.
func Start(meta *Group, cfg Config, log *slog.Logger) (*Set, error) {
	count, err := groupCount(cfg.Count)
	if err != nil {
		return nil, err
	}
	s := &Set{cfg: cfg, groups: []*Group{meta}, self: raft.ServerID(cfg.Node.ID), log: log, canLead: cfg.CanLead, preference: cfg.Preference,
		placement: cfg.Placement, unreachable: map[uint32]map[raft.ServerID]bool{}, notBefore: map[uint32]time.Time{}}
	ids, err := Runs(cfg.DataDir, cfg.Placement, cfg.Node.ID, count)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		g, err := startGroup(id, cfg, s.peersOf(id))
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("group %d: %w", id, err)
		}
		s.groups = append(s.groups, g)
	}
	return s, nil
}

// Dir is the directory of group id's store and raft log in a node's data
// directory: the data directory itself for group 0.
func Dir(dataDir string, id uint32) string {
	if id == 0 {
		return dataDir
	}
	return filepath.Join(dataDir, "groups", strconv.FormatUint(uint64(id), 10))
}

// Runs lists the data groups a node runs when it starts: with a
// replication factor, those whose directory it has, and those the static
// placement gives it that it has not left (a new data directory's); every
// data group without one.
func Runs(dataDir string, p Placement, node string, count int) ([]uint32, error) {
	var out []uint32
	for id := uint32(1); id < uint32(count); id++ {
		if p.Everywhere() {
			out = append(out, id)
			continue
		}
		_, err := os.Stat(Dir(dataDir, id))
		switch {
		case err == nil:
		case !errors.Is(err, os.ErrNotExist):
			return nil, err
		case !p.Replicates(node, id):
			continue
		default:
			if _, err := os.Stat(leftMark(dataDir, id)); err == nil {
				continue
			}
		}
		out = append(out, id)
	}
	return out, nil
}

// A group's member that joined a running group (Set.Join) is marked by
// joinedFile in the group's directory: it never bootstraps, even when it
// restarts before the leader first reached it. A group the node left
// (Set.Leave) is marked by leftMark, so the static placement does not
// start it again.
const joinedFile = "joined"

func leftMark(dataDir string, id uint32) string { return Dir(dataDir, id) + ".left" }

// startGroup starts this node's member of group id. A member that joined
// a running group (joinedFile) never bootstraps, and withholds its votes
// while its directory is new: peers are the group's replicas it asks for
// the group's term.
func startGroup(id uint32, cfg Config, peers []raftnode.Peer) (*Group, error) {
	dir := Dir(cfg.DataDir, id)
	nc := cfg.Node
	nc.Dir, nc.Group = dir, id
	if _, err := os.Stat(filepath.Join(dir, joinedFile)); err == nil {
		nc.Join, nc.GuardVotes, nc.Peers = true, true, peers
	} else if replicas := cfg.Placement.Replicas(id); replicas != nil {
		nc.Peers = slices.DeleteFunc(slices.Clone(nc.Peers), func(p raftnode.Peer) bool { return !slices.Contains(replicas, p.ID) })
	}
	st, err := cfg.OpenStore(filepath.Join(dir, "state"))
	if err != nil {
		return nil, err
	}
	if nc.Logger != nil {
		nc.Logger = nc.Logger.With("group", id)
	}
	node, err := raftnode.StartNode(nc, st)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &Group{ID: id, Store: st, Node: node, Svc: cfg.NewService(node, st), left: make(chan struct{})}, nil
}

// CheckCount records the group count in a new data directory and refuses
// a different one in an existing directory: the placement of queues on
// groups depends on it. A directory with a raft log and no record was made
// by a node without data groups (count 1). Call it before group 0 starts.
func CheckCount(dataDir string, count int) error {
	count, err := groupCount(count)
	if err != nil {
		return err
	}
	had, err := Recorded(dataDir)
	if err != nil {
		return err
	}
	if had != 0 && had != count {
		return fmt.Errorf("this data directory was created with %d raft groups, not %d (--data-groups cannot change)", had, count)
	}
	if had == 0 && count > 1 {
		return Record(dataDir, count)
	}
	return nil
}

// Record writes the group count of a new data directory (CheckCount does
// at the first start; a restore of several groups' backups does).
func Record(dataDir string, count int) error {
	path := filepath.Join(dataDir, "groups", countFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(strconv.Itoa(count)+"\n"), 0o644)
}

// Recorded is the group count a data directory was created with: 0 for a
// new directory, 1 for one with a raft log and no record (made by a node
// without data groups).
func Recorded(dataDir string) (int, error) {
	path := filepath.Join(dataDir, "groups", countFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return 0, fmt.Errorf("groups: %s: %w", path, err)
		}
		return n, nil
	case errors.Is(err, os.ErrNotExist):
		if _, err := os.Stat(filepath.Join(dataDir, "raft")); err == nil {
			return 1, nil
		}
		return 0, nil
	default:
		return 0, err
	}
}

// All returns every group this node runs now, group 0 first, in id order.
func (s *Set) All() []*Group {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.groups
}

// Data returns the data groups this node runs now (all but group 0).
func (s *Set) Data() []*Group { return s.All()[1:] }

// Get is group id when this node runs it, else nil.
func (s *Set) Get(id uint32) *Group {
	for _, g := range s.All() {
		if g.ID == id {
			return g
		}
	}
	return nil
}

// Placement is which nodes replicate each data group when the cluster
// was made.
func (s *Set) Placement() Placement { return s.placement }

// Replicas lists the nodes that should replicate data group g now, its
// preferred leader first: those group 0 records (Config.Recorded), or
// else the static placement's. Nil when every node replicates every group,
// and for group 0.
func (s *Set) Replicas(g uint32) []string {
	if s.placement.Everywhere() || g == 0 {
		return nil
	}
	nodes, _ := s.recorded(g)
	return nodes
}

// recorded is Replicas with an error when group 0's record cannot be
// read: a leader must not walk a group back to the static placement on a
// read that failed.
func (s *Set) recorded(g uint32) ([]string, error) {
	if s.cfg.Recorded != nil {
		nodes, err := s.cfg.Recorded(g)
		if err != nil || len(nodes) > 0 {
			return nodes, err
		}
	}
	return s.placement.Replicas(g), nil
}

// Join starts a member of data group id that waits to be added by the
// group's leader (which sends it a snapshot and the log since): this node
// has become one of the group's replicas. prepare (nil: none) readies the
// group before the Set lists it.
func (s *Set) Join(id uint32, prepare func(*Group)) (*Group, error) {
	dir := Dir(s.cfg.DataDir, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, joinedFile), nil, 0o644); err != nil {
		return nil, err
	}
	if err := os.Remove(leftMark(s.cfg.DataDir, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	g, err := startGroup(id, s.cfg, s.peersOf(id))
	if err != nil {
		return nil, err
	}
	if prepare != nil {
		prepare(g)
	}
	s.mu.Lock()
	groups := append(slices.Clone(s.groups), g)
	slices.SortFunc(groups, func(a, b *Group) int { return cmp.Compare(a.ID, b.ID) })
	s.groups = groups
	running := s.running
	s.mu.Unlock()
	if running != nil {
		s.watchHeartbeats(running, g)
	}
	return g, nil
}

// ServedAtStart reports whether this node may serve data group id's
// requests from its own member as soon as it starts: it replicates the
// group by group 0's record, and the member was not added by a move (that
// one is served once it has caught up again: it may have restarted in
// the middle of receiving the group). Always true without a replication
// factor.
func (s *Set) ServedAtStart(id uint32) bool {
	if s.placement.Everywhere() || id == 0 {
		return true
	}
	_, err := os.Stat(filepath.Join(Dir(s.cfg.DataDir, id), joinedFile))
	return errors.Is(err, os.ErrNotExist) && slices.Contains(s.Replicas(id), string(s.self))
}

// peersOf are the replicas of group id (this node included), with their
// raft addresses from group 0's configuration.
func (s *Set) peersOf(id uint32) []raftnode.Peer {
	var out []raftnode.Peer
	for _, n := range s.Replicas(id) {
		if addr, ok := s.raftAddr(n); ok {
			out = append(out, raftnode.Peer{ID: n, Addr: string(addr)})
		}
	}
	return out
}

// Leave stops this node's member of data group id, which the group's
// leader has removed, and deletes its directory: the node no longer
// replicates the group.
func (s *Set) Leave(id uint32) error {
	g := s.Get(id)
	if g == nil || id == 0 {
		return nil
	}
	s.mu.Lock()
	s.groups = slices.DeleteFunc(slices.Clone(s.groups), func(x *Group) bool { return x == g })
	s.mu.Unlock()
	close(g.left)
	if err := errors.Join(g.Node.Shutdown(), g.Store.Close()); err != nil {
		return err
	}
	if err := os.WriteFile(leftMark(s.cfg.DataDir, id), nil, 0o644); err != nil {
		return err
	}
	// Renamed first, so a crash while deleting leaves no half directory
	// that the next start would take for the group's.
	dir := Dir(s.cfg.DataDir, id)
	gone := dir + ".removed"
	if err := os.RemoveAll(gone); err != nil {
		return err
	}
	if err := os.Rename(dir, gone); err != nil {
		return err
	}
	return os.RemoveAll(gone)
}

// Close stops the data groups (the Set started them; group 0 is its
// caller's): raft, then the store.
func (s *Set) Close() error {
	var errs []error
	for _, g := range s.Data() {
		errs = append(errs, g.Node.Shutdown(), g.Store.Close())
	}
	return errors.Join(errs...)
}

// Run keeps each group's membership equal to group 0's and its leadership
// on its preferred voter, until ctx ends. With a single group in the
// cluster there is nothing to do (a node that runs group 0 alone, with a
// replication factor, still hands group 0 to its preferred voter).
func (s *Set) Run(ctx context.Context) {
	if len(s.All()) == 1 && s.placement.Everywhere() {
		return
	}
	s.mu.Lock()
	s.running = ctx
	groups := s.groups
	s.mu.Unlock()
	for _, g := range groups {
		s.watchHeartbeats(ctx, g)
	}
	tick := time.NewTicker(checkEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		catchingUp := 0 // groups this node leads that have a member catching up
		for _, g := range s.All() {
			if g.ID != 0 && g.Node.Raft.State() == raft.Leader && s.catchingUp(g) {
				catchingUp++
			}
		}
		for _, g := range s.All() {
			if g.Node.Raft.State() != raft.Leader {
				continue
			}
			switch {
			case g.ID == 0:
			case s.placement.Everywhere():
				s.matchMembership(g)
			default:
				if s.moveReplicas(g, catchingUp < maxCatchingUp) {
					catchingUp++
				}
			}
			s.balance(g)
		}
	}
}

// watchHeartbeats tracks, while this node leads g, which peers fail their
// heartbeats: leadership is not handed to them.
func (s *Set) watchHeartbeats(ctx context.Context, g *Group) {
	obs := make(chan raft.Observation, 64)
	o := raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation, raft.LeaderObservation:
			return true
		}
		return false
	})
	g.Node.Raft.RegisterObserver(o)
	go func() {
		defer g.Node.Raft.DeregisterObserver(o)
		for {
			select {
			case <-ctx.Done():
				return
			case <-g.left:
				return
			case ob := <-obs:
				s.mu.Lock()
				switch d := ob.Data.(type) {
				case raft.FailedHeartbeatObservation:
					if s.unreachable[g.ID] == nil {
						s.unreachable[g.ID] = map[raft.ServerID]bool{}
					}
					s.unreachable[g.ID][d.PeerID] = true
				case raft.ResumedHeartbeatObservation:
					delete(s.unreachable[g.ID], d.PeerID)
				case raft.LeaderObservation:
					// A new term: the old leader's view of its peers is
					// gone; a fresh leader lets its heartbeats tell it
					// which peers are down before it moves.
					delete(s.unreachable, g.ID)
					s.notBefore[g.ID] = time.Now().Add(settleAfterElection)
				}
				s.mu.Unlock()
			}
		}
	}()
}

// matchMembership adds to data group g the members of group 0 it lacks and
// removes those group 0 no longer has, one change per call (raft applies
// configuration changes one at a time). It acts only on a view of group 0
// that is current: this node is a voter there and hears from its leader
// (a node whose group 0 was just repaired, or lags, would otherwise strip
// or refill the group from an old configuration).
func (s *Set) matchMembership(g *Group) {
	meta := s.All()[0].Node.Raft
	want, err := configuration(meta)
	if err != nil {
		return
	}
	if me, ok := find(want, s.self); !ok || me.Suffrage != raft.Voter {
		return
	}
	if meta.State() != raft.Leader && time.Since(meta.LastContact()) > metaContact {
		return
	}
	have, err := configuration(g.Node.Raft)
	if err != nil {
		return
	}
	for _, w := range want {
		h, ok := find(have, w.ID)
		if ok && h.Suffrage == w.Suffrage && h.Address == w.Address {
			continue
		}
		var f raft.IndexFuture
		switch {
		case w.Suffrage == raft.Voter:
			f = g.Node.Raft.AddVoter(w.ID, w.Address, 0, 5*time.Second)
		case ok && h.Suffrage == raft.Voter:
			// AddNonvoter leaves a voter a voter (and logs a change
			// anyway): a member demoted in group 0 is demoted here.
			f = g.Node.Raft.DemoteVoter(w.ID, 0, 5*time.Second)
		default:
			f = g.Node.Raft.AddNonvoter(w.ID, w.Address, 0, 5*time.Second)
		}
		if err := f.Error(); err != nil {
			s.log.Warn("could not add a member to a raft group", "group", g.ID, "member", w.ID, "err", err)
		} else {
			s.log.Info("added a member to a raft group", "group", g.ID, "member", w.ID, "voter", w.Suffrage == raft.Voter)
		}
		return
	}
	for _, h := range have {
		if _, ok := find(want, h.ID); ok {
			continue
		}
		if err := g.Node.Raft.RemoveServer(h.ID, 0, 5*time.Second).Error(); err != nil {
			s.log.Warn("could not remove a member from a raft group", "group", g.ID, "member", h.ID, "err", err)
		} else {
			s.log.Info("removed a member from a raft group", "group", g.ID, "member", h.ID)
		}
		return
	}
}

// metaContact is how recently a follower of group 0 must have heard from
// its leader for its view of the membership to count as current.
const metaContact = 2 * time.Second

// A group's leader waits handOffBackoff between two hand-offs, so a target
// that cannot take over is not asked again and again (a transfer stalls
// the group's writes while it runs), and settleAfterElection after a
// leader change, so failed heartbeats can mark the peers that are down.
const (
	handOffBackoff      = 10 * time.Second
	settleAfterElection = 2 * time.Second
)

// balance hands g's leadership to its preferred voter when that is another
// node and reachable.
func (s *Set) balance(g *Group) {
	servers, err := configuration(g.Node.Raft)
	if err != nil {
		return
	}
	target, ok := Preferred(servers, g.ID)
	if replicas := s.Replicas(g.ID); replicas != nil {
		target, ok = voter(servers, raft.ServerID(replicas[0]))
	}
	if s.preference != nil {
		if id := s.preference(g.ID); id != "" {
			if chosen, isVoter := voter(servers, raft.ServerID(id)); isVoter {
				target, ok = chosen, true // else: a node removed since, the default applies
			}
		}
	}
	if !ok || target.ID == s.self {
		return
	}
	s.mu.Lock()
	if s.unreachable[g.ID][target.ID] || time.Now().Before(s.notBefore[g.ID]) {
		s.mu.Unlock()
		return
	}
	s.notBefore[g.ID] = time.Now().Add(handOffBackoff)
	s.mu.Unlock()
	if s.canLead != nil && !s.canLead(string(target.ID)) {
		return
	}
	if err := g.Node.Raft.LeadershipTransferToServer(target.ID, target.Address).Error(); err != nil {
		s.log.Warn("could not hand a raft group's leadership to its preferred node", "group", g.ID, "to", target.ID, "err", err)
		return
	}
	s.log.Info("handed a raft group's leadership to its preferred node", "group", g.ID, "to", target.ID)
}

// Preferred returns the voter that should lead group id: the one at
// position id (mod their count) among the voters sorted by id, numerically
// when ids are numbers. False when there is no voter.
func Preferred(servers []raft.Server, id uint32) (raft.Server, bool) {
	var voters []raft.Server
	for _, sv := range servers {
		if sv.Suffrage == raft.Voter {
			voters = append(voters, sv)
		}
	}
	if len(voters) == 0 {
		return raft.Server{}, false
	}
	slices.SortFunc(voters, func(a, b raft.Server) int { return compareIDs(string(a.ID), string(b.ID)) })
	return voters[int(id)%len(voters)], true
}

// voter finds id among the voters of servers.
func voter(servers []raft.Server, id raft.ServerID) (raft.Server, bool) {
	for _, sv := range servers {
		if sv.ID == id && sv.Suffrage == raft.Voter {
			return sv, true
		}
	}
	return raft.Server{}, false
}

// compareIDs orders node ids as numbers when both are, else as text.
func compareIDs(a, b string) int {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA == nil && errB == nil {
		return cmp.Compare(x, y)
	}
	return strings.Compare(a, b)
}

func configuration(r *raft.Raft) ([]raft.Server, error) {
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	return f.Configuration().Servers, nil
}

func find(servers []raft.Server, id raft.ServerID) (raft.Server, bool) {
	for _, sv := range servers {
		if sv.ID == id {
			return sv, true
		}
	}
	return raft.Server{}, false
}
