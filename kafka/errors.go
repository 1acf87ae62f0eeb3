package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/recordbatch"
)

// outcomeCode maps a broker topic outcome to a Kafka error code.
func outcomeCode(o command.TopicOutcome) int16 {
	switch o {
	case command.TopicOK:
		return 0
	case command.TopicExists:
		return kerr.TopicAlreadyExists.Code
	case command.TopicUnknown, command.TopicUnknownPartition:
		return kerr.UnknownTopicOrPartition.Code
	case command.TopicInvalidPartitions:
		return kerr.InvalidPartitions.Code
	case command.SequenceOutOfOrder:
		return kerr.OutOfOrderSequenceNumber.Code
	case command.ProducerFenced:
		return kerr.InvalidProducerEpoch.Code
	case command.TopicInvalidConfig:
		return kerr.InvalidConfig.Code
	case command.OffsetOutOfRange:
		return kerr.OffsetOutOfRange.Code
	case command.TxnInvalidState:
		return kerr.InvalidTxnState.Code
	case command.TxnUnknownProducer:
		return kerr.InvalidProducerIDMapping.Code
	case command.TxnInvalidTimeout:
		return kerr.InvalidTransactionTimeout.Code
	case command.TxnTooLarge:
		return kerr.InvalidRequest.Code
	case command.TxnNotAttempted:
		return kerr.OperationNotAttempted.Code
	default:
		return kerr.UnknownServerError.Code
	}
}

// errCode maps an error from the broker or the batch codec to a Kafka
// error code. Leadership trouble answers NOT_LEADER_OR_FOLLOWER, which
// makes clients refresh metadata and retry on the new leader; an unknown
// outcome does too (a retried idempotent batch is recognised, KIP-98).
func errCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, broker.ErrNotLeader), errors.Is(err, broker.ErrOutcomeUnknown):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, broker.ErrStorageFull):
		return kerr.KafkaStorageError.Code // retriable: the producer retries until space is freed
	case errors.Is(err, recordbatch.ErrCorrupt):
		return kerr.CorruptMessage.Code
	case errors.Is(err, recordbatch.ErrInvalidRecord):
		return kerr.InvalidRecord.Code
	case errors.Is(err, broker.ErrInvalid), errors.Is(err, broker.ErrUpgradeInProgress):
		return kerr.InvalidRequest.Code
	default:
		return kerr.UnknownServerError.Code
	}
}
