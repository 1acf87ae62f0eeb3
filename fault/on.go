//go:build waggle_faults

package fault

import (
	"os"
	"sync/atomic"
)

// Enabled says this is a build with the waggle_faults tag.
const Enabled = true

var (
	name  = os.Getenv("WAGGLE_FAULT")
	calls atomic.Int64
)

// Is reports whether the named fault is the process's, every nth time it
// is asked (every time for n = 1).
func Is(fault string, n int64) bool {
	return name == fault && calls.Add(1)%n == 0
}
