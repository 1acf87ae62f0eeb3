package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
)

// With several raft groups (Options.Groups), every request is served by
// the group that owns what it names: a queue, a KV namespace, a consumer
// group, or an id that group minted (placement). placed finds the group
// and leaderOnly forwards the request to that group's leader. A request
// that names things of two groups is refused: one raft entry, and so one
// atomic write, lives in one group.

// groupKey keys the request's group in its context.
type groupKey struct{}

// elsewhere reports the group r was placed in when this node does not
// replicate it.
func (s *Server) elsewhere(r *http.Request) (uint32, bool) {
	g, ok := r.Context().Value(groupKey{}).(uint32)
	return g, ok && !s.route.Replicated(g)
}

// b is the broker of the group serving r: its placed group, or group 0.
// Nil for a group this node does not replicate (elsewhere).
func (s *Server) b(r *http.Request) Broker {
	if g, ok := r.Context().Value(groupKey{}).(uint32); ok {
		return s.route.Local(g)
	}
	return s.svc
}

// where finds the group a request belongs to; an error is the client's
// (a request spanning groups).
type where func(s *Server, r *http.Request) (uint32, error)

// placed serves h in the group where finds. With one group it is h. A
// request of a group this node does not replicate is relayed whole to the
// group's leader.
func (s *Server) placed(find where, h http.HandlerFunc) http.HandlerFunc {
	return s.place(find, h, true)
}

// placedWrite is placed for a write served by leaderOnly or keyedWrite,
// which relay a request of a group this node does not replicate
// themselves: keyedWrite then gives it a key and tries again, here, while
// the outcome is open, as it does for a write it forwards.
func (s *Server) placedWrite(find where, h http.HandlerFunc) http.HandlerFunc {
	return s.place(find, h, false)
}

func (s *Server) place(find where, h http.HandlerFunc, relay bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.groupCount() <= 1 {
			h(w, r)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), decodedKey{}, &decoded{}))
		g, err := find(s, r)
		if err != nil {
			writeError(w, http.StatusBadRequest, "cross_group", err.Error())
			return
		}
		if relay && !s.route.Replicated(g) {
			s.relay(w, r, g)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), groupKey{}, g)))
	}
}

// decodedKey keys the request's *decoded in its context.
type decodedKey struct{}

// decoded holds a request body that placing the request decoded already,
// by the handler's own rules, so the handler does not decode it again.
type decoded struct{ body any }

// predecoded is r's body as placing r decoded it, if it did.
func predecoded[T any](r *http.Request) (*T, bool) {
	if d, ok := r.Context().Value(decodedKey{}).(*decoded); ok {
		body, ok := d.body.(*T)
		return body, ok
	}
	return nil, false
}

// groupCount is how many raft groups the cluster runs.
func (s *Server) groupCount() int { return s.route.Groups() }

// groupOf is the group owning a queue, KV namespace or consumer group.
func (s *Server) groupOf(name string) uint32 { return s.route.GroupOf(name) }

// byPath places a request by the name in its path parameter param.
func inPath(param string) where {
	return func(s *Server, r *http.Request) (uint32, error) { return s.groupOf(r.PathValue(param)), nil }
}

// byQuery places a request by the queue in its ?queue= (group 0 without).
func byQuery(param string) where {
	return func(s *Server, r *http.Request) (uint32, error) {
		if q := r.URL.Query().Get(param); q != "" {
			return s.groupOf(q), nil
		}
		return 0, nil
	}
}

// byID places a request by the id in path parameter param, which the
// group that minted it names (router.Table.GroupOfIDString).
func byID(param string) where {
	return func(s *Server, r *http.Request) (uint32, error) {
		return s.route.GroupOfIDString(r.PathValue(param)), nil
	}
}

