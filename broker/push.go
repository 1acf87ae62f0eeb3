package broker

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/waggle-mq/waggle/dedup"
	"github.com/waggle-mq/waggle/raftfsm"
)

// MaxPushItems bounds the items of one push, which become one raft entry.
const MaxPushItems = 10_000

// PushItem is one message to push.
type PushItem struct {
	Queue         string
	Partition     string // empty: DefaultPartition
	TransactionID string // empty: the message id, so never deduplicated
	Payload       []byte // a JSON document
}

// Push statuses, as the HTTP API spells them.
const (
	StatusQueued    = "queued"
	StatusDuplicate = "duplicate"
	StatusError     = "error"
)

// PushResult answers one pushed item.
type PushResult struct {
	Index         int
	MessageID     string
	TransactionID string
	Queue         string
	Partition     string
	Status        string
	Offset        uint64 // meaningful for queued and duplicate
	Error         string // for StatusError
}

// Push stores the items in one raft entry and answers each in request
// order. A transactionId seen in the item's (queue, partition) inside the
// queue's dedup window, or earlier in the same request, stores nothing and
// answers duplicate with the original message id and offset. An item that
// breaks a per-item rule answers error and the others go on; a request
// that is malformed as a whole returns ErrInvalid and writes nothing.
func (s *Service) Push(items []PushItem) ([]PushResult, error) {
	if len(items) == 0 {
		return nil, fmt.Errorf("%w: items is empty", ErrInvalid)
	}
	if len(items) > MaxPushItems {
		return nil, fmt.Errorf("%w: %d items; at most %d in one push", ErrInvalid, len(items), MaxPushItems)
	}
	results := make([]PushResult, len(items))
	cmd := raftfsm.PushCommand{NowMs: s.now().UnixMilli(), Items: make([]raftfsm.PushItem, 0, len(items))}
	cmdIndex := make([]int, 0, len(items)) // cmd.Items[j] answers results[cmdIndex[j]]

	for i, it := range items {
		if err := validateQueueName(it.Queue); err != nil {
			return nil, fmt.Errorf("items[%d]: %w", i, err)
		}
		part, err := partitionName(it.Partition)
		if err != nil {
			return nil, fmt.Errorf("items[%d]: %w", i, err)
		}
		if it.Payload == nil {
			return nil, fmt.Errorf("items[%d]: %w: payload is required", i, ErrInvalid)
		}
		results[i] = PushResult{Index: i, TransactionID: it.TransactionID, Queue: it.Queue, Partition: part}
		if len(it.TransactionID) > dedup.MaxIDBytes {
			results[i].Status = StatusError
			results[i].Error = fmt.Sprintf("transactionId is %d bytes; at most %d", len(it.TransactionID), dedup.MaxIDBytes)
			results[i].TransactionID = ""
			continue
		}
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("mint message id: %w", err)
		}
		if it.TransactionID == "" {
			results[i].TransactionID = id.String()
		}
		cmd.Items = append(cmd.Items, raftfsm.PushItem{
			Queue:         it.Queue,
			Partition:     part,
			TransactionID: results[i].TransactionID,
			MessageID:     id,
			Payload:       it.Payload,
		})
		cmdIndex = append(cmdIndex, i)
	}
	if len(cmd.Items) == 0 {
		return results, nil
	}

	answer, err := s.apply(cmd.Encode())
	if err != nil {
		return nil, err
	}
	for j, r := range answer.([]raftfsm.PushResult) {
		res := &results[cmdIndex[j]]
		res.MessageID = uuid.UUID(r.MessageID).String()
		res.Offset = r.Offset
		switch r.Status {
		case raftfsm.PushQueued:
			res.Status = StatusQueued
		case raftfsm.PushDuplicate:
			res.Status = StatusDuplicate
		default:
			res.Status, res.Error, res.MessageID = StatusError, r.Error, ""
		}
	}
	return results, nil
}
