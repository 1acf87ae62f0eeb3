// Package httpapi serves waggle's native HTTP API (docs/HTTP-API.md
// documents every call): routes, JSON in and out, status codes. Every
// decision about dedup, offsets or leadership is the broker's; this
// package only translates.
package httpapi

import (
	"bytes"
	"cmp"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	fastjson "github.com/segmentio/encoding/json"
	"golang.org/x/sync/semaphore"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/clock"
	"github.com/waggle-mq/waggle/metrics"
	"github.com/waggle-mq/waggle/router"
)

// MaxBodyBytes caps a request body; a larger one is answered 413.
const MaxBodyBytes = 1 << 20

// DefaultInFlightBytes is the default of Options.InFlightBytes.
const DefaultInFlightBytes = 32 << 20

// Server routes HTTP requests to a broker.
type Server struct {
	svc           Broker
	mux           *http.ServeMux
	log           *slog.Logger
	metrics       *metrics.Metrics
	peers         peerLinks
	auth          AuthConfig
	inFlight      *semaphore.Weighted                    // request bodies being worked on (Options.InFlightBytes)
	backupRunning atomic.Bool                            // one backup at a time (backup.go)
	routeList     []string                               // "METHOD /path" of every route, in registration order
	version       string                                 // Options.Version
	started       time.Time                              // when the API was made: the node's uptime
	kafkaGroups   func(string) (broker.KafkaGroup, bool) // Options.KafkaGroups
	diskUsage     func() (used, total uint64, err error) // Options.DiskUsage
	raftGroups    func() []broker.Health                 // Options.RaftGroups
	clock         *clock.Cluster                         // Options.Clock
	route         router.Table[Broker]                   // Options.Groups and Forwarding (placement.go)
	remote        []RemoteGroup                          // Options.Remote
	replicas      replicaWatch                           // what WatchReplicas found
}

// Options are the HTTP API's optional parts.
type Options struct {
	// Metrics records requests and is served at /metrics; nil: none.
	Metrics *metrics.Metrics
	// PeerTLS, when set, is how this node reaches other nodes' HTTP
	// listeners (forwarded writes, their /health): HTTPS, trusting the
	// cluster's CA. Nil: plain HTTP.
	PeerTLS *tls.Config
	// Auth turns authentication and authorization on.
	Auth AuthConfig
	// InFlightBytes bounds the request bodies being worked on at once; a
	// request that does not fit is answered 429 overloaded with
	// Retry-After, having changed nothing. Zero: DefaultInFlightBytes.
	InFlightBytes int64
	// Version is the binary's version, reported by /health.
	Version string
	// KafkaGroups describes a Kafka consumer group's membership, which the
	// Kafka listener holds on the leader; nil: none.
	KafkaGroups func(group string) (broker.KafkaGroup, bool)
	// DiskUsage reports the bytes used and the size of the file system
	// that holds the node's data, for /health; nil: not reported.
	DiskUsage func() (used, total uint64, err error)
	// RaftGroups reports the state of each raft group on this node, by
	// group id, for /health; nil (or a single group): not listed.
	RaftGroups func() []broker.Health
	// Groups are the brokers of the node's raft groups, by group id
	// (Groups[0] is the one New is given), and Forwarding the same groups'
	// brokers whose writes reach the group's leader from any node
	// (broker.Service.Forwarding). Nil: one group.
	Groups, Forwarding []Broker
	// Remote, in a cluster with a replication factor, reaches each data
	// group (by id; nil for group 0) through its replicas: it serves the
	// groups this node does not replicate, those where Groups and
	// Forwarding are nil (PlaceGroup changes which). Nil: every node
	// replicates every group.
	Remote []RemoteGroup
	// Clock is the node's estimate of the voters' clocks, whose wall
	// clock /health reports so peers can estimate this node's; nil: the
	// wall clock alone, no offset.
	Clock *clock.Cluster
}

