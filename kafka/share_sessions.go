package kafka

import (
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/waggle-mq/waggle/command"
)

// Share sessions (KIP-932): the partitions a share group's member fetches
// from this node, and the epoch its next ShareFetch or ShareAcknowledge
// must carry. Epoch 0 opens a session (replacing one the member had, whose
// records stay leased until acked or their lock runs out), -1 closes it,
// releasing what the member still holds there; any other epoch must be
// the session's, and moves it on. A session lives in this node's memory
// and belongs to the connection that opened it: the connection closing
// closes it too, as Kafka's do.

// Bounds on share sessions (Kafka's group.share.max.share.sessions).
const (
	maxShareSessions          = 2000
	maxShareSessionPartitions = 10_000
)

type shareSessionKey struct{ group, member string }

type sharePart struct {
	topicID   [16]byte
	partition int32
}

type shareSession struct {
	epoch int32
	parts []sharePart // in the order they were added
	owner *conn
}

type shareSessions struct {
	mu    sync.Mutex
	byKey map[shareSessionKey]*shareSession
}

func newShareSessions() *shareSessions {
	return &shareSessions{byKey: map[shareSessionKey]*shareSession{}}
}

// nextShareEpoch follows epoch, wrapping to 1.
func nextShareEpoch(epoch int32) int32 {
	if epoch == math.MaxInt32 {
		return 1
	}
	return epoch + 1
}

// open starts a member's session with parts, replacing the one it had.
func (ss *shareSessions) open(k shareSessionKey, owner *conn, parts []sharePart) ([]sharePart, int16) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if _, had := ss.byKey[k]; !had && len(ss.byKey) >= maxShareSessions {
		return nil, kerr.ShareSessionLimitReached.Code
	}
	s := &shareSession{epoch: 1, owner: owner}
	s.add(parts)
	ss.byKey[k] = s
	return slices.Clone(s.parts), 0
}

// next checks a request's epoch against the member's session, applies
// its added and then its forgotten partitions, and moves the epoch on; it
// answers the session's partitions after the change.
func (ss *shareSessions) next(k shareSessionKey, epoch int32, adds, forgets []sharePart) ([]sharePart, int16) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.byKey[k]
	switch {
	case s == nil:
		return nil, kerr.ShareSessionNotFound.Code
	case epoch != s.epoch:
		return nil, kerr.InvalidShareSessionEpoch.Code
	}
	s.add(adds)
	s.parts = slices.DeleteFunc(s.parts, func(p sharePart) bool { return slices.Contains(forgets, p) })
	s.epoch = nextShareEpoch(s.epoch)
	return slices.Clone(s.parts), 0
}

// close ends a member's session, answering its partitions.
func (ss *shareSessions) close(k shareSessionKey) ([]sharePart, int16) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.byKey[k]
	if s == nil {
		return nil, kerr.ShareSessionNotFound.Code
	}
	delete(ss.byKey, k)
	return s.parts, 0
}

func (s *shareSession) add(parts []sharePart) {
	for _, p := range parts {
		if !slices.Contains(s.parts, p) && len(s.parts) < maxShareSessionPartitions {
			s.parts = append(s.parts, p)
		}
	}
}

// closeConn ends the sessions a connection owns, releasing what their
// members hold in them.
func (ss *shareSessions) closeConn(srv *Server, c *conn) {
	ss.mu.Lock()
	var closed []shareSessionKey
	var parts [][]sharePart
	for k, s := range ss.byKey {
		if s.owner == c {
			closed, parts = append(closed, k), append(parts, s.parts)
			delete(ss.byKey, k)
		}
	}
	ss.mu.Unlock()
	for i, k := range closed {
		srv.releaseShareParts(k, parts[i])
	}
}

// closeMember ends a member's session on this node (it left its group),
// releasing what it holds.
func (ss *shareSessions) closeMember(srv *Server, group, member string) {
	k := shareSessionKey{group, member}
	if parts, code := ss.close(k); code == 0 {
		srv.releaseShareParts(k, parts)
	}
}

// releaseShareParts gives back every record the member holds in parts.
// It is best effort: what it cannot release (this node no longer leads,
// the topic is gone) comes back when its lock runs out.
func (s *Server) releaseShareParts(k shareSessionKey, parts []sharePart) {
	byTopic := map[string][]command.ShareAck{}
	var order []string
	for _, p := range parts {
		info, ok, err := s.topicByID(p.topicID)
		if err != nil || !ok {
			continue
		}
		if _, seen := byTopic[info.Name]; !seen {
			order = append(order, info.Name)
		}
		byTopic[info.Name] = append(byTopic[info.Name], command.ShareAck{Queue: info.Name, Partition: strconv.Itoa(int(p.partition)),
			Holder: k.member, Kind: command.ShareRelease, Rest: true})
	}
	for _, name := range order {
		if _, err := s.topic(name).ShareAck(k.group, byTopic[name]); err != nil {
			s.log.Debug("kafka: releasing a closed share session's records", "group", k.group, "member", k.member, "topic", name, "err", err)
		}
	}
}