// named is what a request body can name, in every request shape: a push's
// items, a fetch's entries, a transaction's operations, KV ops and timers,
// an ack's partition and lease.
type named struct {
	Queue           string  `json:"queue"`
	NS              string  `json:"ns"`
	PartitionID     string  `json:"partitionId"`
	LeaseID         string  `json:"leaseId"`
	Items           []named `json:"items"`
	Entries         []named `json:"entries"`
	Operations      []named `json:"operations"`
	KV              []named `json:"kv"`
	Timers          []named `json:"timers"`
	Acknowledgments []named `json:"acknowledgments"`
}

// byBody places a request by what its body names. A body that is too
// large or not JSON goes to group 0, whose handler answers why.
func byBody(s *Server, r *http.Request) (uint32, error) {
	raw, ok := peekBody(r)
	var n named
	if !ok || json.Unmarshal(raw, &n) != nil {
		return 0, nil
	}
	p := placer{s: s}
	p.add(n)
	return p.group, p.err
}

// byItems places a push, the busiest request, by the queues of its items.
// It decodes the body as the push handler would and hands it on
// (predecoded), so a push is decoded once. A body that does not decode
// goes to group 0, whose handler answers why.
func byItems(s *Server, r *http.Request) (uint32, error) {
	raw, ok := peekBody(r)
	req := new(pushRequest)
	if !ok || parseBody(raw, req) != nil {
		return 0, nil
	}
	if d, ok := r.Context().Value(decodedKey{}).(*decoded); ok {
		d.body = req
	}
	p := placer{s: s}
	for _, it := range req.Items {
		p.name("queue", it.Queue, s.groupOf)
	}
	return p.group, p.err
}

// peekBody reads r's body, up to MaxBodyBytes, and leaves it to be read
// again (by the handler, or to forward it); ok is false when it could not
// be read whole.
func peekBody(r *http.Request) (raw []byte, ok bool) {
	raw, err := readBody(io.LimitReader(r.Body, MaxBodyBytes+1), r.ContentLength)
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(raw), r.Body))
	return raw, err == nil && len(raw) <= MaxBodyBytes
}

// placer gathers the groups of a body's names.
type placer struct {
	s     *Server
	group uint32
	first string // the first name placed, for the error
	err   error
}

func (p *placer) add(n named) {
	p.name("queue", n.Queue, p.s.groupOf)
	p.name("namespace", n.NS, p.s.groupOf)
	p.name("partition id", n.PartitionID, p.s.route.GroupOfIDString)
	if strings.Contains(n.LeaseID, "@") {
		p.name("lease", n.LeaseID, p.s.route.GroupOfIDString)
	}
	for _, list := range [][]named{n.Items, n.Entries, n.Operations, n.KV, n.Timers, n.Acknowledgments} {
		for _, m := range list {
			p.add(m)
		}
	}
}

func (p *placer) name(kind, name string, group func(string) uint32) {
	if name == "" || p.err != nil {
		return
	}
	g := group(name)
	switch {
	case p.first == "":
		p.first, p.group = kind+" "+strconv.Quote(name), g
	case g != p.group:
		p.err = fmt.Errorf("%s is in raft group %d but %s %q is in group %d: one request (one transaction) reaches one group; "+
			"names sharing the part before their first '.' share a group", p.first, p.group, kind, name, g)
	}
}

// relayedHeader marks a request that a node which does not replicate its
// raft group relayed to one that does (relay). The receiving node serves
// it as if the client had sent it there; one that does not replicate the
// group either answers 503 no_leader rather than relay it again.
const relayedHeader = "X-Waggle-Relayed-By"

// relay sends a request of raft group g, which this node does not
// replicate, to the group's leader (or a replica) and relays the answer.
func (s *Server) relay(w http.ResponseWriter, r *http.Request, g uint32) {
	if by := r.Header.Get(relayedHeader); by != "" {
		noLeader(w, fmt.Sprintf("relayed by node %s, but this node does not replicate raft group %d either", by, g))
		return
	}
	addr := s.remote[g].LeaderHTTPAddr()
	if addr == "" {
		noLeader(w, fmt.Sprintf("no replica of raft group %d can be reached", g))
		return
	}
	s.proxy(w, r, addr, "a replica of raft group "+strconv.FormatUint(uint64(g), 10), relayedHeader, s.remote[g].ForgetLeader)
}

