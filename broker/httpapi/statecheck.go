package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/fsm"
)

// State checks compare the members' whole states (fsm.FSM.RequestCheck):
// POST /api/v1/cluster/checks asks every member to hash its state at one
// index per raft group, and GET /api/v1/cluster compares what they found.

// checkJSON is how a node's state checks of one raft group stand; absent
// from /health until a check is asked for.
type checkJSON struct {
	// Pending is the index a check waits for the log to reach, Running
	// the one being hashed; null when none.
	Pending *uint64 `json:"pending"`
	Running *uint64 `json:"running"`
	// Last is the newest finished check, null before the first.
	Last *checkResultJSON `json:"last"`
}

type checkResultJSON struct {
	Index   uint64 `json:"index"`          // as asked
	Applied uint64 `json:"applied"`        // the entry hashed after: the first at or past Index the state machine saw
	Hash    string `json:"hash,omitempty"` // 16 hex digits; absent when it failed
	Keys    uint64 `json:"keys"`
	Bytes   uint64 `json:"bytes"`
	TookMs  int64  `json:"tookMs"`
	Error   string `json:"error,omitempty"`
}

func stateCheckJSON(c fsm.StateCheck) *checkJSON {
	if c.Pending == 0 && c.Running == 0 && c.Last == nil {
		return nil
	}
	out := &checkJSON{}
	if c.Pending != 0 {
		out.Pending = ptr(c.Pending)
	}
	if c.Running != 0 {
		out.Running = ptr(c.Running)
	}
	if l := c.Last; l != nil {
		out.Last = &checkResultJSON{Index: l.Index, Applied: l.Applied, Keys: l.Keys, Bytes: l.Bytes, TookMs: l.Took.Milliseconds()}
		if l.Err != nil {
			out.Last.Error = l.Err.Error()
		} else {
			out.Last.Hash = fmt.Sprintf("%016x", l.Hash)
		}
	}
	return out
}

// checkAt is one raft group's check index, as asked and as answered.
type checkAt struct {
	Group uint32 `json:"group"`
	Index uint64 `json:"index"`
	// In a member's answer: its applied index, and whether that is past
	// Index (it cannot check there).
	Applied uint64 `json:"applied,omitempty"`
	Passed  bool   `json:"passed,omitempty"`
}

type checksRequest struct {
	Groups []checkAt `json:"groups"`
}

// checkHere asks this node's raft groups for the checks in the body.
func (s *Server) checkHere(w http.ResponseWriter, r *http.Request) {
	var req checksRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if len(req.Groups) == 0 {
		writeError(w, http.StatusBadRequest, "bad_request", "groups: list at least one raft group and the index to check it at")
		return
	}
	for _, c := range req.Groups {
		if int(c.Group) >= s.groupCount() {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("groups: raft group %d does not exist (the cluster runs %d)", c.Group, s.groupCount()))
			return
		}
	}
	out, err := s.requestChecks(req)
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// requestChecks asks this node's raft groups for the checks in req, and
// answers with each group's applied index.
func (s *Server) requestChecks(req checksRequest) (checksRequest, error) {
	out := checksRequest{Groups: []checkAt{}}
	for _, c := range req.Groups {
		if c.Group >= uint32(s.groupCount()) || !s.route.Replicated(c.Group) {
			continue // another node's group: its replicas check it
		}
		b := s.route.Local(c.Group)
		err := b.RequestStateCheck(c.Index)
		if err != nil && !errors.Is(err, fsm.ErrCheckPassed) {
			return out, fmt.Errorf("raft group %d: %w", c.Group, err)
		}
		out.Groups = append(out.Groups, checkAt{Group: c.Group, Index: c.Index, Applied: b.Health().Applied, Passed: err != nil})
	}
	return out, nil
}

// checkMargins are how far past the highest applied index seen the
// checks are asked, try after try: a member that has applied past the
// index by the time it is asked cannot check there. On an idle cluster
// the leader's housekeeping entries reach the first within a second.
var checkMargins = []uint64{1, 64, 1024, 16384}

