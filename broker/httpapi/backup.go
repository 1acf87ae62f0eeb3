package httpapi

import (
	"net/http"
	"strconv"
)

// backup streams a backup file of this node's state (format in
// raftfsm/backup.go). Not forwarded: the node asked answers from its own
// store (see broker.Service.Backup). The raft index and term it covers go
// in headers too, before the body. A failure once the body has started
// aborts the response, and the file lacks its trailer: no partial backup
// passes a check.
func (s *Server) backup(w http.ResponseWriter, r *http.Request) {
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
	n, err := b.WriteTo(w)
	if err != nil {
		s.log.Error("backup broke off", "index", b.Header.Index, "bytes", n, "err", err)
		panic(http.ErrAbortHandler)
	}
	s.log.Info("backup written", "index", b.Header.Index, "term", b.Header.Term, "bytes", n)
}
