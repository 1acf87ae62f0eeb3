package main

import "github.com/waggle-mq/waggle/raftfsm"

// In tests os.Executable is the test binary, not waggle: check in-process.
func init() {
	verifyDataDir = func(dir string) error {
		if err := raftfsm.VerifyDataDir(dir); err != nil {
			return &damageError{detail: err.Error()}
		}
		return nil
	}
}