// New returns the HTTP API over svc (a *broker.Service outside tests).
func New(svc Broker, log *slog.Logger, opts Options) *Server {
	if opts.InFlightBytes <= 0 {
		opts.InFlightBytes = DefaultInFlightBytes
	}
	s := &Server{svc: svc, mux: http.NewServeMux(), log: log, metrics: opts.Metrics, peers: newPeerLinks(opts.PeerTLS), auth: opts.Auth,
		inFlight: semaphore.NewWeighted(opts.InFlightBytes), version: opts.Version, started: time.Now(),
		kafkaGroups: opts.KafkaGroups, diskUsage: opts.DiskUsage, raftGroups: opts.RaftGroups, clock: cmp.Or(opts.Clock, clock.New(nil)),
		route: router.NewTable(svc, opts.Groups, opts.Forwarding), remote: opts.Remote}
	if opts.Remote != nil {
		remote := make([]bool, len(opts.Remote))
		for g := range opts.Remote {
			remote[g] = g > 0 && opts.Groups[g] == nil
		}
		s.route = s.route.DataGroupsOnly(remote)
	}
	s.routes()
	s.metrics.Register(s.replicasDivergedGauge())
	return s
}

// statusRecorder remembers the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// Flush lets long responses stream through the recorder.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) routes() {
	type route struct {
		perm permission
		h    http.HandlerFunc
	}
	byPath := map[string]map[string]route{}
	handle := func(method, path string, perm permission, h http.HandlerFunc) {
		if byPath[path] == nil {
			byPath[path] = map[string]route{}
		}
		byPath[path][method] = route{perm, h}
		s.routeList = append(s.routeList, method+" "+path)
	}
	const (
		read, write, manage  = auth.Read, auth.Write, auth.Manage
		queue, group, global = auth.Queue, auth.Group, auth.Cluster
	)
	// Writes go through leaderOnly: a follower forwards them; keyedWrite
	// adds the Idempotency-Key and the retries under it (requests.go).
	// Reads are answered from this node's store. Each route names what it needs
	// (see authn.go); an empty param means the body names the resources.
	handle(http.MethodPost, "/api/v1/push", need(write, queue, ""), s.placedWrite(byItems, s.keyedWrite(s.push, false)))
	handle(http.MethodPost, "/api/v1/fetch", need(read, queue, ""), s.placed(byBody, s.fetch))
	handle(http.MethodPost, "/api/v1/configure", need(manage, queue, ""), s.placedWrite(byBody, s.keyedWrite(s.configure, true)))
	handle(http.MethodGet, "/api/v1/resources/queues", need(read, global, ""), s.listQueues)
	handle(http.MethodGet, "/api/v1/resources/queues/{queue}", need(read, queue, "queue"), s.placed(inPath("queue"), s.getQueue))
	handle(http.MethodDelete, "/api/v1/resources/queues/{queue}", need(manage, queue, "queue"), s.placedWrite(inPath("queue"), s.keyedWrite(s.deleteQueue, true)))
	handle(http.MethodGet, "/api/v1/pop/queue/{queue}", need(read, queue, "queue"), s.placedWrite(inPath("queue"), s.leaderOnly(s.pop)))
	handle(http.MethodGet, "/api/v1/pop/queue/{queue}/partition/{partition}", need(read, queue, "queue"), s.placedWrite(inPath("queue"), s.leaderOnly(s.pop)))
	handle(http.MethodPost, "/api/v1/ack", need(read, queue, ""), s.placedWrite(byBody, s.keyedWrite(s.ack, true)))
	handle(http.MethodPost, "/api/v1/ack/batch", need(read, queue, ""), s.placedWrite(byBody, s.keyedWrite(s.ackBatch, true)))
	handle(http.MethodPost, "/api/v1/lease/{leaseId}/extend", need(read, queue, ""), s.placedWrite(byID("leaseId"), s.leaderOnly(s.extendLease)))
	handle(http.MethodGet, "/api/v1/dlq", need(read, global, ""), s.placed(byQuery("queue"), s.listDeadLetters))
	handle(http.MethodPost, "/api/v1/dlq/{id}/replay", need(write, queue, ""), s.placedWrite(byID("id"), s.leaderOnly(s.replayDeadLetter)))
	handle(http.MethodDelete, "/api/v1/dlq/{id}", need(write, queue, ""), s.placedWrite(byID("id"), s.leaderOnly(s.deleteDeadLetter)))
	handle(http.MethodDelete, "/api/v1/dlq", need(write, queue, ""), s.placedWrite(byQuery("queue"), s.leaderOnly(s.purgeDeadLetters)))
	handle(http.MethodPost, "/api/v1/consumer-groups/{group}/queues/{queue}/seek", need(read, group, "group"), s.placedWrite(inPath("queue"), s.keyedWrite(s.seek, true)))
	handle(http.MethodDelete, "/api/v1/consumer-groups/{group}", need(manage, group, "group"), s.keyedWrite(s.deleteGroup, true))
	handle(http.MethodPost, "/api/v1/transaction", need(write, queue, ""), s.placedWrite(byBody, s.keyedWrite(s.transaction, true)))
	handle(http.MethodPost, "/api/v1/kv", need(write, global, ""), s.placedWrite(byBody, s.keyedWrite(s.kv, true)))
	handle(http.MethodPost, "/api/v1/kv/once", need(write, global, ""), s.placedWrite(byBody, s.keyedWrite(s.once, true)))
	handle(http.MethodGet, "/api/v1/kv/{ns}/{key}", need(read, global, ""), s.placed(inPath("ns"), s.kvGet))
	handle(http.MethodPut, "/api/v1/kv/{ns}/{key}", need(write, global, ""), s.placedWrite(inPath("ns"), s.keyedWrite(s.kvPut, true)))
	handle(http.MethodDelete, "/api/v1/kv/{ns}/{key}", need(write, global, ""), s.placedWrite(inPath("ns"), s.keyedWrite(s.kvDelete, true)))
	handle(http.MethodPost, "/api/v1/timers", need(write, global, ""), s.placedWrite(byBody, s.keyedWrite(s.timers, true)))
	handle(http.MethodGet, "/api/v1/timers/{queue}", need(read, queue, "queue"), s.placed(inPath("queue"), s.listTimers))
	handle(http.MethodDelete, "/api/v1/timers/{queue}/{timerKey}", need(write, queue, "queue"), s.placedWrite(inPath("queue"), s.keyedWrite(s.cancelTimer, true)))
	handle(http.MethodGet, "/api/v1/consumer-groups", need(read, global, ""), s.listGroups)
	handle(http.MethodGet, "/api/v1/consumer-groups/{group}", need(read, group, "group"), s.placedWrite(inPath("group"), s.leaderOnly(s.getGroup)))
	handle(http.MethodGet, "/api/v1/cluster", need(read, global, ""), s.cluster)
	handle(http.MethodPost, "/api/v1/cluster/nodes", need(manage, global, ""), s.leaderOnly(s.addNode))
	handle(http.MethodDelete, "/api/v1/cluster/nodes/{id}", need(manage, global, ""), s.leaderOnly(s.removeNode))
	handle(http.MethodPost, "/api/v1/cluster/register", need(manage, global, ""), s.leaderOnly(s.register))
	handle(http.MethodPost, "/api/v1/cluster/snapshot", need(manage, global, ""), s.snapshot)
	handle(http.MethodPost, "/api/v1/cluster/checks", need(manage, global, ""), s.startChecks)
	handle(http.MethodPost, "/api/v1/cluster/checks/local", need(manage, global, ""), s.checkHere)
	handle(http.MethodGet, "/api/v1/cluster/backup", need(manage, global, ""), s.backup)
	handle(http.MethodPost, broker.ApplyPath, need(manage, global, ""), s.applyEntry)
	handle(http.MethodGet, broker.CommitPath, need(manage, global, ""), s.leaderCommit)
	handle(http.MethodPost, broker.GroupCallPath, need(manage, global, ""), s.groupCall)
	handle(http.MethodPut, "/api/v1/cluster/groups/{group}/leader", need(manage, global, ""), s.leaderOnly(s.preferLeader))
	handle(http.MethodDelete, "/api/v1/cluster/groups/{group}/leader", need(manage, global, ""), s.leaderOnly(s.preferLeader))
	handle(http.MethodGet, "/api/v1/cluster/groups", need(read, global, ""), s.groupReplicas)
	handle(http.MethodPut, "/api/v1/cluster/groups/{group}/replicas", need(manage, global, ""), s.leaderOnly(s.setGroupReplicas))
	handle(http.MethodPost, "/api/v1/cluster/decommission", need(manage, global, ""), s.leaderOnly(s.decommission))
	handle(http.MethodPost, "/api/v1/cluster/rebalance", need(manage, global, ""), s.leaderOnly(s.rebalance))
	handle(http.MethodGet, "/api/v1/auth/users", need(manage, global, ""), s.listUsers)
	handle(http.MethodPost, "/api/v1/auth/users", need(manage, global, ""), s.leaderOnly(s.putUser))
	handle(http.MethodDelete, "/api/v1/auth/users/{name}", need(manage, global, ""), s.leaderOnly(s.deleteUser))
	handle(http.MethodGet, "/api/v1/auth/tokens", need(manage, global, ""), s.listTokens)
	handle(http.MethodPost, "/api/v1/auth/tokens", need(manage, global, ""), s.leaderOnly(s.createToken))
	handle(http.MethodDelete, "/api/v1/auth/tokens/{name}", need(manage, global, ""), s.leaderOnly(s.deleteToken))
	handle(http.MethodGet, "/api/v1/auth/whoami", need(read, global, ""), s.whoami)
	handle(http.MethodGet, "/health", public, s.health)
	handle(http.MethodGet, "/api/v1/openapi.json", public, s.openAPI)

	handle(http.MethodGet, "/{$}", public, s.dashboard)
	if s.metrics != nil {
		metricsHandler := s.metrics.Handler()
		handle(http.MethodGet, "/metrics", need(read, global, ""), metricsHandler.ServeHTTP)
	}

	for path, methods := range byPath {
		s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
			// Deferred: a forward whose leader breaks off mid-answer ends
			// the handler with a panic (http.ErrAbortHandler, which
			// net/http recovers), and its body's room must come back.
			defer func() { s.metrics.HTTPRequest(r.Method+" "+path, rec.code, time.Since(start).Seconds()) }()
			rt, ok := methods[r.Method]
			if !ok {
				writeError(rec, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed on "+path)
				return
			}
			release, ok := s.admit(rec, r)
			if !ok {
				return
			}
			defer release()
			if r, ok := s.authorize(rec, r, rt.perm); ok {
				rt.h(rec, r)
			}
		})
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no route "+r.Method+" "+r.URL.Path)
	})
}

