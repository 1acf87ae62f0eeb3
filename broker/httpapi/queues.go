package httpapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
)

type configureRequest struct {
	Queue   string           `json:"queue"`
	Options configureOptions `json:"options"`
}

// configureOptions lists every option the API takes; decodeBody refuses any
// other, so a misspelt option is an error rather than a silent no-op.
type configureOptions struct {
	DedupWindowSeconds       *int64 `json:"dedupWindowSeconds"`
	LeaseTimeSeconds         *int64 `json:"leaseTime"`
	RetryLimit               *int32 `json:"retryLimit"`
	DeadLetterQueue          *bool  `json:"deadLetterQueue"`
	DelayedProcessingSeconds *int64 `json:"delayedProcessing"`
	Partitions               *int32 `json:"partitions"` // Kafka partitions; only grows
	RetentionSeconds         *int64 `json:"retentionSeconds"`
	CompletedRetention       *int64 `json:"completedRetentionSeconds"`
}

type queueJSON struct {
	Name       string          `json:"name"`
	Options    queueOptionJSON `json:"options"`
	CreatedAt  time.Time       `json:"createdAt"`
	Partitions []partitionJSON `json:"partitions"`
}

type queueOptionJSON struct {
	DedupWindowSeconds int64 `json:"dedupWindowSeconds"`
	LeaseTime          int64 `json:"leaseTime"`
	RetryLimit         int32 `json:"retryLimit"`
	DeadLetterQueue    bool  `json:"deadLetterQueue"`
	DelayedProcessing  int64 `json:"delayedProcessing"`
	Partitions         int32 `json:"partitions"` // Kafka partitions
	RetentionSeconds   int64 `json:"retentionSeconds"`
	CompletedRetention int64 `json:"completedRetentionSeconds"`
}

type partitionJSON struct {
	Name        string `json:"name"`
	StartOffset uint64 `json:"startOffset"`
	NextOffset  uint64 `json:"nextOffset"`
	Messages    uint64 `json:"messages"`
}

func toQueueJSON(q broker.QueueInfo) queueJSON {
	out := queueJSON{
		Name: q.Name,
		Options: queueOptionJSON{DedupWindowSeconds: q.DedupWindowSeconds, LeaseTime: q.LeaseTimeSeconds,
			RetryLimit: q.RetryLimit, DeadLetterQueue: q.DeadLetterQueue, DelayedProcessing: q.DelayedProcessing,
			Partitions: q.KafkaPartitions, RetentionSeconds: q.RetentionSeconds, CompletedRetention: q.CompletedRetentionSeconds},
		CreatedAt:  q.CreatedAt,
		Partitions: make([]partitionJSON, len(q.Partitions)),
	}
	for i, p := range q.Partitions {
		out.Partitions[i] = partitionJSON{Name: p.Name, StartOffset: p.StartOffset, NextOffset: p.NextOffset, Messages: p.NextOffset - p.StartOffset}
	}
	return out
}

func (s *Server) configure(w http.ResponseWriter, r *http.Request) {
	var req configureRequest
	if !decodeBody(w, r, &req) || !s.allow(w, r, auth.Manage, auth.Queue, req.Queue) {
		return
	}
	o := req.Options
	q, err := s.b(r).Configure(r.Context(), req.Queue, command.QueueOptions{DedupWindowSeconds: o.DedupWindowSeconds, LeaseTimeSeconds: o.LeaseTimeSeconds,
		RetryLimit: o.RetryLimit, DeadLetterQueue: o.DeadLetterQueue, DelayedProcessingSeconds: o.DelayedProcessingSeconds,
		KafkaPartitions: o.Partitions, RetentionSeconds: o.RetentionSeconds, CompletedRetentionSeconds: o.CompletedRetention})
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toQueueJSON(q))
}

func (s *Server) listQueues(w http.ResponseWriter, r *http.Request) {
	qs, err := gather(s, groupLister.Queues)
	slices.SortFunc(qs, func(a, b broker.QueueInfo) int { return strings.Compare(a.Name, b.Name) })
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	out := struct {
		Queues []queueJSON `json:"queues"`
	}{Queues: make([]queueJSON, len(qs))}
	for i, q := range qs {
		out.Queues[i] = toQueueJSON(q)
	}
	writeJSON(w, http.StatusOK, out)
}

// getQueue describes a queue. A node that does not know it catches up with
// the leader first (broker.Service.CatchUp, bounded): a client that just
// created the queue through another node, or through this one whose
// forwarded push it has not applied yet, is not told it does not exist.
func (s *Server) getQueue(w http.ResponseWriter, r *http.Request) {
	b, name := s.b(r), r.PathValue("queue")
	q, err := b.Queue(name)
	if errors.Is(err, broker.ErrNotFound) {
		ctx, cancel := context.WithTimeout(r.Context(), broker.CatchUpWait)
		defer cancel()
		if b.CatchUp(ctx) == nil {
			q, err = b.Queue(name)
		}
	}
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toQueueJSON(q))
}

func (s *Server) deleteQueue(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	outcome, err := s.b(r).DeleteTopic(r.Context(), name)
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	if outcome != command.TopicOK {
		writeError(w, http.StatusNotFound, "not_found", "no queue "+name)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"deleted": true})
}
