// Package txncheck checks a history of Kafka transactions for the anomalies
// Jepsen's Elle looks for, adapted to logs: each partition is a list that
// transactions append to and polls read, and offsets order the list.
//
// A workload records what every transactional producer wrote and read,
// what every plain reader saw, and a complete read_committed read of every
// partition after the workload stopped (the final log). Check derives the
// dependency graph from them (write-write from offset order, write-read
// from what a transaction read, read-write from where its read stopped,
// process order per transactional id, real-time order) and reports each
// anomaly class with examples.
//
// The classes Kafka's transactions forbid fail a run; two that they allow
// are counted so a report shows them: write cycles through offset order
// (G0), because Kafka does not isolate concurrent writers of a partition
// from each other, and G-single, because a poll reads each partition at its
// own position, not one snapshot of all of them.
package txncheck

import "time"

// Outcome is what the client learnt of a transaction's end.
type Outcome int

const (
	// Unknown: the end call failed or timed out; the transaction may have
	// committed. The final log decides.
	Unknown Outcome = iota
	// Committed: EndTransaction(commit) succeeded.
	Committed
	// Aborted: the transaction was aborted and the client knows it.
	Aborted
)

func (o Outcome) String() string {
	return [...]string{"unknown", "committed", "aborted"}[o]
}

// Partition names one partition of a topic: one list.
type Partition struct {
	Topic     string
	Partition int32
}

// Record is one value at one offset of a partition.
type Record struct {
	Partition
	Offset int64
	Value  string
}

// Write is one value a transaction produced. Offset is the offset the
// produce answer gave, or -1 when the produce was not acknowledged.
type Write struct {
	Partition
	Value  string
	Offset int64
}

// Txn is one transaction of one transactional producer.
type Txn struct {
	ID       string // unique in the history
	Producer string // the transactional id: its transactions run one after another
	// Start is before the transaction's first poll or produce, EndCalled
	// when the client asked to commit or abort, End when it learnt the
	// outcome.
	Start, EndCalled, End time.Time
	Outcome               Outcome
	Writes                []Write
	// Reads are the records the transaction consumed (read_committed) and
	// whose offsets it committed for Group, in the order polled.
	Reads []Observation
	Group string
}

// Observation is a record a plain reader received, and when.
type Observation struct {
	Record
	At time.Time // when the poll that carried it returned
}

// Reader is a consumer outside any transaction that read partitions in
// order from their start, assigned (no group).
type Reader struct {
	Name          string
	ReadCommitted bool
	Seen          []Observation // in the order received
}

// History is everything a run recorded.
type History struct {
	Txns    []Txn
	Readers []Reader
	// Final is a complete read_committed read of every partition after
	// every transaction ended, in offset order.
	Final map[Partition][]Record
	// GroupOffsets are the committed offsets of each consumer group at the
	// end (the next offset the group would consume).
	GroupOffsets map[string]map[Partition]int64
}
