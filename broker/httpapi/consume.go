package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
)

type poppedJSON struct {
	ID              string          `json:"id"`
	TransactionID   string          `json:"transactionId"`
	Partition       string          `json:"partition"`
	PartitionID     string          `json:"partitionId"`
	Offset          uint64          `json:"offset"`
	Data            json.RawMessage `json:"data"`
	CreatedAt       time.Time       `json:"createdAt"`
	LeaseID         string          `json:"leaseId"`
	ConsumerGroup   string          `json:"consumerGroup"`
	DeliveryAttempt int32           `json:"deliveryAttempt"`
}

// pop leases messages: 200 with them, or 204 with no body when none became
// available in time.
func (s *Server) pop(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := broker.PopRequest{Queue: r.PathValue("queue"), Partition: r.PathValue("partition"), Group: q.Get("consumerGroup")}
	if !s.allowGroup(w, r, req.Group) {
		return
	}
	var err error
	if req.Batch, err = intParam(q.Get("batch"), 0); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "batch: "+err.Error())
		return
	}
	lease, err := intParam(q.Get("leaseSeconds"), 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "leaseSeconds: "+err.Error())
		return
	}
	req.LeaseSeconds = int64(lease)
	if q.Get("wait") == "true" {
		ms, err := intParam(q.Get("timeout"), 30_000)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", "timeout: "+err.Error())
			return
		}
		req.Wait = time.Duration(ms) * time.Millisecond
	}
	switch q.Get("subscriptionMode") {
	case "", "all":
	case "new":
		req.FromNew = true
	default:
		writeError(w, http.StatusBadRequest, "invalid_request", "subscriptionMode must be all or new")
		return
	}
	msgs, err := s.b(r).Pop(r.Context(), req)
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	if len(msgs) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	out := struct {
		Messages []poppedJSON `json:"messages"`
		LeaseID  string       `json:"leaseId"`
	}{LeaseID: msgs[0].LeaseID}
	for _, m := range msgs {
		data := toFetchRecord(m.Record).Payload
		id := m.MessageID
		if id == "" {
			id = m.TransactionID
		}
		out.Messages = append(out.Messages, poppedJSON{
			ID: id, TransactionID: m.TransactionID, Partition: m.Partition, PartitionID: m.PartitionID,
			Offset: m.Offset, Data: data, CreatedAt: time.UnixMilli(m.TimestampMs).UTC(),
			LeaseID: m.LeaseID, ConsumerGroup: m.Group, DeliveryAttempt: m.DeliveryAttempt,
		})
	}
	writeJSON(w, http.StatusOK, out)
}

// intParam parses a non-negative integer query parameter.
func intParam(v string, def int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a non-negative whole number", v)
	}
	return n, nil
}

type ackJSON struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	LeaseID       string `json:"leaseId"`
	ConsumerGroup string `json:"consumerGroup"`
	Status        string `json:"status"`
	Error         string `json:"error"`
}

type ackResultJSON struct {
	Index         int    `json:"index"`
	TransactionID string `json:"transactionId"`
	Success       bool   `json:"success"`
	Error         string `json:"error,omitempty"`
	LeaseReleased bool   `json:"leaseReleased"`
	DLQ           bool   `json:"dlq"`
}

func (s *Server) ack(w http.ResponseWriter, r *http.Request) {
	var req ackJSON
	if !decodeBody(w, r, &req) {
		return
	}
	s.answerAcks(w, r, req.ConsumerGroup, []ackJSON{req})
}

