package kafka

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// Recorded membership. A classic group's generation is recorded in the
// replicated state (command.SaveClassicGroupCommand) before its members
// are given their assignments, as Kafka's coordinator writes the group to
// __consumer_offsets before it answers SyncGroup. A new leader loads the
// record the first time a request names the group, and its members go on
// heartbeating in their generation: no rebalance and no failover grace
// after a leader change. Because an assignment is handed out only once
// its generation is recorded, a loaded generation is never older than one
// a member consumes in, so a generation number is never given out twice.
// A group whose generation could not be recorded (a cluster below log
// format 6, a record too large) is coordinated as before: its members
// rejoin after a leader change, under the failover grace.

// classicRecords is where a coordinator keeps its groups' records: its
// raft group's broker.
type classicRecords interface {
	LeaderCaughtUp() bool
	ClassicGroup(name string) (store.ClassicGroup, bool, error)
	SaveClassicGroup(g store.ClassicGroup) error
}

// recordRetryEvery spaces the attempts to record a stable generation that
// is not recorded yet (formed before the cluster reached log format 6).
const recordRetryEvery = 5 * time.Second

// classic is the coordinator of classic group name with the group's
// recorded membership loaded (classic_record.go), or the code to answer:
// NOT_COORDINATOR on a node that does not lead the group's raft group,
// COORDINATOR_LOAD_IN_PROGRESS while a new leader is still applying.
func (c *conn) classic(name string) (*coordinator, int16) {
	co, coordinating := c.coordinator(name)
	if !coordinating {
		return nil, kerr.NotCoordinator.Code
	}
	return co, co.load(name)
}

// load makes sure the coordinator holds group name as recorded, reading
// the record the first time the group is named in this term. A new leader
// that has not applied its whole log yet answers
// COORDINATOR_LOAD_IN_PROGRESS: its store may lack the newest record.
func (co *coordinator) load(name string) int16 {
	if co.records == nil {
		return 0
	}
	co.mu.Lock()
	term := co.term
	done := co.loaded[name] || co.groups[name] != nil || co.consumers[name] != nil
	co.mu.Unlock()
	if done {
		return 0
	}
	if !co.records().LeaderCaughtUp() {
		return kerr.CoordinatorLoadInProgress.Code
	}
	rec, found, err := co.records().ClassicGroup(name)
	if err != nil {
		return kerr.CoordinatorNotAvailable.Code
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.term != term {
		return kerr.NotCoordinator.Code
	}
	co.loaded[name] = true
	if found && len(rec.Members) > 0 && co.groups[name] == nil && co.consumers[name] == nil {
		co.groups[name] = restoreGroup(rec, time.Now())
	}
	return 0
}

// restoreGroup is a recorded generation, stable, its members' sessions
// starting at now.
func restoreGroup(rec store.ClassicGroup, now time.Time) *group {
	g := &group{name: rec.Name, state: stateStable, protocolType: rec.ProtocolType, protocol: rec.Protocol,
		generation: rec.Generation, leader: rec.Leader, recorded: rec.Generation,
		members: map[string]*member{}, pending: map[string]bool{}, static: map[string]string{}}
	for _, rm := range rec.Members {
		m := &member{id: rm.ID, instanceID: rm.InstanceID, clientID: rm.ClientID, clientHost: rm.ClientHost,
			sessionTimeout:   time.Duration(rm.SessionTimeoutMs) * time.Millisecond,
			rebalanceTimeout: time.Duration(rm.RebalanceTimeoutMs) * time.Millisecond,
			assignment:       rm.Assignment, lastSeen: now}
		for _, p := range rm.Protocols {
			jp := kmsg.NewJoinGroupRequestProtocol()
			jp.Name, jp.Metadata = p.Name, p.Metadata
			m.protocols = append(m.protocols, jp)
		}
		g.members[m.id] = m
		g.order = append(g.order, m.id)
		if m.instanceID != "" {
			g.static[m.instanceID] = m.id
		}
	}
	if g.members[g.leader] == nil {
		g.leader = g.order[0]
	}
	return g
}

// record is g's current generation as it is recorded.
func (g *group) record() store.ClassicGroup {
	rec := store.ClassicGroup{Name: g.name, ProtocolType: g.protocolType, Protocol: g.protocol, Generation: g.generation, Leader: g.leader}
	for _, id := range g.order {
		m := g.members[id]
		rm := store.ClassicMember{ID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			SessionTimeoutMs: int32(m.sessionTimeout.Milliseconds()), RebalanceTimeoutMs: int32(m.rebalanceTimeout.Milliseconds()),
			Assignment: m.assignment}
		for _, p := range m.protocols {
			rm.Protocols = append(rm.Protocols, store.ClassicProtocol{Name: p.Name, Metadata: p.Metadata})
		}
		rec.Members = append(rec.Members, rm)
	}
	return rec
}

// assigned completes g's sync phase once its leader sent the assignment:
// the members get it once the generation is recorded (at once without
// records). The caller holds co.mu.
func (g *group) assigned(co *coordinator) {
	if co.records == nil {
		g.stabilize()
		return
	}
	g.saving = true
	go co.saveAssigned(g, g.record())
}

// saveAssigned records generation rec of g, then hands out its
// assignments; a failure whose outcome is unknown starts a new generation
// instead (the record may or may not have been written).
func (co *coordinator) saveAssigned(g *group, rec store.ClassicGroup) {
	err := co.records().SaveClassicGroup(rec)
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.groups[g.name] != g || !g.saving || g.generation != rec.Generation {
		return // a rebalance or a leader change has answered the members
	}
	g.saving = false
	switch {
	case err == nil:
		g.recorded = rec.Generation
		g.stabilize()
	case errors.Is(err, command.ErrLogFormatTooOld) || errors.Is(err, broker.ErrInvalid):
		g.stabilize() // coordinated without a record
	default:
		g.startRebalance(co, 0)
	}
}

// stabilize makes g stable and answers every member waiting in SyncGroup
// with its assignment. The caller holds co.mu.
func (g *group) stabilize() {
	g.state = stateStable
	for _, m := range g.members {
		m.answerSync(syncAnswer{assignment: m.assignment})
	}
}

// recordIfMissing records a stable generation that is not recorded yet
// (one formed before the cluster reached log format 6), at most every
// recordRetryEvery. The caller holds co.mu.
func (g *group) recordIfMissing(co *coordinator, now time.Time) {
	if co.records == nil || g.state != stateStable || g.recorded == g.generation || now.Sub(g.lastRecordTry) < recordRetryEvery {
		return
	}
	g.lastRecordTry = now
	rec := g.record()
	go func() {
		if err := co.records().SaveClassicGroup(rec); err == nil {
			co.mu.Lock()
			if co.groups[g.name] == g && g.generation == rec.Generation {
				g.recorded = rec.Generation
			}
			co.mu.Unlock()
		}
	}()
}

// emptied records that g lost its last member, so a new leader does not
// bring back members that left. It is done in the background: a leader
// change before it lands loads members that expire by their sessions. The
// caller holds co.mu.
func (g *group) emptied(co *coordinator) {
	g.stopTimer()
	g.state, g.leader, g.protocol, g.saving = stateEmpty, "", "", false
	if co.records == nil || g.recorded == 0 {
		return
	}
	g.recorded = 0
	rec := store.ClassicGroup{Name: g.name, Generation: g.generation}
	go func() { _ = co.records().SaveClassicGroup(rec) }() // the store keeps a newer generation
}
