package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"time"

	"github.com/waggle-mq/waggle/command"
)

// kvOpJSON is a KV operation as the API spells it.
type kvOpJSON struct {
	Op         string          `json:"op"`
	NS         string          `json:"ns"`
	Key        string          `json:"key"`
	Keys       []string        `json:"keys"`
	Prefix     string          `json:"prefix"`
	After      string          `json:"after"`
	Limit      int             `json:"limit"`
	Value      json.RawMessage `json:"value"`
	TTLSeconds int64           `json:"ttlSeconds"`
	Forever    bool            `json:"forever"`
	Expect     *int64          `json:"expect"`
	Max        *int64          `json:"max"`
	Required   bool            `json:"required"`
}

func (o kvOpJSON) op() command.KVOp {
	return command.KVOp{Op: o.Op, NS: o.NS, Key: o.Key, Keys: o.Keys, Prefix: o.Prefix, After: o.After, Limit: o.Limit,
		Value: o.Value, TTLSeconds: o.TTLSeconds, Forever: o.Forever, Expect: o.Expect, Max: o.Max, Required: o.Required}
}

func kvOps(in []kvOpJSON) []command.KVOp {
	out := make([]command.KVOp, len(in))
	for i, o := range in {
		out[i] = o.op()
	}
	return out
}

type kvResultJSON struct {
	Op        string          `json:"op"`
	Found     *bool           `json:"found,omitempty"`
	Applied   *bool           `json:"applied,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Value     json.RawMessage `json:"value,omitempty"`
	Version   int64           `json:"version"`
	ExpiresAt *time.Time      `json:"expiresAt"`
	Rows      []kvRowJSON     `json:"rows,omitempty"`
}

type kvRowJSON struct {
	Key       string          `json:"key"`
	Found     bool            `json:"found"`
	Value     json.RawMessage `json:"value,omitempty"`
	Version   int64           `json:"version"`
	ExpiresAt *time.Time      `json:"expiresAt"`
}

func expiresAt(ms int64) *time.Time {
	if ms == 0 {
		return nil // forever, or absent
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}

// toKVResult shapes a result: reads answer found, writes and checks applied.
func toKVResult(r command.KVResult) kvResultJSON {
	out := kvResultJSON{Op: r.Op, Reason: r.Reason, Value: r.Value, Version: r.Version, ExpiresAt: expiresAt(r.ExpiresAtMs)}
	switch r.Op {
	case command.KVGet:
		out.Found = ptr(r.Found)
	case command.KVGetMany, command.KVGetPrefix:
		out.Rows = []kvRowJSON{}
		for _, row := range r.Rows {
			out.Rows = append(out.Rows, kvRowJSON{Key: row.Key, Found: row.Found, Value: row.Value, Version: row.Version, ExpiresAt: expiresAt(row.ExpiresAtMs)})
		}
	default:
		out.Applied = ptr(r.Applied)
	}
	return out
}

// abortJSON is a rollback on a required KV op: why, and the row as it is.
type abortJSON struct {
	FailedIndex int             `json:"failedIndex"`
	KVReason    string          `json:"kvReason"`
	Version     int64           `json:"version"`
	Value       json.RawMessage `json:"value"`
}

func (s *Server) kv(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Operations []kvOpJSON `json:"operations"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	res, err := s.b(r).KV(r.Context(), kvOps(req.Operations))
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	if a := res.Abort; a != nil {
		writeJSON(w, http.StatusOK, struct {
			OK     bool   `json:"ok"`
			Reason string `json:"reason"`
			abortJSON
		}{false, command.RollbackKVPrecondition, abortJSON{a.FailedIndex, a.KVReason, a.Version, nullIfEmpty(a.Value)}})
		return
	}
	out := struct {
		OK      bool           `json:"ok"`
		Results []kvResultJSON `json:"results"`
	}{OK: true}
	for _, kr := range res.Results {
		out.Results = append(out.Results, toKVResult(kr))
	}
	writeJSON(w, http.StatusOK, out)
}

func nullIfEmpty(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage("null")
	}
	return v
}

func (s *Server) kvGet(w http.ResponseWriter, r *http.Request) {
	res, err := s.b(r).KVGet(r.PathValue("ns"), r.PathValue("key"))
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	if !res.Found {
		writeError(w, http.StatusNotFound, "not_found", "no such key")
		return
	}
	writeJSON(w, http.StatusOK, toKVResult(res))
}

