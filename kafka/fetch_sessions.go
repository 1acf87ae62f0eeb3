package kafka

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch sessions (KIP-227). A consumer of many partitions names them all
// in the first Fetch of a session; later fetches name only the partitions
// whose position changed (and those to forget), and the answer carries
// only the partitions with news: records, an error, or a moved high
// watermark, last stable offset or log start. The sessions live in the
// node's memory; a client whose session is gone (a restart, a leader
// change, eviction) is told FETCH_SESSION_ID_NOT_FOUND and starts anew.

// Bounds of the session cache: at most maxFetchSessions sessions (Kafka's
// max.incremental.fetch.session.cache.slots default), the least recently
// used evicted for a new one, and at most maxSessionPartitions partitions
// over all of them; a session that would pass it is not kept (its client
// fetches without one, naming every partition each time).
const (
	maxFetchSessions     = 1000
	maxSessionPartitions = 200_000
)

// sessionKey names a partition in a session: by topic name below Fetch
// v13, by topic id from it.
type sessionKey struct {
	topic     string
	topicID   [16]byte
	partition int32
}

// sessionPartition is one partition of a session: where the client reads
// and what it was last told.
type sessionPartition struct {
	key  sessionKey
	req  kmsg.FetchRequestTopicPartition
	sent bool
	// The client's view as of the last answer that carried the partition.
	highWatermark, lastStable, logStart int64
	// caughtAt is an offset a read found nothing at, and appended that
	// read's append signal: until it fires, a fetch from caughtAt has no
	// news. (A log start moved by retention or DeleteRecords is reported
	// with the partition's next news.)
	caughtAt int64
	appended <-chan struct{}
}

// fetchSession is one client's session.
type fetchSession struct {
	id    int32
	epoch int32 // the epoch the next incremental fetch must carry
	parts []*sessionPartition
	index map[sessionKey]int
	used  time.Time
}

// fetchSessions is the node's session cache.
type fetchSessions struct {
	mu         sync.Mutex
	byID       map[int32]*fetchSession
	partitions int // over all sessions
}

func newFetchSessions() *fetchSessions { return &fetchSessions{byID: map[int32]*fetchSession{}} }

func keyOf(version int16, topic string, topicID [16]byte, partition int32) sessionKey {
	if version >= 13 {
		return sessionKey{topicID: topicID, partition: partition}
	}
	return sessionKey{topic: topic, partition: partition}
}

// resolve applies a Fetch's session fields (v7+). It returns the session
// the answer belongs to (nil: answer in full, without one) and the
// partitions to read (the session's, or the request's), or the error code
// that answers the whole request.
func (fs *fetchSessions) resolve(req *kmsg.FetchRequest, now time.Time) (*fetchSession, *kmsg.FetchRequest, int16) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	switch {
	case req.SessionEpoch == -1: // the client closes its session, or keeps none
		fs.drop(req.SessionID)
		return nil, req, 0
	case req.SessionEpoch == 0: // a new session, in full
		fs.drop(req.SessionID)
		if s := fs.create(req, now); s != nil {
			return s, req, 0
		}
		return nil, req, 0
	}
	s := fs.byID[req.SessionID]
	switch {
	case s == nil:
		return nil, nil, kerr.FetchSessionIDNotFound.Code
	case req.SessionEpoch != s.epoch:
		return nil, nil, kerr.InvalidFetchSessionEpoch.Code
	}
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			s.forget(keyOf(req.Version, ft.Topic, ft.TopicID, p))
		}
	}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			s.put(keyOf(req.Version, rt.Topic, rt.TopicID, rp.Partition), rp)
		}
	}
	fs.recount()
	if fs.partitions > maxSessionPartitions {
		fs.drop(s.id)
		return nil, nil, kerr.FetchSessionIDNotFound.Code // the client starts over, and gets no session
	}
	s.epoch = nextSessionEpoch(s.epoch)
	s.used = now
	return s, s.request(req), 0
}

// create makes a session of the request's partitions, evicting the least
// recently used one when the cache is full; nil when it would hold too
// many partitions.
func (fs *fetchSessions) create(req *kmsg.FetchRequest, now time.Time) *fetchSession {
	s := &fetchSession{epoch: 1, index: map[sessionKey]int{}, used: now}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			s.put(keyOf(req.Version, rt.Topic, rt.TopicID, rp.Partition), rp)
		}
	}
	if fs.partitions+len(s.parts) > maxSessionPartitions {
		return nil
	}
	if len(fs.byID) >= maxFetchSessions {
		var oldest *fetchSession
		for _, o := range fs.byID {
			if oldest == nil || o.used.Before(oldest.used) {
				oldest = o
			}
		}
		fs.drop(oldest.id)
	}
	for s.id == 0 || fs.byID[s.id] != nil {
		s.id = rand.Int32N(math.MaxInt32) + 1
	}
	fs.byID[s.id] = s
	fs.partitions += len(s.parts)
	return s
}

