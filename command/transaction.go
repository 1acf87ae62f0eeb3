package command

// A transaction is one raft entry: the acks of its inputs, the pushes of
// its outputs, KV ops and timers commit whole or not at all. Checks run in
// a fixed order (acks, pushes, KV, timers) before anything is written; the
// first refusal is the reason for the rollback.

// Rollback reasons.
const (
	RollbackDuplicate      = "duplicate"
	RollbackKVPrecondition = "kv_precondition"
	RollbackRejectedAck    = "rejected_ack"
)

// TxnOp is one "operations" entry: an ack (Ack set) or a push (Items set).
type TxnOp struct {
	Type  string     `json:"type"`
	Group string     `json:"group,omitempty"`
	Ack   *Ack       `json:"ack,omitempty"`
	Items []PushItem `json:"items,omitempty"`
}

// TransactionCommand is a whole transaction, stamped by the leader.
type TransactionCommand struct {
	NowMs  int64     `json:"now"`
	TxnID  string    `json:"txn"`
	Ops    []TxnOp   `json:"ops"`
	KV     []KVOp    `json:"kv,omitempty"`
	Timers []TimerOp `json:"timers,omitempty"`
}

// TxnOpResult answers one TxnOp.
type TxnOpResult struct {
	Ack  *AckResult
	Push []PushResult
}

// TransactionResult answers a TransactionCommand. On rollback only Reason,
// Error and (for kv_precondition) Abort are set.
type TransactionResult struct {
	Success bool
	Reason  string
	Error   string
	Abort   *KVAbort
	Ops     []TxnOpResult
	KV      []KVResult
	Timers  []TimerResult
}