func (s *Server) kvPut(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Value      json.RawMessage `json:"value"`
		TTLSeconds int64           `json:"ttlSeconds"`
		Forever    bool            `json:"forever"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	s.kvSingle(w, r, command.KVOp{Op: command.KVPut, NS: r.PathValue("ns"), Key: r.PathValue("key"), Value: req.Value, TTLSeconds: req.TTLSeconds, Forever: req.Forever})
}

func (s *Server) kvDelete(w http.ResponseWriter, r *http.Request) {
	s.kvSingle(w, r, command.KVOp{Op: command.KVDelete, NS: r.PathValue("ns"), Key: r.PathValue("key")})
}

func (s *Server) kvSingle(w http.ResponseWriter, r *http.Request, op command.KVOp) {
	res, err := s.b(r).KV(r.Context(), []command.KVOp{op})
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toKVResult(res.Results[0]))
}

func (s *Server) once(w http.ResponseWriter, r *http.Request) {
	var req struct {
		NS         string `json:"ns"`
		Key        string `json:"key"`
		TTLSeconds int64  `json:"ttlSeconds"`
		Forever    bool   `json:"forever"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	won, err := s.b(r).Once(r.Context(), req.NS, req.Key, req.TTLSeconds, req.Forever)
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"won": won})
}

// timerOpJSON is a timer operation; payload is base64 of a JSON document.
type timerOpJSON struct {
	Op        string `json:"op"`
	Queue     string `json:"queue"`
	TimerKey  string `json:"timerKey"`
	Partition string `json:"partition"`
	DelayMs   int64  `json:"delayMs"`
	Txn       string `json:"txn"`
	Payload   string `json:"payload"`
}

// timerOps decodes payloads; it writes a 400 and reports false on a bad one.
func timerOps(w http.ResponseWriter, in []timerOpJSON) ([]command.TimerOp, bool) {
	out := make([]command.TimerOp, len(in))
	for i, t := range in {
		out[i] = command.TimerOp{Op: t.Op, Queue: t.Queue, TimerKey: t.TimerKey, Partition: t.Partition, DelayMs: t.DelayMs, Txn: t.Txn}
		if t.Op != command.TimerSchedule {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(t.Payload)
		if err != nil || (len(raw) > 0 && !json.Valid(raw)) {
			writeError(w, http.StatusBadRequest, "invalid_request", "timer payload must be base64 of a JSON document")
			return nil, false
		}
		out[i].Payload = raw
	}
	return out, true
}

type timerResultJSON struct {
	OK        bool       `json:"ok"`
	Status    string     `json:"status"`
	DeliverAt *time.Time `json:"deliverAt"`
}

func (s *Server) timers(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Operations []timerOpJSON `json:"operations"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	ops, ok := timerOps(w, req.Operations)
	if !ok {
		return
	}
	res, err := s.b(r).Timers(r.Context(), ops)
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	out := make([]timerResultJSON, len(res))
	for i, t := range res {
		out[i] = timerResultJSON{OK: t.OK, Status: t.Status, DeliverAt: expiresAt(t.DeliverAtMs)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": out})
}

func (s *Server) listTimers(w http.ResponseWriter, r *http.Request) {
	ts, err := s.b(r).ListTimers(r.PathValue("queue"))
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	type row struct {
		TimerKey  string          `json:"timerKey"`
		Partition string          `json:"partition"`
		Txn       string          `json:"txn"`
		DeliverAt time.Time       `json:"deliverAt"`
		Payload   json.RawMessage `json:"payload"`
	}
	out := []row{}
	for _, t := range ts {
		out = append(out, row{t.Key, t.Partition, t.Txn, time.UnixMilli(t.DueAtMs).UTC(), nullIfEmpty(t.Payload)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"timers": out})
}

func (s *Server) cancelTimer(w http.ResponseWriter, r *http.Request) {
	res, err := s.b(r).Timers(r.Context(), []command.TimerOp{{Op: command.TimerCancel, Queue: r.PathValue("queue"), TimerKey: r.PathValue("timerKey")}})
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": res[0].Status})
}