func (fs *fetchSessions) drop(id int32) {
	if s := fs.byID[id]; s != nil {
		fs.partitions -= len(s.parts)
		delete(fs.byID, id)
	}
}

func (fs *fetchSessions) recount() {
	fs.partitions = 0
	for _, s := range fs.byID {
		fs.partitions += len(s.parts)
	}
}

// nextSessionEpoch follows epoch; epochs wrap to 1 (0 and -1 are the
// requests that open and close sessions).
func nextSessionEpoch(epoch int32) int32 {
	if epoch == math.MaxInt32 {
		return 1
	}
	return epoch + 1
}

func (s *fetchSession) put(k sessionKey, rp kmsg.FetchRequestTopicPartition) {
	if i, ok := s.index[k]; ok {
		s.parts[i].req = rp
		return
	}
	s.index[k] = len(s.parts)
	s.parts = append(s.parts, &sessionPartition{key: k, req: rp})
}

func (s *fetchSession) forget(k sessionKey) {
	i, ok := s.index[k]
	if !ok {
		return
	}
	s.parts = append(s.parts[:i], s.parts[i+1:]...)
	delete(s.index, k)
	for j := i; j < len(s.parts); j++ {
		s.index[s.parts[j].key] = j
	}
}

// request is the session's whole partition list as a Fetch request, for
// reading; the original request's other fields are kept.
func (s *fetchSession) request(req *kmsg.FetchRequest) *kmsg.FetchRequest {
	full := *req
	full.Topics = nil
	index := map[sessionKey]int{} // a topic's place in full.Topics (partition 0 in the key)
	for _, p := range s.parts {
		topic := sessionKey{topic: p.key.topic, topicID: p.key.topicID}
		i, ok := index[topic]
		if !ok {
			i = len(full.Topics)
			index[topic] = i
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = p.key.topic, p.key.topicID
			full.Topics = append(full.Topics, t)
		}
		full.Topics[i].Partitions = append(full.Topics[i].Partitions, p.req)
	}
	return &full
}

// answer keeps the partitions of a full answer that the client has not
// heard of: all of them for the session's first fetch, else those with
// records, an error or moved offsets; and records what it was told.
func (s *fetchSession) answer(fs *fetchSessions, resp *kmsg.FetchResponse, version int16, incremental bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	resp.SessionID = s.id
	var topics []kmsg.FetchResponseTopic
	for _, t := range resp.Topics {
		kept := t.Partitions[:0]
		for _, p := range t.Partitions {
			i, ok := s.index[keyOf(version, t.Topic, t.TopicID, p.Partition)]
			if !ok {
				continue // forgotten meanwhile
			}
			sp := s.parts[i]
			news := !sp.sent || len(p.RecordBatches) > 0 || p.ErrorCode != 0 ||
				p.HighWatermark != sp.highWatermark || p.LastStableOffset != sp.lastStable || p.LogStartOffset != sp.logStart
			if incremental && !news {
				continue
			}
			sp.sent, sp.highWatermark, sp.lastStable, sp.logStart = true, p.HighWatermark, p.LastStableOffset, p.LogStartOffset
			kept = append(kept, p)
		}
		if len(kept) > 0 {
			t.Partitions = kept
			topics = append(topics, t)
		}
	}
	resp.Topics = topics
}

// unchanged reports whether the session knows partition k to have nothing
// at offset, and no append since; it returns the append signal to wait
// on. A nil session knows nothing.
func (s *fetchSession) unchanged(fs *fetchSessions, k sessionKey, offset int64) (<-chan struct{}, bool) {
	if s == nil {
		return nil, false
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	i, ok := s.index[k]
	if !ok {
		return nil, false
	}
	sp := s.parts[i]
	if !sp.sent || sp.appended == nil || sp.caughtAt != offset {
		return nil, false
	}
	select {
	case <-sp.appended:
		return nil, false
	default:
		return sp.appended, true
	}
}

// caughtUp records that a read of partition k found nothing at offset.
func (s *fetchSession) caughtUp(fs *fetchSessions, k sessionKey, offset int64, appended <-chan struct{}) {
	if s == nil {
		return
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if i, ok := s.index[k]; ok {
		s.parts[i].caughtAt, s.parts[i].appended = offset, appended
	}
}
