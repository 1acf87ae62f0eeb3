//go:build !waggle_faults

package main

import "time"

// faultyWallClock is nil in a real build: the node reads time.Now.
// clockfault_on.go explains the waggle_faults build that shifts it.
func faultyWallClock() func() time.Time { return nil }
