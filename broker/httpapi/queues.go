package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/waggle-mq/waggle/broker"
)

type configureRequest struct {
	Queue   string           `json:"queue"`
	Options configureOptions `json:"options"`
}

// configureOptions lists every option the API takes; decodeBody refuses any
// other, so a misspelt option is an error rather than a silent no-op.
type configureOptions struct {
	DedupWindowSeconds *int64 `json:"dedupWindowSeconds"`
}

type queueJSON struct {
	Name       string          `json:"name"`
	Options    queueOptionJSON `json:"options"`
	CreatedAt  time.Time       `json:"createdAt"`
	Partitions []partitionJSON `json:"partitions"`
}

type queueOptionJSON struct {
	DedupWindowSeconds int64 `json:"dedupWindowSeconds"`
}

type partitionJSON struct {
	Name        string `json:"name"`
	StartOffset uint64 `json:"startOffset"`
	NextOffset  uint64 `json:"nextOffset"`
	Messages    uint64 `json:"messages"`
}

func toQueueJSON(q broker.QueueInfo) queueJSON {
	out := queueJSON{
		Name:       q.Name,
		Options:    queueOptionJSON{DedupWindowSeconds: q.DedupWindowSeconds},
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
	if !decodeBody(w, r, &req) {
		return
	}
	q, err := s.svc.Configure(req.Queue, broker.QueueOptions{DedupWindowSeconds: req.Options.DedupWindowSeconds})
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toQueueJSON(q))
}

func (s *Server) listQueues(w http.ResponseWriter, r *http.Request) {
	qs, err := s.svc.Queues()
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

func (s *Server) getQueue(w http.ResponseWriter, r *http.Request) {
	q, err := s.svc.Queue(r.PathValue("queue"))
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toQueueJSON(q))
}

type healthJSON struct {
	Status string      `json:"status"`
	NodeID json.Number `json:"nodeId"`
	Raft   raftJSON    `json:"raft"`
}

// Node ids are numbers; leader is null while none is known.
type raftJSON struct {
	Role       string       `json:"role"`
	Leader     *json.Number `json:"leader"`
	LeaderAddr string       `json:"leaderAddr"`
	Term       uint64       `json:"term"`
	Commit     uint64       `json:"commit"`
	Applied    uint64       `json:"applied"`
}

// health answers 200 while this node knows a leader, 503 otherwise, so a
// load balancer stops sending to a node cut off from the cluster.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	h := s.svc.Health()
	out := healthJSON{
		Status: "healthy",
		NodeID: json.Number(h.NodeID),
		Raft:   raftJSON{Role: h.Role, LeaderAddr: h.LeaderAddr, Term: h.Term, Commit: h.Commit, Applied: h.Applied},
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
