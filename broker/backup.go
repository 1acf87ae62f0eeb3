package broker

import (
	"time"

	"github.com/waggle-mq/waggle/fsm"
)

// Backup takes a consistent backup of this node's state, to be written
// out with WriteTo and then released. Any node serves it, leader or not:
// each node's store is consistent as of its own applied index, which the
// backup's header names, and a follower serving it spares the leader the
// disk reads. Writes go on meanwhile.
func (s *Service) Backup() (*fsm.Backup, error) {
	return s.node.FSM.Backup(time.Now())
}