// Routes lists every route as "METHOD /path" (path patterns as
// net/http.ServeMux writes them), for the API's documentation and its test.
func (s *Server) Routes() []string { return s.routeList }

// minBodyWeight is what a request with a body counts against the in-flight
// budget at least: its decoded form and answer take memory too.
const minBodyWeight = 4 << 10

// admit reserves room in the in-flight budget for a request's body, sized
// by its Content-Length (MaxBodyBytes when unknown), or answers 429
// overloaded: when producers outrun the disk, they are told to come back
// rather than queued in memory. Requests without a body (GET, HEAD, a
// DELETE that declares none) pass.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodDelete && r.ContentLength == 0 {
		return func() {}, true
	}
	weight := r.ContentLength
	if weight < 0 || weight > MaxBodyBytes {
		weight = MaxBodyBytes
	}
	weight = max(weight, minBodyWeight)
	if !s.inFlight.TryAcquire(weight) {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "overloaded", "the node is working on as many requests as it holds in memory; retry after a second")
		return nil, false
	}
	return func() { s.inFlight.Release(weight) }, true
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isStateRead(r) && !s.svc.ServesReads() {
		catchingUp(w, "this node is applying the raft log it held when it started, or restoring a snapshot; until then its state may be older than what it served before")
		return
	}
	s.mux.ServeHTTP(w, r)
}

