//go:build waggle_faults

package main

import (
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// faultyWallClock, in a build with the waggle_faults tag, is the wall
// clock shifted by the duration ("10m", "-90s") written in the file that
// WAGGLE_CLOCK_OFFSET_FILE names, read again every 100 ms so a test can
// step the clock of a running node. Go reads the time through the vDSO,
// not libc, so faketime's LD_PRELOAD cannot shift it from outside. Nil
// without the variable: the node uses time.Now.
func faultyWallClock() func() time.Time {
	path := os.Getenv("WAGGLE_CLOCK_OFFSET_FILE")
	if path == "" {
		return nil
	}
	var offset atomic.Int64
	read := func() {
		if b, err := os.ReadFile(path); err == nil {
			if d, err := time.ParseDuration(strings.TrimSpace(string(b))); err == nil {
				offset.Store(int64(d))
			}
		}
	}
	read()
	go func() {
		for range time.Tick(100 * time.Millisecond) {
			read()
		}
	}()
	return func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
}
