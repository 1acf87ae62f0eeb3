//go:build !waggle_faults

package kafka

// faulty is always false in a real build; faults_on.go explains the
// waggle_faults build that breaks the broker on purpose.
func faulty(string, int64) bool { return false }
