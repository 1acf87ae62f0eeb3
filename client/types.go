package client

import "encoding/json"

// The API's answers, as docs/HTTP-API.md and broker/httpapi/openapi.json
// describe them. Each type holds the fields its readers use so far; a
// field the server adds later is ignored when decoding.

// Queue is a queue's description (openapi.json's Queue): the answer to
// GET /api/v1/resources/queues/{queue} and POST /api/v1/configure, and
// each entry of the queue list.
type Queue struct {
	Name       string       `json:"name"`
	Options    QueueOptions `json:"options"`
	Partitions []Partition  `json:"partitions"`
}

// Messages is how many messages the queue's partitions hold between
// their start and next offsets.
func (q Queue) Messages() uint64 {
	var n uint64
	for _, p := range q.Partitions {
		n += p.Messages
	}
	return n
}

// QueueOptions are a queue's settings (openapi.json's QueueOptions);
// durations are in seconds.
type QueueOptions struct {
	DedupWindowSeconds int64 `json:"dedupWindowSeconds"`
	LeaseTime          int64 `json:"leaseTime"`
	RetryLimit         int32 `json:"retryLimit"`
	DeadLetterQueue    bool  `json:"deadLetterQueue"`
	DelayedProcessing  int64 `json:"delayedProcessing"`
	// Partitions is the number of partitions Kafka clients see.
	Partitions int32 `json:"partitions"`
}

// Partition is one of a queue's partitions (openapi.json's Partition).
type Partition struct {
	Name       string `json:"name"`
	NextOffset uint64 `json:"nextOffset"`
	Messages   uint64 `json:"messages"`
}

// PushResult is the answer for one item of POST /api/v1/push
// (openapi.json's PushResult). message_id and transaction_id are in snake
// case on the wire; MessageID and Offset are nil for an item in error.
type PushResult struct {
	Index         int     `json:"index"`
	MessageID     *string `json:"message_id"`
	TransactionID string  `json:"transaction_id"`
	Partition     string  `json:"partition"`
	Status        string  `json:"status"`
	Offset        *uint64 `json:"offset"`
	Error         string  `json:"error,omitempty"`
}

// PopResponse is the answer to GET /api/v1/pop/queue/{queue}
// (openapi.json's PopResponse): the leased messages and their lease.
type PopResponse struct {
	Messages []PoppedMessage `json:"messages"`
	LeaseID  string          `json:"leaseId"`
}

// PoppedMessage is one leased message (openapi.json's PoppedMessage).
// An ack names it by TransactionID, PartitionID and LeaseID.
type PoppedMessage struct {
	ID              string          `json:"id"`
	TransactionID   string          `json:"transactionId"`
	Partition       string          `json:"partition"`
	PartitionID     string          `json:"partitionId"`
	Offset          uint64          `json:"offset"`
	Data            json.RawMessage `json:"data"`
	LeaseID         string          `json:"leaseId"`
	ConsumerGroup   string          `json:"consumerGroup"`
	DeliveryAttempt int             `json:"deliveryAttempt"`
}

// ConsumerGroup is a consumer group (openapi.json's Group): its position in every
// partition of its queues and, in the group's own answer, its Kafka
// membership.
type ConsumerGroup struct {
	Name    string   `json:"name"`
	Cursors []Cursor `json:"cursors"`
	// Kafka is nil unless Kafka clients are members.
	Kafka *KafkaGroup `json:"kafka,omitempty"`
}

// Cursor is a group's position in one partition (openapi.json's Cursor).
// Positioned is false for a partition the group has not read yet;
// InFlight counts the messages it holds leased there.
type Cursor struct {
	Queue         string `json:"queue"`
	Partition     string `json:"partition"`
	Offset        int64  `json:"offset"`
	HighWatermark int64  `json:"highWatermark"`
	Lag           int64  `json:"lag"`
	Positioned    bool   `json:"positioned"`
	InFlight      int    `json:"inFlight"`
}

// KafkaGroup is a group's Kafka membership (openapi.json's KafkaGroup).
type KafkaGroup struct {
	Type       string             `json:"type"`
	State      string             `json:"state"`
	Protocol   string             `json:"protocol"`
	Generation int32              `json:"generation"`
	Members    []KafkaGroupMember `json:"members"`
}

// KafkaGroupMember is one Kafka member of a group and the partitions
// assigned to it (openapi.json's KafkaGroupMember).
type KafkaGroupMember struct {
	MemberID   string            `json:"memberId"`
	InstanceID string            `json:"instanceId"`
	ClientID   string            `json:"clientId"`
	ClientHost string            `json:"clientHost"`
	Assignment []TopicPartitions `json:"assignment"`
}

// TopicPartitions names partitions of one topic, by number.
type TopicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// Cluster is the answer to GET /api/v1/cluster and to adding or removing
// a node (openapi.json's Cluster). Leader is nil while no leader is known;
// NotAMember is set when the node asked is not in the membership.
type Cluster struct {
	Leader     *int     `json:"leader"`
	LogFormat  int      `json:"logFormat"`
	NotAMember string   `json:"notAMember"`
	Members    []Member `json:"members"`
	// Replicas compares the members' state digests, per raft group.
	Replicas []ReplicaComparison `json:"replicas"`
	// Checks compares the members' newest state checks, per raft group
	// that has been checked (POST /api/v1/cluster/checks).
	Checks []CheckComparison `json:"checks"`
}

