package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/store"
)

// Kafka transactions (KIP-98): the coordinator's calls, each one raft
// entry, answered once committed and applied (see fsm/kafkatxn.go).

// MaxTransactionalIDBytes bounds a transactional id: it is a key in the
// store and travels in every transaction entry.
const MaxTransactionalIDBytes = 4096

func validateTransactionalID(id string) error {
	if id == "" || len(id) > MaxTransactionalIDBytes || !utf8.ValidString(id) {
		return fmt.Errorf("%w: a transactional id is 1 to %d bytes of UTF-8", ErrInvalid, MaxTransactionalIDBytes)
	}
	return nil
}

// InitTxnProducer gives a transactional id its producer id and a new epoch,
// aborting a transaction an earlier incarnation left open. producerID and
// epoch are the caller's current ones (KIP-360), or -1.
func (s *Service) InitTxnProducer(id string, timeoutMs int32, producerID int64, epoch int16) (command.TxnProducerResult, error) {
	if err := validateTransactionalID(id); err != nil {
		return command.TxnProducerResult{}, err
	}
	cmd := command.InitTxnProducerCommand{NowMs: s.now().UnixMilli(), TransactionalID: id, TimeoutMs: timeoutMs,
		ProducerID: producerID, Epoch: epoch}
	return apply(s, &cmd)
}

// AddToTxn adds partitions and consumer groups to a producer's transaction.
func (s *Service) AddToTxn(id string, producerID int64, epoch int16, parts []store.TxnPartition, groups []string) (command.AddToTxnResult, error) {
	if err := validateTransactionalID(id); err != nil {
		return command.AddToTxnResult{}, err
	}
	if len(parts) > command.MaxTxnPartitions || len(groups) > command.MaxTxnGroups {
		return command.AddToTxnResult{}, fmt.Errorf("%w: a transaction takes at most %d partitions and %d groups", ErrInvalid, command.MaxTxnPartitions, command.MaxTxnGroups)
	}
	for _, g := range groups {
		if err := validateGroupName(g); err != nil {
			return command.AddToTxnResult{}, err
		}
	}
	cmd := command.AddToTxnCommand{NowMs: s.now().UnixMilli(), TransactionalID: id, ProducerID: producerID, Epoch: epoch,
		Partitions: parts, Groups: groups}
	return apply(s, &cmd)
}

// TxnOffsetCommit stages a group's offsets in a producer's transaction;
// one outcome per offset.
func (s *Service) TxnOffsetCommit(id string, producerID int64, epoch int16, group string, offsets []command.OffsetCommit) ([]command.TopicOutcome, error) {
	if err := validateTransactionalID(id); err != nil {
		return nil, err
	}
	if err := validateOffsets(group, offsets); err != nil {
		return nil, err
	}
	if len(offsets) > command.MaxOffsetsPerEntry {
		return nil, fmt.Errorf("%w: at most %d offsets in one transactional commit", ErrInvalid, command.MaxOffsetsPerEntry)
	}
	cmd := command.TxnOffsetCommitCommand{NowMs: s.now().UnixMilli(), TransactionalID: id, ProducerID: producerID,
		Epoch: epoch, Group: group, Offsets: offsets}
	return apply(s, &cmd)
}

// EndTxn commits or aborts a producer's transaction.
func (s *Service) EndTxn(id string, producerID int64, epoch int16, commit bool) (command.TopicOutcome, error) {
	if err := validateTransactionalID(id); err != nil {
		return 0, err
	}
	cmd := command.EndTxnCommand{NowMs: s.now().UnixMilli(), TransactionalID: id, ProducerID: producerID, Epoch: epoch, Commit: commit}
	return apply(s, &cmd)
}

// EndTxnBump commits or aborts the producer's transaction and moves it to
// its next epoch, which the answer carries (Kafka's transaction version
// 2; log format 9, ErrUpgradeInProgress before).
func (s *Service) EndTxnBump(id string, producerID int64, epoch int16, commit bool) (command.TxnProducerResult, error) {
	if err := validateTransactionalID(id); err != nil {
		return command.TxnProducerResult{}, err
	}
	cmd := command.EndTxnBumpCommand{NowMs: s.now().UnixMilli(), TransactionalID: id, ProducerID: producerID, Epoch: epoch, Commit: commit}
	return apply(s, &cmd)
}

// Now is the time the leader stamps into entries.
func (s *Service) Now() time.Time { return s.now() }

// Txns lists up to limit transactional ids' states in id order, from the
// one after the named id ("": from the first), from this node's store.
func (s *Service) Txns(after string, limit int) ([]store.TxnState, error) {
	var out []store.TxnState
	err := s.store.View(func(tx *store.Tx) (err error) {
		out, err = tx.TxnsAfter(after, limit)
		return err
	})
	return out, err
}

// PendingTxnOffsets lists a group's offsets staged by transactions still in
// progress.
func (s *Service) PendingTxnOffsets(group string) ([]store.TxnOffset, error) {
	var out []store.TxnOffset
	err := s.store.View(func(tx *store.Tx) (err error) {
		out, err = tx.PendingTxnOffsets(group, txnScanPage)
		return err
	})
	return out, err
}

