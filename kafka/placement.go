package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// With several raft groups (Config.Groups), each topic lives in the group
// its name places it in (placement), and that group's leader leads all of
// the topic's partitions: Metadata names it, and Produce, Fetch and the
// other partition calls sent elsewhere answer NOT_LEADER_OR_FOLLOWER, so
// clients go to the right broker. A transactional id is coordinated by
// the leader of its own group, and a transaction writes only topics of
// that group. A consumer group is coordinated by the leader of the group
// its name places it in; its offsets live beside each topic, in the
// topic's group, written there from the coordinator
// (broker.Service.Forwarding).

// topic is the broker of the raft group that owns a topic (or a
// transactional id).
func (s *Server) topic(name string) Broker { return s.group(s.placedIn(name)) }

// group is the broker of raft group g (svc with one group).
func (s *Server) group(g uint32) Broker { return s.route.Local(g) }

// placedIn reports the group of a topic (0 with one group).
// __consumer_offsets, which Metadata lists with the controller as its
// leader, is group 0's.
func (s *Server) placedIn(name string) uint32 {
	if isInternalTopic(name) {
		return 0
	}
	return s.route.GroupOf(name)
}

// everyGroup lists the groups' brokers (just svc with one group).
func (s *Server) everyGroup() []Broker { return s.route.All() }