// groupLister is what the lists and deletes that span every raft group
// ask of each: a local group's Broker, or a RemoteGroup.
type groupLister interface {
	Queues() ([]broker.QueueInfo, error)
	GroupPartitions(group string) ([]broker.Cursor, error)
	OffsetGroups() ([]string, error)
	DeadLetters(queue string) ([]broker.DeadLetter, error)
	DeleteGroup(ctx context.Context, group string) error
	PurgeDeadLetters(queue string) (int, error)
}

// RemoteGroup is a raft group another node replicates and this one does
// not (*broker.RemoteGroup): its requests are relayed there.
type RemoteGroup interface {
	groupLister
	// LeaderHTTPAddr is the group leader's HTTP address, or a replica's
	// when the leader is unknown; "" when none is known.
	LeaderHTTPAddr() string
	// ForgetLeader drops the leader learnt, which did not answer.
	ForgetLeader()
	// Replicas lists the nodes that should replicate the group now, the
	// preferred leader first.
	Replicas() []string
	// Leader is the group's leader and raft configuration as a replica
	// sees them.
	Leader() broker.GroupLeader
}

// replicasOf lists the nodes that replicate data group g, with a
// replication factor (nil without one, and for group 0).
func (s *Server) replicasOf(g uint32) []string {
	if s.remote == nil || g == 0 || g >= uint32(len(s.remote)) {
		return nil
	}
	return s.remote[g].Replicas()
}

// PlaceGroup puts raft group g's services in the table every request
// reads, from now on: those of a member this node runs, which serves the
// group's requests when replicated, or else relays them through
// Options.Remote (a member on its way out stays in the table while the
// requests that started on it finish; nil once it is gone).
func (s *Server) PlaceGroup(g uint32, local, forwarding Broker, replicated bool) {
	s.route.Place(g, local, forwarding, !replicated)
}

// lister is group g's groupLister: local, or through a replica.
func (s *Server) lister(g uint32, forwarding bool) groupLister {
	switch {
	case !s.route.Replicated(g):
		return s.remote[g]
	case forwarding:
		return s.route.Forwarding(g)
	}
	return s.route.Local(g)
}

// eachGroup runs fn on every group's broker (forwarding its writes to
// the group's leader), stopping at the first error.
func (s *Server) eachGroup(fn func(groupLister) error) error {
	if s.groupCount() <= 1 {
		return fn(s.svc) // the leader's own write: a lost leadership answers not_leader
	}
	for g := range uint32(s.groupCount()) {
		if err := fn(s.lister(g, true)); err != nil {
			return err
		}
	}
	return nil
}

// gather collects fn's answers from every group, in group order: from
// this node's copy of the groups it replicates, from a replica of the
// others.
func gather[T any](s *Server, fn func(groupLister) ([]T, error)) ([]T, error) {
	var out []T
	for g := range uint32(s.groupCount()) {
		part, err := fn(s.lister(g, false))
		if err != nil {
			return nil, err
		}
		out = append(out, part...)
	}
	return out, nil
}

// maxForwardedEntry bounds an entry another node forwards: the largest
// one forwarding sends, a transactional offset commit of
// command.MaxOffsetsPerEntry offsets with their metadata, is about 41 MB.
const maxForwardedEntry = 64 << 20

// forwardable are the command types a node forwards to a group's leader
// (broker.Service.Forwarding): what writes to several groups at once, or
// in a group led elsewhere, sends. Anything else, say a SeedIDs with
// another group's range, is refused.
var forwardable = map[command.CommandType]bool{
	command.CmdDeleteOffsets: true, command.CmdCommitOffsets: true, command.CmdTxnOffsetCommit: true, command.CmdAddToTxn: true,
	command.CmdCreateTopic: true, command.CmdDeleteQueue: true, command.CmdAlterTopic: true, command.CmdAddPartitions: true,
	command.CmdDeleteDeadLetters: true, command.CmdKeyed: true, command.CmdNewProducerID: true, command.CmdAlterGroupConfig: true, command.CmdAlterACLs: true,
	command.CmdSetReplicas: true,
}

