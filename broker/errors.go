package broker

import (
	"errors"
	"fmt"
)

// Errors the frontends map to their own codes. Compare with errors.Is.
var (
	// ErrInvalid marks a request the client must change; the wrapping
	// error says what is wrong. Nothing was written.
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound is a queue or partition that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrNotLeader means this node cannot accept writes now; nothing was
	// written. Retry (later, or on the leader).
	ErrNotLeader = errors.New("this node is not the raft leader")
	// ErrOutcomeUnknown means the write may or may not have been committed
	// (leadership was lost, or the apply timed out after the entry was
	// appended). Retrying with the same transactionId is safe: the retry
	// answers duplicate if the first attempt landed.
	ErrOutcomeUnknown = errors.New("write outcome unknown; retry with the same transactionId")
)

// ErrStorageFull is a write that would add data while this node's disk is
// below its free-space reserve. Nothing was written; reads, acks, deletes
// and retention go on, so space can be freed without a restart.
var ErrStorageFull = errors.New("storage full: the data directory's disk is below its free-space reserve; writes that add data are refused until space is freed")

// ErrUpgradeInProgress is a write the cluster's log format cannot carry
// yet: a member still runs an older binary. Nothing was written; it works
// once every member is upgraded.
var ErrUpgradeInProgress = errors.New("rolling upgrade in progress: a member runs an older waggle that would not read this write; retry once every node is upgraded")

// ErrKVExpiry is a KV write that declares neither ttlSeconds nor forever.
var ErrKVExpiry = fmt.Errorf("%w: every KV write declares ttlSeconds or forever:true", ErrInvalid)

// ErrTooLarge is a request within the body limit whose parts are not (a KV
// value, say).
var ErrTooLarge = errors.New("too large")
