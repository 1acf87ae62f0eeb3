package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/fault"
)

func init() { register(kmsg.Fetch.Int16(), 4, 16, answerNow(handleFetch)) }

// readCommitted is the isolation level of a consumer that reads only
// committed transactions (KIP-98); 0 is read_uncommitted.
const readCommitted = 1

// skipPartition marks a partition fetchOnce leaves out of its answer.
const skipPartition = -1

// maxFetchWait bounds a long-poll whatever the client asks.
const maxFetchWait = 30 * time.Second

// handleFetch reads every requested partition from the local store. When
// fewer than MinBytes are available it waits, up to MaxWaitMillis, for an
// append to any of the partitions (a signal from the state machine, not a
// sleep loop), then reads once more.
//
// From v7 a client may keep a fetch session (KIP-227, fetch_sessions.go):
// the read covers the session's partitions and the answer only those with
// news.
func handleFetch(c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FetchRequest)
	read, session := req, (*fetchSession)(nil)
	if req.Version >= 7 {
		var code int16
		if session, read, code = c.s.sessions.resolve(req, time.Now()); code != 0 {
			resp := req.ResponseKind().(*kmsg.FetchResponse)
			resp.ErrorCode = code
			return resp, nil
		}
	}
	var byID map[[16]byte]broker.TopicInfo
	if req.Version >= 13 {
		byID = map[[16]byte]broker.TopicInfo{}
		for _, rt := range read.Topics {
			t, found, err := c.topicByID(rt.TopicID)
			if err != nil {
				return nil, err
			}
			if found {
				byID[rt.TopicID] = t
			}
		}
	}
	wait := min(time.Duration(req.MaxWaitMillis)*time.Millisecond, maxFetchWait)
	deadline := time.Now().Add(wait)
	for {
		resp, size, signals := c.fetchOnce(read, byID, session)
		remaining := time.Until(deadline)
		if size >= int(req.MinBytes) || remaining <= 0 || len(signals) == 0 || !waitAny(c, signals, remaining) {
			if session != nil {
				session.answer(c.s.sessions, resp, req.Version, req.SessionEpoch > 0)
			}
			c.hintFetchLeaders(resp, func(t kmsg.FetchResponseTopic) string {
				if req.Version >= 13 {
					return byID[t.TopicID].Name
				}
				return t.Topic
			})
			return resp, nil // enough, or timed out: answer what there is
		}
	}
}

// waitAny waits until one of the signals fires (true), the timeout passes
// or the server closes (false), counted as a long poll meanwhile.
func waitAny(c *conn, signals []<-chan struct{}, timeout time.Duration) bool {
	defer c.s.cfg.Metrics.LongPoll("fetch")()
	woken := make(chan struct{}, 1)
	done := make(chan struct{})
	defer close(done)
	for _, sig := range signals {
		go func() {
			select {
			case <-sig:
				select {
				case woken <- struct{}{}:
				default:
				}
			case <-done:
			}
		}()
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-woken:
		return true
	case <-timer.C:
		return false
	case <-c.s.ctx.Done():
		return false
	}
}

// With a session, a partition the session knows to be caught up at the
// requested offset, with no append since, is not read again: it is left
// out of the answer (no news) and its append signal is waited on.
func (c *conn) fetchOnce(req *kmsg.FetchRequest, byID map[[16]byte]broker.TopicInfo, session *fetchSession) (*kmsg.FetchResponse, int, []<-chan struct{}) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	budget := int(req.MaxBytes)
	if req.Version < 3 || budget <= 0 {
		budget = 50 << 20
	}
	size := 0
	var signals []<-chan struct{}
	for _, rt := range req.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		name := rt.Topic
		known := true
		if req.Version >= 13 {
			info, ok := byID[rt.TopicID]
			name, known = info.Name, ok
		}
		tb := c.s.topic(name) // the topic's raft group
		leader := tb.IsLeader()
		epoch := tb.LeaderEpoch() // one atomic load (raft's term)
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = rp.Partition
			p.RecordBatches = []byte{} // empty, not null: librdkafka rejects a null set
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
			switch {
			case !known:
				p.ErrorCode = kerr.UnknownTopicID.Code
			case c.topicDenied(auth.Read, name) != 0:
				p.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case req.Version >= 9 && leaderEpochCode(rp.CurrentLeaderEpoch, epoch) != 0:
				// KIP-320: Kafka checks the epoch before the leadership.
				p.ErrorCode = leaderEpochCode(rp.CurrentLeaderEpoch, epoch)
			case !leader:
				p.ErrorCode = kerr.NotLeaderForPartition.Code
			case isInternalTopic(name):
				if emptyFetch(&p, rp); p.ErrorCode == 0 {
					signals = append(signals, never)
				}
			default:
				key := keyOf(req.Version, rt.Topic, rt.TopicID, rp.Partition)
				if sig, ok := session.unchanged(c.s.sessions, key, rp.FetchOffset); ok {
					signals, p.Partition = append(signals, sig), skipPartition
					break
				}
				limit := min(int(rp.PartitionMaxBytes), max(budget-size, 0))
				committedOnly := req.IsolationLevel == readCommitted && !fault.Is("fetch-uncommitted", 1)
				log, err := tb.ReadPartition(name, rp.Partition, rp.FetchOffset, max(limit, 1), committedOnly)
				if err != nil {
					p.ErrorCode = errCode(err)
					break
				}
				if p.ErrorCode = outcomeCode(log.Outcome); p.ErrorCode != 0 {
					break
				}
				p.HighWatermark, p.LastStableOffset, p.LogStartOffset = log.HighWatermark, log.LastStable, log.LogStart
				for _, a := range log.Aborted {
					at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					at.ProducerID, at.FirstOffset = a.ProducerID, int64(a.FirstOffset)
					p.AbortedTransactions = append(p.AbortedTransactions, at)
				}
				if rp.FetchOffset > log.HighWatermark && !tb.LeaderCaughtUp() {
					p.ErrorCode = kerr.OffsetNotAvailable.Code // retriable: a new leader still applying
					break
				}
				if rp.FetchOffset < log.LogStart || rp.FetchOffset > log.HighWatermark {
					p.ErrorCode = kerr.OffsetOutOfRange.Code
					break
				}
				// Past the budget only the first batch of the response is
				// sent (so a batch larger than maxBytes still makes progress).
				if limit <= 0 && size > 0 {
					break
				}
				for i, b := range log.Batches {
					if i == 0 && len(log.Batches) > 1 && fault.Is("fetch-skip-batch", 40) {
						continue
					}
					p.RecordBatches = append(p.RecordBatches, b...)
				}
				size += len(p.RecordBatches)
				if len(log.Batches) == 0 {
					signals = append(signals, log.Appended)
					session.caughtUp(c.s.sessions, key, rp.FetchOffset, log.Appended)
				}
			}
			if p.Partition != skipPartition {
				t.Partitions = append(t.Partitions, p)
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, size, signals
}
