//go:build !waggle_faults

// Package fault breaks waggle on purpose, in a build with the
// waggle_faults tag, for the tests that show a checker catches what it
// says it catches. WAGGLE_FAULT names the one bug a process has; without
// it that build behaves as the real one. Release builds never have the
// tag: there Is is a constant false and the compiler drops every fault.
package fault

// Enabled says this is a build with the waggle_faults tag.
const Enabled = false

// Is is always false in a real build.
func Is(string, int64) bool { return false }
