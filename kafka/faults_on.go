//go:build waggle_faults

package kafka

import (
	"os"
	"sync/atomic"
)

// A build with the waggle_faults tag is a deliberately broken broker, for
// the tests that show the Kafka transaction checker catches what it says
// it catches. WAGGLE_FAULT names the one bug a process has; without it
// the build behaves as the real one. Release builds never have the tag:
// there faulty is a constant false and the compiler drops every fault.
var (
	faultName  = os.Getenv("WAGGLE_FAULT")
	faultCalls atomic.Int64
)

// faulty reports whether the named fault is on, every nth time it is asked
// (every time for n = 1).
func faulty(name string, n int64) bool {
	return faultName == name && faultCalls.Add(1)%n == 0
}