// CheckComparison is one raft group's newest state check compared across
// the members (openapi.json's CheckComparison): State is "same" (all
// found Hash at Index), "diverged" (the two Members hold different
// states), "failed" (Members[0] could not hash; Error says why),
// "pending" or "incomplete" (a member holds no check at Index).
type CheckComparison struct {
	Group   int    `json:"group"`
	Index   int64  `json:"index"`
	State   string `json:"state"`
	Members []int  `json:"members"`
	Hash    string `json:"hash,omitempty"`
	Error   string `json:"error,omitempty"`
}

// CheckIndexes is the answer to POST /api/v1/cluster/checks: the index
// each raft group is checked at (openapi.json's CheckIndexes).
type CheckIndexes struct {
	Groups []struct {
		Group int   `json:"group"`
		Index int64 `json:"index"`
	} `json:"groups"`
}

// ReplicaComparison is one raft group's members compared by their state
// digests (openapi.json's ReplicaComparison): State is "same" (all agree
// at Index), "diverged" (the two Members hold different states from
// Index on) or "unknown" (not comparable yet).
type ReplicaComparison struct {
	Group   int    `json:"group"`
	State   string `json:"state"`
	Index   *int64 `json:"index"`
	Members []int  `json:"members"`
}

// Member is one node of the cluster as the node asked sees it
// (openapi.json's Member). State is "up" when it answered its /health,
// else "unreachable" with Error; the pointer fields are nil when unknown.
type Member struct {
	ID            int     `json:"id"`
	RaftAddr      string  `json:"raftAddr"`
	HTTPAddr      string  `json:"httpAddr"`
	KafkaAddr     string  `json:"kafkaAddr"`
	Voter         bool    `json:"voter"`
	VotesWithheld bool    `json:"votesWithheld"` // grants no raft votes until its log catches up
	Leader        bool    `json:"leader"`
	State         string  `json:"state"`
	Error         string  `json:"error"`
	Role          string  `json:"role"`
	Term          *uint64 `json:"term"`
	Applied       *uint64 `json:"applied"`
	Lag           *uint64 `json:"lag"`
	Version       string  `json:"version"`
	UptimeSeconds *int64  `json:"uptimeSeconds"`
	LogFormat     *int    `json:"logFormat"`
	// The member's disk (its data directory's file system) and Go
	// runtime memory; nil when unknown.
	DiskUsedBytes  *uint64 `json:"diskUsedBytes"`
	DiskTotalBytes *uint64 `json:"diskTotalBytes"`
	MemoryBytes    *uint64 `json:"memoryBytes"`
	// ClockOffsetMs is how far the member's wall clock is from the
	// voters' median; nil when unknown.
	ClockOffsetMs *int64 `json:"clockOffsetMs"`
	// Groups is the member's view of each raft group (absent with one).
	Groups []RaftGroup `json:"groups"`
}

// RaftGroup is one raft group's state on a member (openapi.json's
// RaftGroup). Leader is nil while the group knows none.
type RaftGroup struct {
	ID      int    `json:"id"`
	Role    string `json:"role"`
	Leader  *int   `json:"leader"`
	Term    uint64 `json:"term"`
	Applied uint64 `json:"applied"`
	// PreferredLeader is the node an operator chose to lead it.
	PreferredLeader *int `json:"preferredLeader"`
	// Replicas are the nodes that should replicate a data group (with a
	// replication factor); Moving is true on its leader during a move.
	Replicas []int `json:"replicas"`
	Moving   bool  `json:"moving"`
}

// DeadLetterList is the answer to GET /api/v1/dlq (openapi.json's
// DeadLetterList).
type DeadLetterList struct {
	Messages []DeadLetter `json:"messages"`
}

// DeadLetter is a message that failed for good (openapi.json's
// DeadLetter). ReplayedAt and ReplayedAs are set once it was replayed.
type DeadLetter struct {
	ID            string          `json:"id"`
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	ConsumerGroup string          `json:"consumerGroup"`
	Offset        int64           `json:"offset"`
	TransactionID string          `json:"transactionId"`
	Data          json.RawMessage `json:"data"`
	Error         string          `json:"error"`
	Attempts      int32           `json:"attempts"`
	ReplayedAt    string          `json:"replayedAt,omitempty"`
	ReplayedAs    *ReplayedAs     `json:"replayedAs,omitempty"`
}

// ReplayedAs is the message a dead letter's replay pushed.
type ReplayedAs struct {
	MessageID string `json:"messageId"`
	Offset    uint64 `json:"offset"`
}

// ErrorBody is the body of every error answer (openapi.json's Error): a
// message and a stable code such as not_found or no_leader.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// GroupReplicas is one data group's replicas in a cluster with a
// replication factor (GET /api/v1/cluster/groups).
type GroupReplicas struct {
	Group    int   `json:"group"`
	Replicas []int `json:"replicas"` // where it should be, its preferred leader first
	Leader   *int  `json:"leader"`
	Members  []int `json:"members"` // its raft configuration now
	Moving   bool  `json:"moving"`  // the members are not yet the replicas
}
