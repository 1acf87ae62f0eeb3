package httpapi

import (
	"net/http"
	"strconv"
	"time"
)

// backup streams a backup file of this node's state (format in
// raftfsm/backup.go). Not forwarded: the node asked answers from its own
// store (see broker.Service.Backup). The raft index and term it covers go
// in headers too, before the body. A failure once the body has started
// aborts the response, and the file lacks its trailer: no partial backup
// passes a check.
//
// One backup runs at a time, and a client that stops reading for a minute
// is cut off: a backup holds a read transaction and links to every
// segment file, which keep retention from freeing disk while it lasts.
func (s *Server) backup(w http.ResponseWriter, r *http.Request) {
	if len(s.groups) > 1 {
		// A backup holds one raft group's state: with several, it would
		// hold part of the data and pass every check.
		writeError(w, http.StatusConflict, "several_groups", "backup covers one raft group, and this cluster has several (--data-groups): it is not supported yet")
		return
	}
	if !s.backupRunning.CompareAndSwap(false, true) {
		w.Header().Set("Retry-After", "60")
		writeError(w, http.StatusTooManyRequests, "backup_running", "a backup of this node is already being taken; retry when it is done")
		return
	}
	defer s.backupRunning.Store(false)
	b, err := s.svc.Backup()
	if err != nil {
		s.writeBrokerError(w, err)
		return
	}
	defer b.Release()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Waggle-Backup-Index", strconv.FormatUint(b.Header.Index, 10))
	w.Header().Set("X-Waggle-Backup-Term", strconv.FormatUint(b.Header.Term, 10))
	w.WriteHeader(http.StatusOK)
	n, err := b.WriteTo(&stallGuard{w: w, rc: http.NewResponseController(w)})
	if err != nil {
		s.log.Error("backup broke off", "index", b.Header.Index, "bytes", n, "err", err)
		panic(http.ErrAbortHandler)
	}
	s.log.Info("backup written", "index", b.Header.Index, "term", b.Header.Term, "bytes", n)
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
