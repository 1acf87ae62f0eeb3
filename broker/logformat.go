package broker

import (
	"fmt"

	"github.com/waggle-mq/waggle/command"
)

// LogFormat is the raft log format the cluster writes now.
func (s *Service) LogFormat() command.LogFormat { return s.node.FSM.LogFormat() }

// RaiseLogFormat moves the cluster to format f, which the caller has made
// sure every member reads (each one's /health says so). Leader only; a
// format at or below the current one is left as it is.
func (s *Service) RaiseLogFormat(f command.LogFormat) error {
	if f > command.MaxLogFormat {
		return fmt.Errorf("%w: log format %d: this binary reads up to %d", ErrInvalid, f, command.MaxLogFormat)
	}
	if f <= s.LogFormat() {
		return nil
	}
	_, err := apply(s, &command.SetLogFormatCommand{Format: f})
	return err
}

// ConfigurationIndex is the raft index of the membership configuration
// in force: it changes when a member is added or removed.
func (s *Service) ConfigurationIndex() uint64 {
	f := s.node.Raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	return f.Index()
}