// applyEntry applies a raft entry another node of a data group sent to
// this node as the group's leader (broker.Service.Forwarding): the body is
// the encoded command, ?group= the group.
func (s *Server) applyEntry(w http.ResponseWriter, r *http.Request) {
	b, ok := s.queriedGroup(w, r)
	if !ok {
		return
	}
	entry, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxForwardedEntry))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("a forwarded entry is at most %d bytes", maxForwardedEntry))
		return
	}
	if len(entry) == 0 || !forwardable[command.CommandType(entry[0])] {
		writeError(w, http.StatusBadRequest, "invalid_request", "not an entry another node forwards")
		return
	}
	applied, err := b.ApplyEntry(entry)
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, applied)
}

// leaderCommit answers this node's commit index as the leader of the
// raft group ?group= names (broker.Service.CatchUp on another node asks).
func (s *Server) leaderCommit(w http.ResponseWriter, r *http.Request) {
	b, ok := s.queriedGroup(w, r)
	if !ok {
		return
	}
	index, err := b.LeaderCommitIndex()
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, broker.LeaderCommit{Index: index})
}

// queriedGroup is the broker of the raft group ?group= names; a bad name
// is answered 400 (false).
func (s *Server) queriedGroup(w http.ResponseWriter, r *http.Request) (Broker, bool) {
	g, err := strconv.ParseUint(r.URL.Query().Get("group"), 10, 32)
	switch {
	case err != nil:
		writeError(w, http.StatusBadRequest, "invalid_request", "?group= names no raft group")
		return nil, false
	case g >= uint64(s.groupCount()):
		writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("this cluster has no raft group %d", g))
		return nil, false
	case !s.route.Replicated(uint32(g)):
		noLeader(w, fmt.Sprintf("this node does not replicate raft group %d", g))
		return nil, false
	}
	return s.route.Local(uint32(g)), true
}

// groupCall serves a call another node makes of a raft group it does not
// replicate (broker.RemoteGroup): ?group= and ?call= name it, the body
// holds its arguments.
func (s *Server) groupCall(w http.ResponseWriter, r *http.Request) {
	b, ok := s.queriedGroup(w, r)
	if !ok {
		return
	}
	args, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxForwardedEntry))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("a call's arguments are at most %d bytes", maxForwardedEntry))
		return
	}
	answer, err := b.ServeGroupCall(r.Context(), r.URL.Query().Get("call"), args)
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, answer)
}

// preferLeader sets (PUT, {"node"}) or clears (DELETE) the node an
// operator chose to lead a raft group; the group's leader hands it over
// within seconds, whenever that node can lead.
func (s *Server) preferLeader(w http.ResponseWriter, r *http.Request) {
	g, err := strconv.ParseUint(r.PathValue("group"), 10, 32)
	if err != nil || g >= uint64(s.groupCount()) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("this cluster has no raft group %q", r.PathValue("group")))
		return
	}
	var req struct {
		Node json.Number `json:"node"`
	}
	if r.Method == http.MethodPut {
		if !decodeBody(w, r, &req) {
			return
		}
		if req.Node == "" {
			writeError(w, http.StatusBadRequest, "invalid_request", "node names the voter to lead the group")
			return
		}
		if replicas := s.replicasOf(uint32(g)); replicas != nil && !slices.Contains(replicas, req.Node.String()) {
			writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("node %s does not replicate raft group %d (its replicas: %s)", req.Node, g, strings.Join(replicas, ", ")))
			return
		}
	}
	if err := s.svc.PreferLeader(uint32(g), req.Node.String()); err != nil {
		s.writeBrokerError(w, err)
		return
	}
	var chosen *string // null once cleared
	if req.Node != "" {
		chosen = ptr(req.Node.String())
	}
	writeJSON(w, http.StatusOK, map[string]any{"group": g, "preferredLeader": chosen})
}
