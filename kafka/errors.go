package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/recordbatch"
)

// outcomeCode maps a broker topic outcome to a Kafka error code.
func outcomeCode(o broker.TopicOutcome) int16 {
	switch o {
	case broker.TopicOK:
		return 0
	case broker.TopicExists:
		return kerr.TopicAlreadyExists.Code
	case broker.TopicUnknown, broker.TopicUnknownPartition:
		return kerr.UnknownTopicOrPartition.Code
	case broker.TopicInvalidPartitions:
		return kerr.InvalidPartitions.Code
	case broker.SequenceOutOfOrder:
		return kerr.OutOfOrderSequenceNumber.Code
	case broker.ProducerFenced:
		return kerr.InvalidProducerEpoch.Code
	case broker.TopicInvalidConfig:
		return kerr.InvalidConfig.Code
	case broker.OffsetOutOfRange:
		return kerr.OffsetOutOfRange.Code
	case broker.TxnInvalidState:
		return kerr.InvalidTxnState.Code
	case broker.TxnUnknownProducer:
		return kerr.InvalidProducerIDMapping.Code
	case broker.TxnInvalidTimeout:
		return kerr.InvalidTransactionTimeout.Code
	case broker.TxnTooLarge:
		return kerr.InvalidRequest.Code
	case broker.TxnNotAttempted:
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
