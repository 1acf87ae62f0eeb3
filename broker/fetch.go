package broker

import (
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

// Fetch limits. One answer carries at most maxFetchBytes of payload per
// entry and maxFetchRecords records per entry.
const (
	MaxFetchEntries      = 100
	DefaultFetchMaxBytes = 1 << 20
	maxFetchBytes        = 16 << 20
	maxFetchRecords      = 10_000
)

// FetchRequest asks for one partition's messages from an offset on.
type FetchRequest struct {
	Queue     string
	Partition string // empty: DefaultPartition
	Offset    uint64
	MaxBytes  int // 0: DefaultFetchMaxBytes
}

// Record is one message as read. A message pushed over HTTP has a
// MessageID, TransactionID and a JSON Payload; a record produced over Kafka
// has FromKafka set, its Key and Headers, and its Value as Payload.
type Record struct {
	Offset        uint64
	MessageID     string
	TransactionID string
	Payload       []byte
	TimestampMs   int64

	FromKafka bool
	Key       []byte
	Headers   []RecordHeader
}

// RecordHeader is one Kafka record header.
type RecordHeader struct {
	Key   string
	Value []byte
}

// FetchResult answers one FetchRequest. Error is set (and Records empty)
// when the queue or partition does not exist.
type FetchResult struct {
	Queue         string
	Partition     string
	Records       []Record
	HighWatermark uint64 // the next offset to be written
	Error         string
}

// Fetch reads messages by offset from this node's store. It has no side
// effects; each entry is answered on its own.
func (s *Service) Fetch(reqs []FetchRequest) ([]FetchResult, error) {
	if len(reqs) == 0 {
		return nil, fmt.Errorf("%w: entries is empty", ErrInvalid)
	}
	if len(reqs) > MaxFetchEntries {
		return nil, fmt.Errorf("%w: at most %d entries in one fetch", ErrInvalid, MaxFetchEntries)
	}
	out := make([]FetchResult, len(reqs))
	for i, r := range reqs {
		if err := validateQueueName(r.Queue); err != nil {
			return nil, fmt.Errorf("entries[%d]: %w", i, err)
		}
		part, err := partitionName(r.Partition)
		if err != nil {
			return nil, fmt.Errorf("entries[%d]: %w", i, err)
		}
		if r.MaxBytes < 0 || r.MaxBytes > maxFetchBytes {
			return nil, fmt.Errorf("entries[%d]: %w: maxBytes must be between 1 and %d", i, ErrInvalid, maxFetchBytes)
		}
		reqs[i].Partition = part
		out[i] = FetchResult{Queue: r.Queue, Partition: part}
	}
	err := s.store.View(func(tx *store.Tx) error {
		for i, r := range reqs {
			if err := fetchOne(tx, r, &out[i]); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

func fetchOne(tx *store.Tx, r FetchRequest, res *FetchResult) error {
	q, err := tx.Queue(r.Queue)
	if errors.Is(err, store.ErrNotFound) {
		res.Error = "unknown queue"
		return nil
	}
	if err != nil {
		return err
	}
	p, err := tx.Partition(q.ID, res.Partition)
	if errors.Is(err, store.ErrNotFound) {
		res.Error = "unknown partition"
		return nil
	}
	if err != nil {
		return err
	}
	res.HighWatermark = p.NextOffset
	maxBytes := r.MaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultFetchMaxBytes
	}
	entries, err := tx.Entries(p.ID, r.Offset, maxBytes, maxFetchRecords)
	if err != nil {
		return err
	}
	// Records of Kafka transactions are read once committed: the read
	// stops at the last stable offset, and leaves out the markers and the
	// records of aborted transactions.
	view, err := tx.CommittedView(p)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Offset >= view.Stable {
			break
		}
		if hidden, err := view.Hidden(e); err != nil || hidden {
			if err != nil {
				return err
			}
			continue
		}
		recs, err := entryRecords(e, r.Offset)
		if err != nil {
			return err
		}
		res.Records = append(res.Records, recs...)
	}
	return nil
}

// entryRecords turns a stored entry into records, leaving out those before
// offset from (a Kafka batch may begin before it).
func entryRecords(e store.Entry, from uint64) ([]Record, error) {
	if m := e.Message; m != nil {
		return []Record{{
			Offset:        m.Offset,
			MessageID:     uuid.UUID(m.ID).String(),
			TransactionID: m.TransactionID,
			Payload:       m.Payload,
			TimestampMs:   m.TimestampMs,
		}}, nil
	}
	recs, err := recordbatch.Records(e.Batch, maxDecompressedBatch)
	if err != nil {
		return nil, fmt.Errorf("stored batch at offset %d: %w", e.Offset, err)
	}
	var out []Record
	for _, kr := range recs {
		if kr.Offset < int64(from) {
			continue
		}
		rec := Record{Offset: uint64(kr.Offset), Payload: kr.Value, TimestampMs: kr.TimestampMs, FromKafka: true, Key: kr.Key,
			TransactionID: command.KafkaRecordTxID(kr.Offset)}
		for _, h := range kr.Headers {
			rec.Headers = append(rec.Headers, RecordHeader{Key: h.Key, Value: h.Value})
		}
		out = append(out, rec)
	}
	return out, nil
}

// maxDecompressedBatch caps one stored Kafka batch decompressed for an
// HTTP reader.
const maxDecompressedBatch = 64 << 20