// isStateRead reports whether r reads queues, groups, KV or messages from
// this node's applied state (GETs under /api/, and fetch). Cluster status
// (so an operator sees the node catch up) and the OpenAPI document are
// answered meanwhile.
func isStateRead(r *http.Request) bool {
	switch {
	case r.URL.Path == "/api/v1/fetch":
		return true
	case r.Method != http.MethodGet || !strings.HasPrefix(r.URL.Path, "/api/"):
		return false
	}
	return !strings.HasPrefix(r.URL.Path, "/api/v1/cluster") && r.URL.Path != "/api/v1/openapi.json"
}

type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may have gone; nothing to do
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Error: msg, Code: code})
}

// catchingUp answers 503 catching_up: this node's state may be older than
// what was acknowledged, so a read here could go back in time.
func catchingUp(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, "catching_up", msg)
}

// writeBrokerError maps a broker error to a status and code.
func (s *Server) writeBrokerError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, broker.ErrKVExpiry):
		writeError(w, http.StatusBadRequest, "kv_expiry_not_specified", err.Error())
	case errors.Is(err, broker.ErrKeyReused):
		writeError(w, http.StatusUnprocessableEntity, "idempotency_key_reused", err.Error())
	case errors.Is(err, broker.ErrAnswerNotKept):
		writeError(w, http.StatusConflict, "answer_not_kept", err.Error())
	case errors.Is(err, broker.ErrTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", err.Error())
	case errors.Is(err, broker.ErrInvalid):
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
	case errors.Is(err, broker.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, broker.ErrStorageFull):
		writeError(w, http.StatusInsufficientStorage, "storage_full", err.Error())
	case errors.Is(err, broker.ErrNotLeader):
		noLeader(w, err.Error())
	case errors.Is(err, broker.ErrUpgradeInProgress):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "upgrade_in_progress", err.Error())
	case errors.Is(err, broker.ErrOutcomeUnknown):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "outcome_unknown", err.Error())
	default:
		s.log.Error("request failed", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

// errNotUTF8 refuses a body with invalid UTF-8: encoding/json silently
// turns it into U+FFFD, so two different transactionIds could become one.
var errNotUTF8 = errors.New("request body is not valid UTF-8")

// parseBody decodes raw, a whole request body, into v by decodeBody's
// rules, which are encoding/json's (strictDecode). It decodes with
// segmentio/encoding's json first, about five times faster on a push
// body; a body that does not decode that way is decoded again by
// encoding/json, so a refusal (and its error code) is encoding/json's
// exactly, and a test holds the fast path to encoding/json's answers for
// the bodies it accepts. json.RawMessage fields (payloads) point into raw
// instead of copying it, so raw must not change afterwards.
func parseBody(raw []byte, v any) error {
	if !utf8.Valid(raw) {
		return errNotUTF8
	}
	if bytes.Count(raw, []byte{'['})+bytes.Count(raw, []byte{'{'}) <= maxNesting {
		rest, err := fastjson.Parse(raw, v, fastjson.DisallowUnknownFields|fastjson.DontCopyRawMessage)
		if err == nil && len(bytes.TrimLeft(rest, jsonSpace)) == 0 && len(bytes.TrimLeft(raw, jsonSpace)) > 0 {
			return nil
		}
	}
	fresh := reflect.New(reflect.TypeOf(v).Elem())
	if err := strictDecode(raw, fresh.Interface()); err != nil {
		return err
	}
	reflect.ValueOf(v).Elem().Set(fresh.Elem())
	return nil
}

// strictDecode decodes raw into v with encoding/json, refusing unknown
// fields and anything after the value.
func strictDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// maxNesting is encoding/json's limit on how deeply arrays and objects
// nest, which segmentio's decoder does not have: a body with more
// openers than that, so possibly nested deeper, takes encoding/json's
// path.
const maxNesting = 10000

// jsonSpace is JSON's whitespace.
const jsonSpace = " \t\r\n"

// decodeBody reads one JSON value into v, refusing unknown fields (a
// misspelt "transactionId" must not silently turn dedup off), trailing
// data and bodies over MaxBodyBytes. It writes the error answer itself
// and reports whether decoding succeeded.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	raw, err := readBody(http.MaxBytesReader(w, r.Body, MaxBodyBytes), r.ContentLength)
	if err == nil {
		err = parseBody(raw, v)
	}
	if err == nil {
		return true
	}
	status, code, msg := bodyError(err)
	writeError(w, status, code, msg)
	return false
}