// startChecks asks every member to check each raft group at one index.
func (s *Server) startChecks(w http.ResponseWriter, r *http.Request) {
	members, err := s.svc.Members()
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	self := s.svc.NodeID()
	applied := map[uint32]uint64{}
	for g, b := range s.route.All() {
		if s.route.Replicated(uint32(g)) {
			applied[uint32(g)] = b.Health().Applied
		}
	}
	for _, margin := range checkMargins {
		var req checksRequest
		for _, g := range slices.Sorted(maps.Keys(applied)) {
			req.Groups = append(req.Groups, checkAt{Group: g, Index: applied[g] + margin})
		}
		var (
			mu     sync.Mutex
			passed bool
			wg     sync.WaitGroup
		)
		for _, m := range members {
			if m.ID != self && m.HTTPAddr == "" {
				continue // not started yet: it shows as incomplete
			}
			wg.Go(func() {
				answer, err := s.askCheck(r, m, self, req)
				if err != nil {
					s.log.Warn("state check: a member was not asked", "node", m.ID, "err", err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, a := range answer.Groups {
					applied[a.Group] = max(applied[a.Group], a.Applied)
					passed = passed || a.Passed
				}
			})
		}
		wg.Wait()
		if !passed {
			writeJSON(w, http.StatusAccepted, checksRequest{Groups: req.Groups})
			return
		}
	}
	writeError(w, http.StatusServiceUnavailable, "check_passed", "the log moved past every index a check was asked at; try again")
}

// askCheck asks one member (this node when m is self) for the checks in
// req.
func (s *Server) askCheck(r *http.Request, m broker.Member, self string, req checksRequest) (checksRequest, error) {
	var out checksRequest
	if m.ID == self {
		return s.requestChecks(req)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return out, err
	}
	peer, err := http.NewRequestWithContext(r.Context(), http.MethodPost, s.peers.scheme+"://"+m.HTTPAddr+"/api/v1/cluster/checks/local", bytes.NewReader(body))
	if err != nil {
		return out, err
	}
	peer.Header.Set("Content-Type", "application/json")
	peer.Header.Set("Authorization", r.Header.Get("Authorization"))
	resp, err := s.peers.health.Do(peer)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return out, err
	}
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(answer))
	}
	return out, json.Unmarshal(answer, &out)
}

// checksCompared is one raft group's newest state check, compared across
// the members that answered:
//   - "same": every member hashed its state at Index, and all found Hash;
//   - "diverged": the two Members found different hashes;
//   - "failed": Members[0] could not hash its state (Error says why);
//   - "pending": some member has not finished yet;
//   - "incomplete": some member holds no check at Index (it was down
//     when it was asked, or has been asked since).
type checksCompared struct {
	Group   uint32        `json:"group"`
	Index   uint64        `json:"index"`
	State   string        `json:"state"`
	Members []json.Number `json:"members"`
	Hash    string        `json:"hash,omitempty"`
	Error   string        `json:"error,omitempty"`
}

// compareChecks compares the members' newest state checks, per raft group
// that any of them has checked.
func compareChecks(members []memberJSON) []checksCompared {
	type reading struct {
		node  json.Number
		check *checkJSON
	}
	byGroup := map[uint32][]reading{}
	eachGroupView(members, func(group uint32, node json.Number, _ *digestJSON, check *checkJSON) {
		byGroup[group] = append(byGroup[group], reading{node, check})
	})
	out := []checksCompared{}
	for _, group := range slices.Sorted(maps.Keys(byGroup)) {
		rs := byGroup[group]
		c := checksCompared{Group: group, Members: []json.Number{}}
		for _, r := range rs { // the newest index any member names
			if ch := r.check; ch != nil {
				c.Index = max(c.Index, deref(ch.Pending), deref(ch.Running))
				if ch.Last != nil {
					c.Index = max(c.Index, ch.Last.Index)
				}
			}
		}
		if c.Index == 0 {
			continue // never checked
		}
		var (
			hashed           []reading // members that hashed at Index
			failed           *reading
			pending, missing bool
		)
		for _, r := range rs {
			switch ch := r.check; {
			case ch != nil && ch.Last != nil && ch.Last.Index == c.Index && ch.Last.Error != "":
				failed = &r
			case ch != nil && ch.Last != nil && ch.Last.Index == c.Index:
				hashed = append(hashed, r)
			case ch != nil && (deref(ch.Pending) == c.Index || deref(ch.Running) == c.Index):
				pending = true
			default:
				missing = true
			}
		}
		differ := slices.IndexFunc(hashed, func(r reading) bool { return r.check.Last.Hash != hashed[0].check.Last.Hash })
		switch {
		case failed != nil:
			c.State, c.Members, c.Error = "failed", []json.Number{failed.node}, failed.check.Last.Error
		case differ > 0:
			c.State, c.Members = "diverged", []json.Number{hashed[0].node, hashed[differ].node}
		case missing:
			c.State = "incomplete"
		case pending:
			c.State = "pending"
		default:
			c.State, c.Hash = "same", hashed[0].check.Last.Hash
			for _, r := range rs {
				c.Members = append(c.Members, r.node)
			}
			sortNodes(c.Members)
		}
		out = append(out, c)
	}
	return out
}

func deref(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}
