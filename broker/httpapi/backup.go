package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// GroupsHeader says, on a backup answer, how many raft groups the cluster
// runs.
const GroupsHeader = "X-Waggle-Raft-Groups"

// backup streams a backup file of this node's state (format in
// fsm/backup.go). Not forwarded: the node asked answers from its own
// store (see broker.Service.Backup). The raft index and term it covers go
// in headers too, before the body. A failure once the body has started
// aborts the response, and the file lacks its trailer: no partial backup
// passes a check.
//
// One backup runs at a time, and a client that stops reading for a minute
// is cut off: a backup holds a read transaction and links to every
// segment file, which keep retention from freeing disk while it lasts.
//
// A backup holds one raft group's state. With several groups, ?group=
// names the group (waggle backup takes one file per group); without it the
// answer is 409 several_groups rather than a backup that holds part of the
// data and passes every check.
func (s *Server) backup(w http.ResponseWriter, r *http.Request) {
	b := s.svc
	w.Header().Set(GroupsHeader, strconv.Itoa(s.groupCount()))
	if s.groupCount() > 1 {
		g, err := strconv.ParseUint(r.URL.Query().Get("group"), 10, 32)
		switch {
		case r.URL.Query().Get("group") == "":
			writeError(w, http.StatusConflict, "several_groups",
				fmt.Sprintf("this cluster runs %d raft groups and a backup holds one: name it with ?group= (waggle backup takes them all)", s.groupCount()))
			return
		case err != nil || g >= uint64(s.groupCount()):
			writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("?group= names no raft group of the %d", s.groupCount()))
			return
		case !s.route.Replicated(uint32(g)):
			writeError(w, http.StatusConflict, "not_replicated", fmt.Sprintf("this node does not replicate raft group %d: take its backup from one of its replicas", g))
			return
		}
		b = s.route.Local(uint32(g))
	}
	if !s.backupRunning.CompareAndSwap(false, true) {
		w.Header().Set("Retry-After", "60")
		writeError(w, http.StatusTooManyRequests, "backup_running", "a backup of this node is already being taken; retry when it is done")
		return
	}
	defer s.backupRunning.Store(false)
	bk, err := b.Backup()
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	defer bk.Release()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Waggle-Backup-Index", strconv.FormatUint(bk.Header.Index, 10))
	w.Header().Set("X-Waggle-Backup-Term", strconv.FormatUint(bk.Header.Term, 10))
	w.WriteHeader(http.StatusOK)
	n, err := bk.WriteTo(&stallGuard{w: w, rc: http.NewResponseController(w)})
	if err != nil {
		s.log.Error("backup broke off", "index", bk.Header.Index, "bytes", n, "err", err)
		panic(http.ErrAbortHandler)
	}
	s.log.Info("backup written", "index", bk.Header.Index, "term", bk.Header.Term, "bytes", n)
}

// stallGuard gives every write to a response a deadline of its own, so a
// reader that stalls ends the response instead of holding it open.
type stallGuard struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// backupStall is how long one write of a backup may wait for the reader.
const backupStall = time.Minute

func (g *stallGuard) Write(p []byte) (int, error) {
	g.rc.SetWriteDeadline(time.Now().Add(backupStall)) // unsupported by a writer: no deadline
	return g.w.Write(p)
}