// readBody reads a request body whole, into one buffer of the size its
// Content-Length announces when that is at most MaxBodyBytes: io.ReadAll's
// doubling would copy a 40 KB push body five times. The reader sets the
// limit.
func readBody(body io.Reader, contentLength int64) ([]byte, error) {
	if contentLength <= 0 || contentLength > MaxBodyBytes {
		return io.ReadAll(body)
	}
	// The spare bytes.MinRead let the read that meets the end need no room.
	buf := bytes.NewBuffer(make([]byte, 0, contentLength+bytes.MinRead))
	_, err := buf.ReadFrom(body)
	return buf.Bytes(), err
}

// bodyError is the answer to a body that did not read or decode.
func bodyError(err error) (status int, code, msg string) {
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.Is(err, errNotUTF8):
		return http.StatusBadRequest, "bad_json", err.Error()
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body larger than %d bytes", MaxBodyBytes)
	case errors.As(err, &typeErr):
		return http.StatusBadRequest, "bad_type", fmt.Sprintf("field %q: got JSON %s, want %s", typeErr.Field, typeErr.Value, typeErr.Type)
	case errors.Is(err, io.EOF):
		return http.StatusBadRequest, "bad_json", "empty request body"
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return http.StatusBadRequest, "unknown_field", err.Error()
	default:
		return http.StatusBadRequest, "bad_json", "malformed JSON: " + err.Error()
	}
}