// topics answers the named topics from their groups, or every topic of
// every group (by name) when names is nil.
func (s *Server) topics(names []string) ([]broker.TopicInfo, error) {
	if s.route.Groups() <= 1 {
		return s.svc.Topics(names)
	}
	var out []broker.TopicInfo
	if names == nil {
		for _, b := range s.route.All() {
			ts, err := b.Topics(nil)
			if err != nil {
				return nil, err
			}
			out = append(out, ts...)
		}
		slices.SortFunc(out, func(a, b broker.TopicInfo) int { return strings.Compare(a.Name, b.Name) })
		return out, nil
	}
	for _, name := range names {
		ts, err := s.topic(name).Topics([]string{name})
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	return out, nil
}

// groupOffsets answers a consumer group's committed offsets from every
// group's store.
func (s *Server) groupOffsets(group string) ([]command.OffsetCommit, error) {
	return fromEveryGroup(s, func(b Broker) ([]command.OffsetCommit, error) { return b.GroupOffsets(group) })
}

// offsetsLoaded reports whether this node's stores hold every offset of
// group acknowledged so far, so that an OffsetFetch answered from them
// cannot go back to an older commit (its members would consume those
// records again). Every raft group it leads must have applied the log it
// took the lead with (a new leader's store may lag its log), and with
// several raft groups every other one must have caught up with its leader,
// since offsets live beside their topics. Until then the coordinator is
// "loading" (Kafka's COORDINATOR_LOAD_IN_PROGRESS while it reads
// __consumer_offsets after a failover).
func (s *Server) offsetsLoaded() bool {
	for _, b := range s.everyGroup() {
		if b.IsLeader() {
			if !b.LeaderCaughtUp() {
				return false
			}
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, broker.CatchUpWait)
		err := b.CatchUp(ctx)
		cancel()
		if err != nil {
			s.log.Debug("kafka: offsets not loaded", "err", err)
			return false
		}
	}
	return true
}

// offsetGroups lists the consumer groups with offsets in any group.
func (s *Server) offsetGroups() ([]string, error) {
	names, err := fromEveryGroup(s, Broker.OffsetGroups)
	slices.Sort(names)
	return slices.Compact(names), err
}

// pendingTxnOffsets lists a consumer group's offsets staged by open
// transactions, in any group.
func (s *Server) pendingTxnOffsets(group string) ([]store.TxnOffset, error) {
	return fromEveryGroup(s, func(b Broker) ([]store.TxnOffset, error) { return b.PendingTxnOffsets(group) })
}

func fromEveryGroup[T any](s *Server, fn func(Broker) ([]T, error)) ([]T, error) {
	var out []T
	for _, b := range s.everyGroup() {
		part, err := fn(b)
		if err != nil {
			return nil, err
		}
		out = append(out, part...)
	}
	return out, nil
}

// writer is the broker that writes in a topic's group from this node,
// forwarding to the group's leader when another node leads it: the
// coordinator writes offsets of topics whose group another node leads, and
// any broker creates, alters and deletes topics (as Kafka's brokers forward
// admin requests to the controller, KIP-590).
func (s *Server) writer(group uint32) Broker { return s.route.Forwarding(group) }

// errBehind means this broker could not tell whether a topic exists: it
// could not catch up with the leader of the topic's raft group in time (or
// there is none). Kafka clients are answered with a code they retry on.
var errBehind = errors.New("this broker has not caught up with the leader")

// lookupTopic answers the topic name from its raft group, and whether it
// exists. A broker that does not know the topic first catches up with the
// group's leader (broker.Service.CatchUp): a client may have created it
// through another broker a moment ago, and must not be told it does not
// exist. Only a miss pays for that.
func (s *Server) lookupTopic(name string) (broker.TopicInfo, bool, error) {
	b := s.topic(name)
	read := func() (broker.TopicInfo, bool, error) {
		ts, err := b.Topics([]string{name})
		if err != nil || len(ts) == 0 {
			return broker.TopicInfo{}, false, err
		}
		return ts[0], true, nil
	}
	if t, ok, err := read(); ok || err != nil {
		return t, ok, err
	}
	ctx, cancel := context.WithTimeout(s.ctx, broker.CatchUpWait)
	defer cancel()
	if err := b.CatchUp(ctx); err != nil {
		return broker.TopicInfo{}, false, fmt.Errorf("%w: %v", errBehind, err)
	}
	return read()
}

// catchUpGroups brings this broker up to date with the leaders of the
// raft groups of the named topics that it does not lead, each once: an
// admin read after another broker's write (DescribeConfigs right after
// AlterConfigs) sees it. A group it cannot catch up with (no leader) is
// answered from what this broker has.
func (s *Server) catchUpGroups(topics []string) {
	done := map[uint32]bool{}
	for _, name := range topics {
		g := s.placedIn(name)
		if done[g] || s.group(g).IsLeader() {
			continue
		}
		done[g] = true
		ctx, cancel := context.WithTimeout(s.ctx, broker.CatchUpWait)
		if err := s.group(g).CatchUp(ctx); err != nil {
			s.log.Debug("kafka: answering from this broker's state", "group", g, "err", err)
		}
		cancel()
	}
}

// lookupCode is the Kafka error code for a failed lookupTopic: retriable
// while this broker is behind.
func lookupCode(err error) int16 {
	if errors.Is(err, errBehind) || remoteUnavailable(err) {
		return kerr.LeaderNotAvailable.Code
	}
	return kerr.UnknownServerError.Code
}

// remoteUnavailable reports whether err is a raft group's replicas not
// answering a read another broker asked of them (broker.RemoteGroup): the
// client should try again.
func remoteUnavailable(err error) bool {
	return errors.Is(err, broker.ErrNotLeader) || errors.Is(err, broker.ErrOutcomeUnknown)
}

// commitOffsets stores a consumer group's offsets in their topics'
// groups, one outcome per offset in order.
func (s *Server) commitOffsets(group string, offsets []command.OffsetCommit) ([]command.TopicOutcome, error) {
	out := make([]command.TopicOutcome, len(offsets))
	for g, idx := range s.byGroup(offsets) {
		part := make([]command.OffsetCommit, len(idx))
		for i, j := range idx {
			part[i] = offsets[j]
		}
		outcomes, err := s.writer(g).CommitOffsets(group, part)
		if err != nil {
			return nil, err
		}
		for i, j := range idx {
			out[j] = outcomes[i]
		}
	}
	return out, nil
}

// deleteOffsets deletes a consumer group's offsets (all of them, in every
// group, with all) and answers how many it deleted.
func (s *Server) deleteOffsets(group string, all bool, offsets []command.OffsetCommit) (int, error) {
	parts := map[uint32][]command.OffsetCommit{}
	if all {
		for g := range s.everyGroup() {
			parts[uint32(g)] = nil
		}
	}
	for g, idx := range s.byGroup(offsets) {
		for _, j := range idx {
			parts[g] = append(parts[g], offsets[j])
		}
	}
	n := 0
	for g, part := range parts {
		deleted, err := s.writer(g).DeleteOffsets(group, all, part)
		if err != nil {
			return n, err
		}
		n += deleted
	}
	return n, nil
}

// outsideTxnGroup is the index of the first partition whose topic lives in
// another raft group than the transactional id, or -1.
func (s *Server) outsideTxnGroup(txnID string, parts []store.TxnPartition) int {
	home := s.placedIn(txnID)
	for i, p := range parts {
		if s.placedIn(p.Topic) != home {
			return i
		}
	}
	return -1
}

// byGroup indexes offsets by their topic's group.
func (s *Server) byGroup(offsets []command.OffsetCommit) map[uint32][]int {
	out := map[uint32][]int{}
	for i, o := range offsets {
		g := s.placedIn(o.Topic)
		out[g] = append(out[g], i)
	}
	return out
}
