package main

import (
	"errors"

	"github.com/waggle-mq/waggle/raftnode"
)

// In tests os.Executable is the test binary, not waggle: check in-process,
// sorting the answers as the child's exit codes would.
func init() {
	verifyDataDir = func(dir string) error {
		err := raftnode.VerifyDataDirAtStart(dir)
		switch {
		case err == nil, errors.Is(err, raftnode.ErrNoData):
			return nil
		case errors.Is(err, raftnode.ErrDataDirInUse), errors.Is(err, raftnode.ErrDataDirUnreadable):
			return err
		default:
			return &damageError{detail: err.Error()}
		}
	}
}
