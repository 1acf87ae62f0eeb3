package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
)

type pushRequest struct {
	Items []pushItem `json:"items"`
}

type pushItem struct {
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	TransactionID string          `json:"transactionId"`
	Payload       json.RawMessage `json:"payload"`
}

// pushAnswer keeps message_id and transaction_id in snake case, as Queen's
// clients expect. message_id and offset are null for an item in error.
type pushAnswer struct {
	Index         int     `json:"index"`
	MessageID     *string `json:"message_id"`
	TransactionID string  `json:"transaction_id"`
	QueueName     string  `json:"queueName"`
	Partition     string  `json:"partition"`
	Status        string  `json:"status"`
	Offset        *uint64 `json:"offset"`
	Error         string  `json:"error,omitempty"`
}

func (s *Server) push(w http.ResponseWriter, r *http.Request) {
	req, ok := predecoded[pushRequest](r)
	if !ok {
		req = new(pushRequest)
		if !decodeBody(w, r, req) {
			return
		}
	}
	items := make([]broker.PushItem, len(req.Items))
	for i, it := range req.Items {
		if !s.allow(w, r, auth.Write, auth.Queue, it.Queue) {
			return
		}
		items[i] = broker.PushItem{Queue: it.Queue, Partition: it.Partition, TransactionID: it.TransactionID, Payload: it.Payload}
	}
	results, err := s.b(r).Push(r.Context(), items)
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	out := make([]pushAnswer, len(results))
	counts := map[string]int{}
	for i, res := range results {
		out[i] = toPushAnswer(res)
		counts[res.Status]++
	}
	for _, st := range []string{broker.StatusQueued, broker.StatusDuplicate, broker.StatusError} {
		s.metrics.PushOutcome(st, counts[st])
	}
	writeJSON(w, http.StatusCreated, out)
}

func toPushAnswer(res broker.PushResult) pushAnswer {
	out := pushAnswer{
		Index:         res.Index,
		TransactionID: res.TransactionID,
		QueueName:     res.Queue,
		Partition:     res.Partition,
		Status:        res.Status,
		Error:         res.Error,
	}
	if res.Status != broker.StatusError {
		out.MessageID = &res.MessageID
		out.Offset = &res.Offset
	}
	return out
}

type fetchRequest struct {
	Entries []fetchEntry `json:"entries"`
}

type fetchEntry struct {
	Queue     string `json:"queue"`
	Partition string `json:"partition"`
	Offset    uint64 `json:"offset"`
	MaxBytes  int    `json:"maxBytes"`
}

type fetchAnswer struct {
	Entries []fetchAnswerEntry `json:"entries"`
}

type fetchAnswerEntry struct {
	Queue         string        `json:"queue"`
	Partition     string        `json:"partition"`
	Records       []fetchRecord `json:"records"`
	HighWatermark uint64        `json:"highWatermark"`
	Error         string        `json:"error,omitempty"`
}

// fetchRecord is one record. A record produced over Kafka also carries its
// key and headers (bytes as base64); its payload is the value when that is
// a JSON document, else an envelope {"key","value"} with both in base64.
type fetchRecord struct {
	Offset        uint64          `json:"offset"`
	MessageID     string          `json:"messageId"`
	TransactionID string          `json:"transactionId"`
	Payload       json.RawMessage `json:"payload"`
	Timestamp     int64           `json:"ts"` // Unix milliseconds
	Key           []byte          `json:"key,omitempty"`
	Headers       []headerJSON    `json:"headers,omitempty"`
}

type headerJSON struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

type kafkaEnvelope struct {
	Key   []byte `json:"key"`
	Value []byte `json:"value"`
}

func toFetchRecord(rec broker.Record) fetchRecord {
	out := fetchRecord{
		Offset:        rec.Offset,
		MessageID:     rec.MessageID,
		TransactionID: rec.TransactionID,
		Payload:       rec.Payload,
		Timestamp:     rec.TimestampMs,
	}
	if !rec.FromKafka {
		return out
	}
	out.Key = rec.Key
	for _, h := range rec.Headers {
		out.Headers = append(out.Headers, headerJSON{Key: h.Key, Value: h.Value})
	}
	if len(rec.Payload) == 0 || !json.Valid(rec.Payload) {
		env, _ := json.Marshal(kafkaEnvelope{Key: rec.Key, Value: rec.Payload})
		out.Payload = env
	}
	return out
}

func (s *Server) fetch(w http.ResponseWriter, r *http.Request) {
	var req fetchRequest
	if !decodeBody(w, r, &req) {
		return
	}
	reqs := make([]broker.FetchRequest, len(req.Entries))
	for i, e := range req.Entries {
		if !s.allow(w, r, auth.Read, auth.Queue, e.Queue) {
			return
		}
		reqs[i] = broker.FetchRequest{Queue: e.Queue, Partition: e.Partition, Offset: e.Offset, MaxBytes: e.MaxBytes}
	}
	results, err := s.b(r).Fetch(reqs)
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	out := fetchAnswer{Entries: make([]fetchAnswerEntry, len(results))}
	for i, res := range results {
		e := fetchAnswerEntry{
			Queue:         res.Queue,
			Partition:     res.Partition,
			Records:       make([]fetchRecord, len(res.Records)),
			HighWatermark: res.HighWatermark,
			Error:         res.Error,
		}
		for j, rec := range res.Records {
			e.Records[j] = toFetchRecord(rec)
		}
		out.Entries[i] = e
	}
	writeJSON(w, http.StatusOK, out)
}
