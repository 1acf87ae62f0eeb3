package main

import "encoding/json"

// The API's answers as the CLI reads them (the README's HTTP API section).

type queueInfo struct {
	Name    string `json:"name"`
	Options struct {
		DedupWindowSeconds int64 `json:"dedupWindowSeconds"`
		LeaseTime          int64 `json:"leaseTime"`
		RetryLimit         int32 `json:"retryLimit"`
		DeadLetterQueue    bool  `json:"deadLetterQueue"`
		DelayedProcessing  int64 `json:"delayedProcessing"`
		Partitions         int32 `json:"partitions"`
	} `json:"options"`
	Partitions []struct {
		Name       string `json:"name"`
		NextOffset uint64 `json:"nextOffset"`
		Messages   uint64 `json:"messages"`
	} `json:"partitions"`
}

func (q queueInfo) messages() uint64 {
	var n uint64
	for _, p := range q.Partitions {
		n += p.Messages
	}
	return n
}

type pushResult struct {
	Index         int     `json:"index"`
	MessageID     *string `json:"message_id"`
	TransactionID string  `json:"transaction_id"`
	Partition     string  `json:"partition"`
	Status        string  `json:"status"`
	Offset        *uint64 `json:"offset"`
	Error         string  `json:"error,omitempty"`
}

type popped struct {
	Messages []struct {
		ID              string          `json:"id"`
		TransactionID   string          `json:"transactionId"`
		Partition       string          `json:"partition"`
		PartitionID     string          `json:"partitionId"`
		Offset          uint64          `json:"offset"`
		Data            json.RawMessage `json:"data"`
		LeaseID         string          `json:"leaseId"`
		ConsumerGroup   string          `json:"consumerGroup"`
		DeliveryAttempt int             `json:"deliveryAttempt"`
	} `json:"messages"`
	LeaseID string `json:"leaseId"`
}

type groupInfo struct {
	Name    string `json:"name"`
	Cursors []struct {
		Queue         string `json:"queue"`
		Partition     string `json:"partition"`
		Offset        int64  `json:"offset"`
		HighWatermark int64  `json:"highWatermark"`
		Lag           int64  `json:"lag"`
		Positioned    bool   `json:"positioned"`
		InFlight      int    `json:"inFlight"`
	} `json:"cursors"`
	Kafka *struct {
		Type       string `json:"type"`
		State      string `json:"state"`
		Protocol   string `json:"protocol"`
		Generation int32  `json:"generation"`
		Members    []struct {
			MemberID   string `json:"memberId"`
			InstanceID string `json:"instanceId"`
			ClientID   string `json:"clientId"`
			ClientHost string `json:"clientHost"`
			Assignment []struct {
				Topic      string  `json:"topic"`
				Partitions []int32 `json:"partitions"`
			} `json:"assignment"`
		} `json:"members"`
	} `json:"kafka,omitempty"`
}

type clusterInfo struct {
	Leader     *int   `json:"leader"`
	LogFormat  int    `json:"logFormat"`
	NotAMember string `json:"notAMember"`
	Members    []struct {
		ID            int     `json:"id"`
		RaftAddr      string  `json:"raftAddr"`
		HTTPAddr      string  `json:"httpAddr"`
		KafkaAddr     string  `json:"kafkaAddr"`
		Voter         bool    `json:"voter"`
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
		// runtime memory; null when unknown.
		DiskUsedBytes  *uint64 `json:"diskUsedBytes"`
		DiskTotalBytes *uint64 `json:"diskTotalBytes"`
		MemoryBytes    *uint64 `json:"memoryBytes"`
		// Groups: the member's view of each raft group (absent with one).
		Groups []struct {
			ID      int    `json:"id"`
			Role    string `json:"role"`
			Leader  *int   `json:"leader"`
			Term    uint64 `json:"term"`
			Applied uint64 `json:"applied"`
			// PreferredLeader: the node an operator chose to lead it.
			PreferredLeader *int `json:"preferredLeader"`
		} `json:"groups"`
	} `json:"members"`
}

type deadLetters struct {
	Messages []struct {
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
		ReplayedAs    *struct {
			MessageID string `json:"messageId"`
			Offset    uint64 `json:"offset"`
		} `json:"replayedAs,omitempty"`
	} `json:"messages"`
}