func (s *Server) ackBatch(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Acknowledgments []ackJSON `json:"acknowledgments"`
		ConsumerGroup   string    `json:"consumerGroup"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	s.answerAcks(w, r, req.ConsumerGroup, req.Acknowledgments)
}

// answerAcks applies acks of one group: an item naming another group is
// refused on its own.
func (s *Server) answerAcks(w http.ResponseWriter, r *http.Request, group string, acks []ackJSON) {
	if group == "" && len(acks) > 0 {
		group = acks[0].ConsumerGroup
	}
	if !s.allowGroup(w, r, group) {
		return
	}
	if queueMode(group) { // no group to check: each lease's queue is
		for _, a := range acks {
			if !s.allowLease(w, r, a.LeaseID) {
				return
			}
		}
	}
	reqs := make([]broker.AckRequest, len(acks))
	for i, a := range acks {
		reqs[i] = broker.AckRequest{TransactionID: a.TransactionID, PartitionID: a.PartitionID, LeaseID: a.LeaseID, Status: a.Status, Error: a.Error}
		if a.ConsumerGroup != "" && a.ConsumerGroup != group {
			reqs[i].PartitionID = "" // refused below, as an item error
		}
	}
	results, err := s.b(r).Ack(r.Context(), group, reqs)
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	out := make([]ackResultJSON, len(results))
	for i, res := range results {
		out[i] = ackResultJSON{Index: i, TransactionID: acks[i].TransactionID, Success: res.Success, Error: res.Error,
			LeaseReleased: res.LeaseReleased, DLQ: res.DeadLettered}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) extendLease(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Seconds int64 `json:"seconds"`
	}
	if !decodeBody(w, r, &req) || !s.allowLease(w, r, r.PathValue("leaseId")) {
		return
	}
	res, err := s.b(r).ExtendLease(r.PathValue("leaseId"), req.Seconds)
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	out := map[string]any{"leaseId": r.PathValue("leaseId"), "success": res.Success, "expiresAt": nil}
	if res.Success {
		out["expiresAt"] = time.UnixMilli(res.ExpiresAtMs).UTC()
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) seek(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ToEnd     bool   `json:"toEnd"`
		Offset    *int64 `json:"offset"`
		Timestamp *int64 `json:"timestamp"` // Unix milliseconds
	}
	if !decodeBody(w, r, &req) || !s.allow(w, r, auth.Read, auth.Queue, r.PathValue("queue")) {
		return
	}
	err := s.b(r).Seek(r.Context(), r.PathValue("group"), r.PathValue("queue"), broker.SeekRequest{ToEnd: req.ToEnd, Offset: req.Offset, TimestampMs: req.Timestamp})
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	s.getGroup(w, r)
}

func (s *Server) deleteGroup(w http.ResponseWriter, r *http.Request) {
	// A consumer group has positions in every raft group holding a
	// queue it read: each group deletes its own, and the group is unknown
	// only when no raft group knew it.
	found := false
	err := s.eachGroup(func(b groupLister) error {
		err := b.DeleteGroup(r.Context(), r.PathValue("group"))
		if errors.Is(err, broker.ErrNotFound) {
			return nil
		}
		found = found || err == nil
		return err
	})
	if err == nil && !found {
		err = fmt.Errorf("consumer group %q: %w", r.PathValue("group"), broker.ErrNotFound)
	}
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"deleted": true})
}

type deadLetterJSON struct {
	ID            string          `json:"id"`
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	ConsumerGroup string          `json:"consumerGroup"`
	Offset        int64           `json:"offset"`
	TransactionID string          `json:"transactionId"`
	Data          json.RawMessage `json:"data"`
	Error         string          `json:"error"`
	Attempts      int32           `json:"attempts"`
	FailedAt      time.Time       `json:"failedAt"`
	// ReplayedAt and ReplayedAs are set once the dead letter was replayed.
	ReplayedAt *time.Time      `json:"replayedAt,omitempty"`
	ReplayedAs *replayedAsJSON `json:"replayedAs,omitempty"`
}

// replayedAsJSON names the copy a replay pushed.
type replayedAsJSON struct {
	MessageID string `json:"messageId"`
	Offset    uint64 `json:"offset"`
}

// maxDeadLetters is the most dead letters a list answers (what one raft
// group's list holds at most).
const maxDeadLetters = 10_000

func (s *Server) listDeadLetters(w http.ResponseWriter, r *http.Request) {
	// A queue's dead letters are in its group; without one, every group's.
	queue := r.URL.Query().Get("queue")
	dls, err := s.b(r).DeadLetters(queue)
	if queue == "" {
		dls, err = gather(s, func(b groupLister) ([]broker.DeadLetter, error) { return b.DeadLetters("") })
		dls = dls[:min(len(dls), maxDeadLetters)] // as one group lists at most
	}
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	out := struct {
		Messages []deadLetterJSON `json:"messages"`
	}{Messages: []deadLetterJSON{}}
	for _, d := range dls {
		data := json.RawMessage(d.Payload)
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		dj := deadLetterJSON{ID: strconv.FormatUint(d.ID, 10), Queue: d.Queue, Partition: d.Partition,
			ConsumerGroup: d.Group, Offset: d.Offset, TransactionID: d.TransactionID, Data: data, Error: d.Error,
			Attempts: d.Attempts, FailedAt: time.UnixMilli(d.AtMs).UTC()}
		if rp := d.Replayed; rp != nil {
			at := time.UnixMilli(rp.AtMs).UTC()
			dj.ReplayedAt, dj.ReplayedAs = &at, &replayedAsJSON{MessageID: uuid.UUID(rp.MessageID).String(), Offset: rp.Offset}
		}
		out.Messages = append(out.Messages, dj)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) replayDeadLetter(w http.ResponseWriter, r *http.Request) {
	if !s.allowDeadLetter(w, r, r.PathValue("id")) {
		return
	}
	res, err := s.b(r).ReplayDeadLetter(r.PathValue("id"))
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toPushAnswer(res))
}

func (s *Server) deleteDeadLetter(w http.ResponseWriter, r *http.Request) {
	if !s.allowDeadLetter(w, r, r.PathValue("id")) {
		return
	}
	if err := s.b(r).DeleteDeadLetter(r.PathValue("id")); err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": 1})
}

// purgeDeadLetters deletes the dead letters of ?queue=, or all of them
// (which needs the right to manage the cluster) when it is absent.
func (s *Server) purgeDeadLetters(w http.ResponseWriter, r *http.Request) {
	queue := r.URL.Query().Get("queue")
	if queue == "" && !s.allow(w, r, auth.Manage, auth.Cluster, "") {
		return
	}
	if queue != "" && !s.allow(w, r, auth.Write, auth.Queue, queue) {
		return
	}
	n := 0
	purge := func(b groupLister) error {
		deleted, err := b.PurgeDeadLetters(queue)
		n += deleted
		return err
	}
	var err error
	if queue != "" {
		err = purge(s.b(r))
	} else {
		err = s.eachGroup(purge)
	}
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": n})
}

// allowLease checks the group and queue of a lease against the request's
// principal (an unknown lease is left to the broker to refuse).
func (s *Server) allowLease(w http.ResponseWriter, r *http.Request, leaseID string) bool {
	if !s.auth.Enabled {
		return true
	}
	group, queue, found, err := s.b(r).LeaseOwner(leaseID)
	if err != nil {
		s.writeBrokerError(w, err)
		return false
	}
	return !found || (s.allowGroup(w, r, group) && s.allow(w, r, auth.Read, auth.Queue, queue))
}

// queueMode reports whether group names no consumer group: a pop, ack or
// lease of the queue itself (broker.DefaultGroup).
func queueMode(group string) bool { return group == "" || group == broker.DefaultGroup }

// allowGroup checks a consumer group against the request's principal. In
// queue mode there is no group anyone is scoped to, so the queue's
// permission alone decides (a group-scoped principal could lease messages
// in queue mode and then never ack or extend them).
func (s *Server) allowGroup(w http.ResponseWriter, r *http.Request, group string) bool {
	return queueMode(group) || s.allow(w, r, auth.Read, auth.Group, group)
}

// allowDeadLetter checks the queue a dead letter would be replayed into
// against the request's principal (an unknown id is left to the replay to
// refuse).
func (s *Server) allowDeadLetter(w http.ResponseWriter, r *http.Request, id string) bool {
	if !s.auth.Enabled {
		return true
	}
	d, err := s.b(r).DeadLetter(id)
	return err != nil || s.allow(w, r, auth.Write, auth.Queue, d.Queue)
}