// Txn reads one transactional id's state; found is false for an unknown id.
func (s *Service) Txn(id string) (st store.TxnState, found bool, err error) {
	err = s.store.View(func(tx *store.Tx) error {
		var err error
		st, err = tx.Txn(id)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		found = err == nil
		return err
	})
	return st, found, err
}

// ActiveProducer is a producer's state on one partition, as
// DescribeProducers reports it.
type ActiveProducer struct {
	ProducerID     int64
	Epoch          int16
	LastSequence   int32
	LastUpdateMs   int64
	TxnStartOffset int64 // -1: no transaction in progress on the partition
}

// maxProducerScan bounds the producer records one DescribeProducers reads.
const maxProducerScan = 100_000

// PartitionProducers lists the producers with state on a topic's
// partition; complete is false when there were too many to look at all.
func (s *Service) PartitionProducers(topic string, partition int32) (out []ActiveProducer, outcome command.TopicOutcome, complete bool, err error) {
	complete = true
	err = s.store.View(func(tx *store.Tx) error {
		_, p, o, err := kafkaPartition(tx, topic, partition)
		outcome = o
		if err != nil || o != command.TopicOK || p.ID == 0 {
			return err
		}
		producers, done, err := tx.PartitionProducers(p.ID, maxProducerScan)
		if err != nil {
			return err
		}
		complete = done
		for _, pp := range producers {
			ap := ActiveProducer{ProducerID: pp.ProducerID, Epoch: pp.State.Epoch, LastSequence: -1,
				LastUpdateMs: pp.State.LastUpdateMs, TxnStartOffset: -1}
			if n := len(pp.State.Batches); n > 0 {
				ap.LastSequence = pp.State.Batches[n-1].LastSeq
			}
			first, open, err := tx.OpenTxn(p.ID, pp.ProducerID)
			if err != nil {
				return err
			}
			if open {
				ap.TxnStartOffset = int64(first)
			}
			out = append(out, ap)
		}
		return nil
	})
	return out, outcome, complete, err
}

// EachTxn calls fn with every transactional id's state, in id order,
// reading a page at a time.
func (s *Service) EachTxn(fn func(store.TxnState)) error {
	for after := ""; ; {
		page, err := s.Txns(after, txnScanPage)
		if err != nil {
			return err
		}
		for _, st := range page {
			fn(st)
		}
		if len(page) < txnScanPage {
			return nil
		}
		after = page[len(page)-1].TransactionalID
	}
}

// txnScanPage is how many transactional ids the timeout check reads at once.
const txnScanPage = 1000

// abortExpiredTxns aborts, through the log, every transaction that has
// outlived its timeout (Kafka's transaction.timeout.ms), so a producer that
// died mid-transaction does not hold back read_committed readers for ever.
func (s *Service) abortExpiredTxns(log *slog.Logger) {
	now := s.now().UnixMilli()
	var due []store.TxnState
	err := s.store.View(func(tx *store.Tx) error {
		ids, err := tx.TxnsDue(now, txnScanPage)
		if err != nil {
			return err
		}
		for _, id := range ids {
			st, err := tx.Txn(id)
			if err != nil {
				return err
			}
			due = append(due, st)
		}
		return nil
	})
	if err != nil {
		log.Debug("read transactions past their timeout", "err", err)
		return
	}
	for _, st := range due {
		cmd := command.EndTxnCommand{NowMs: now, TransactionalID: st.TransactionalID, ProducerID: st.ProducerID,
			Epoch: st.Epoch, TimedOut: true}
		if _, err := apply(s, &cmd); err != nil {
			log.Debug("abort expired transaction", "id", st.TransactionalID, "err", err)
			return
		}
		log.Info("aborted a Kafka transaction past its timeout", "transactionalId", st.TransactionalID, "timeoutMs", st.TimeoutMs)
	}
}

// expireTxnIDs forgets, through the log, the transactional ids unused for
// command.TxnIDExpirationMs. It reads one page of ids per call, going
// round all of them over successive calls, so a tick's work stays bounded
// however many there are.
func (s *Service) expireTxnIDs(log *slog.Logger) {
	page, err := s.Txns(s.txnExpiryAfter, command.MaxForgetTxns)
	if err != nil {
		log.Debug("read transactional ids", "err", err)
		return
	}
	if len(page) < command.MaxForgetTxns {
		s.txnExpiryAfter = "" // back to the first id next time
	} else {
		s.txnExpiryAfter = page[len(page)-1].TransactionalID
	}
	now := s.now().UnixMilli()
	cmd := command.ForgetTxnsCommand{NowMs: now}
	for _, st := range page {
		if command.TxnExpired(st, now) {
			cmd.IDs = append(cmd.IDs, st.TransactionalID)
		}
	}
	if len(cmd.IDs) == 0 {
		return
	}
	if _, err := apply(s, &cmd); err != nil {
		log.Debug("forget expired transactional ids", "err", err)
		return
	}
	log.Info("forgot transactional ids unused for 7 days", "count", len(cmd.IDs))
}
