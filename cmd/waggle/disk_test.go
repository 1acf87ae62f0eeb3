package main

import (
	"errors"

	"github.com/waggle-mq/waggle/raftfsm"
)

// In tests os.Executable is the test binary, not waggle: check in-process,
// sorting the answers as the child's exit codes would.
func init() {
	verifyDataDir = func(dir string) error {
		err := raftfsm.VerifyDataDirAtStart(dir)
		switch {
		case err == nil, errors.Is(err, raftfsm.ErrNoData):
			return nil
		case errors.Is(err, raftfsm.ErrDataDirInUse), errors.Is(err, raftfsm.ErrDataDirUnreadable):
			return err
		default:
			return &damageError{detail: err.Error()}
		}
	}
}
