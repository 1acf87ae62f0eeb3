package command

import "github.com/waggle-mq/waggle/store"

// LeaseTimeSeconds is a queue's lease time, or the default.
func LeaseTimeSeconds(q store.Queue) int64 {
	if q.LeaseTimeSeconds != nil {
		return *q.LeaseTimeSeconds
	}
	return DefaultLeaseTimeSeconds
}

// RetryLimit is how many failed acks a message may take before it is
// given up on.
func RetryLimit(q store.Queue) int32 {
	if q.RetryLimit != nil {
		return *q.RetryLimit
	}
	return DefaultRetryLimit
}

// DeadLettering reports whether messages past the retry limit are kept as
// dead letters (the default) rather than dropped.
func DeadLettering(q store.Queue) bool { return q.DeadLetterQueue == nil || *q.DeadLetterQueue }

// DelaySeconds is how long a message waits after its push before it can be
// popped.
func DelaySeconds(q store.Queue) int64 {
	if q.DelayedProcessingSeconds != nil {
		return *q.DelayedProcessingSeconds
	}
	return 0
}
