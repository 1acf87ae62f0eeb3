package fsm

import (
	"errors"
	"math"
	"slices"
	"strconv"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

func (p *Processor) initTxnProducer(tx *store.Tx, meta *store.Meta, c *command.InitTxnProducerCommand) command.TxnProducerResult {
	if c.TimeoutMs <= 0 || c.TimeoutMs > command.MaxTxnTimeoutMs {
		return command.TxnProducerResult{Outcome: command.TxnInvalidTimeout, ProducerID: -1, Epoch: -1}
	}
	st, err := tx.Txn(c.TransactionalID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		st = store.TxnState{TransactionalID: c.TransactionalID, ProducerID: newID(meta), Status: store.TxnEmpty}
	case err != nil:
		must(err)
	default:
		if c.ProducerID >= 0 {
			retry := st.Prev != nil && *st.Prev == store.TxnProducer{ID: c.ProducerID, Epoch: c.Epoch}
			switch {
			case retry && st.Status != store.TxnOngoing:
				// The call that made the current epoch, retried: its
				// answer is lost, so it is given again (KIP-360).
				return command.TxnProducerResult{Outcome: command.TopicOK, ProducerID: st.ProducerID, Epoch: st.Epoch}
			case c.ProducerID != st.ProducerID || c.Epoch != st.Epoch:
				return command.TxnProducerResult{Outcome: command.ProducerFenced, ProducerID: -1, Epoch: -1}
			}
		}
		if st.Status == store.TxnOngoing {
			p.endTxn(tx, meta, &st, false)
		}
		bumpEpoch(tx, meta, &st)
	}
	st.TimeoutMs, st.UpdatedMs = c.TimeoutMs, meta.ClockMs
	must(tx.PutTxn(st))
	return command.TxnProducerResult{Outcome: command.TopicOK, ProducerID: st.ProducerID, Epoch: st.Epoch}
}

// bumpEpoch moves a transactional id to its next epoch, or to a new
// producer id once the epochs run out, remembering the pair it leaves.
func bumpEpoch(tx *store.Tx, meta *store.Meta, st *store.TxnState) {
	st.Prev, st.PrevEnded = &store.TxnProducer{ID: st.ProducerID, Epoch: st.Epoch}, false
	if st.Epoch < math.MaxInt16-1 {
		st.Epoch++
		return
	}
	must(tx.ForgetTxnProducer(st.ProducerID))
	st.ProducerID, st.Epoch = newID(meta), 0
}

func newID(meta *store.Meta) int64 {
	id := int64(meta.NextID)
	meta.NextID++
	return id
}

// txnFor loads a transactional id's state for a call from producerID at
// epoch; a non-OK outcome refuses the call.
func txnFor(tx *store.Tx, id string, producerID int64, epoch int16) (store.TxnState, command.TopicOutcome) {
	st, err := tx.Txn(id)
	if errors.Is(err, store.ErrNotFound) {
		return st, command.TxnUnknownProducer
	}
	must(err)
	switch {
	case producerID != st.ProducerID:
		return st, command.TxnUnknownProducer
	case epoch != st.Epoch:
		return st, command.ProducerFenced
	}
	return st, command.TopicOK
}

func (p *Processor) addToTxn(tx *store.Tx, meta *store.Meta, c *command.AddToTxnCommand) command.AddToTxnResult {
	res := command.AddToTxnResult{Partitions: make([]command.TopicOutcome, len(c.Partitions))}
	st, outcome := txnFor(tx, c.TransactionalID, c.ProducerID, c.Epoch)
	if outcome != command.TopicOK {
		return refuseAll(res, outcome)
	}
	failed := false
	for i, tp := range c.Partitions {
		res.Partitions[i] = kafkaPartitionExists(tx, tp.Topic, tp.Partition)
		failed = failed || res.Partitions[i] != command.TopicOK
	}
	if failed { // all or nothing, as Kafka does
		for i := range res.Partitions {
			if res.Partitions[i] == command.TopicOK {
				res.Partitions[i] = command.TxnNotAttempted
			}
		}
		res.Outcome = command.TxnNotAttempted
		return res
	}
	parts := slices.Clone(st.Partitions)
	for _, tp := range c.Partitions {
		if !slices.Contains(parts, tp) {
			parts = append(parts, tp)
		}
	}
	groups := slices.Clone(st.Groups)
	for _, g := range c.Groups {
		if !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	if len(parts) > command.MaxTxnPartitions || len(groups) > command.MaxTxnGroups {
		return refuseAll(res, command.TxnTooLarge)
	}
	for _, g := range groups[len(st.Groups):] {
		must(tx.PutTxnGroup(g, st.TransactionalID))
	}
	st.Partitions, st.Groups = parts, groups
	if st.Status != store.TxnOngoing {
		st.Status, st.StartMs = store.TxnOngoing, meta.ClockMs
		must(tx.PutTxnDue(st.StartMs+int64(st.TimeoutMs), st.TransactionalID))
	}
	st.UpdatedMs = meta.ClockMs
	must(tx.PutTxn(st))
	return res
}

func refuseAll(res command.AddToTxnResult, outcome command.TopicOutcome) command.AddToTxnResult {
	res.Outcome = outcome
	for i := range res.Partitions {
		res.Partitions[i] = outcome
	}
	return res
}

// kafkaPartitionExists checks that a topic has the partition.
func kafkaPartitionExists(tx *store.Tx, topic string, partition int32) command.TopicOutcome {
	q, err := tx.Queue(topic)
	if errors.Is(err, store.ErrNotFound) {
		return command.TopicUnknown
	}
	must(err)
	if partition < 0 || partition >= max(q.KafkaPartitions, 1) {
		return command.TopicUnknownPartition
	}
	return command.TopicOK
}

// txnOffsetCommit answers one outcome per offset.
func (p *Processor) txnOffsetCommit(tx *store.Tx, meta *store.Meta, c *command.TxnOffsetCommitCommand) []command.TopicOutcome {
	out := make([]command.TopicOutcome, len(c.Offsets))
	fill := func(o command.TopicOutcome) []command.TopicOutcome {
		for i := range out {
			out[i] = o
		}
		return out
	}
	st, outcome := txnFor(tx, c.TransactionalID, c.ProducerID, c.Epoch)
	switch {
	case outcome != command.TopicOK:
		return fill(outcome)
	case st.Status != store.TxnOngoing || !slices.Contains(st.Groups, c.Group):
		return fill(command.TxnInvalidState) // AddOffsetsToTxn comes first
	}
	staged := slices.Clone(st.Offsets)
	for i, o := range c.Offsets {
		if out[i] = kafkaPartitionExists(tx, o.Topic, o.Partition); out[i] != command.TopicOK {
			continue
		}
		to := store.TxnOffset{Group: c.Group, Topic: o.Topic, Partition: o.Partition, Offset: o.Offset,
			LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
		j := slices.IndexFunc(staged, func(s store.TxnOffset) bool {
			return s.Group == to.Group && s.Topic == to.Topic && s.Partition == to.Partition
		})
		if j >= 0 {
			staged[j] = to
		} else {
			staged = append(staged, to)
		}
	}
	if len(staged) > command.MaxOffsetsPerEntry {
		return fill(command.TxnTooLarge)
	}
	st.Offsets, st.UpdatedMs = staged, meta.ClockMs
	must(tx.PutTxn(st))
	return out
}

func (p *Processor) endTxnCommand(tx *store.Tx, meta *store.Meta, c *command.EndTxnCommand) command.TopicOutcome {
	st, outcome := txnFor(tx, c.TransactionalID, c.ProducerID, c.Epoch)
	if outcome != command.TopicOK {
		return outcome
	}
	if c.TimedOut {
		// The leader saw it expire; by the replicated clock it must have.
		if st.Status != store.TxnOngoing || meta.ClockMs < st.StartMs+int64(st.TimeoutMs) || c.Commit {
			return command.TxnInvalidState
		}
		p.endTxn(tx, meta, &st, false)
		bumpEpoch(tx, meta, &st) // fence the producer that let it expire
		must(tx.PutTxn(st))
		return command.TopicOK
	}
	switch st.Status {
	case store.TxnOngoing:
		p.endTxn(tx, meta, &st, c.Commit)
		must(tx.PutTxn(st))
		return command.TopicOK
	case store.TxnCompleteCommit, store.TxnCompleteAbort:
		if (st.Status == store.TxnCompleteCommit) == c.Commit {
			return command.TopicOK // a retry of the call that ended it
		}
	}
	return command.TxnInvalidState
}

// endTxnBump ends a transaction as endTxnCommand does and moves the id to
// its next epoch (transaction version 2). The retry of a call that went
// through comes from the epoch before (st.Prev, left by such a call) and
// is answered again; the other direction from there is INVALID_TXN_STATE,
// as Kafka answers it.
func (p *Processor) endTxnBump(tx *store.Tx, meta *store.Meta, c *command.EndTxnBumpCommand) command.TxnProducerResult {
	refuse := func(o command.TopicOutcome) command.TxnProducerResult {
		return command.TxnProducerResult{Outcome: o, ProducerID: -1, Epoch: -1}
	}
	st, outcome := txnFor(tx, c.TransactionalID, c.ProducerID, c.Epoch)
	ended := st.Status == store.TxnCompleteCommit || st.Status == store.TxnCompleteAbort
	if outcome != command.TopicOK {
		if !st.PrevEnded || *st.Prev != (store.TxnProducer{ID: c.ProducerID, Epoch: c.Epoch}) || !ended {
			return refuse(outcome)
		}
		if (st.Status == store.TxnCompleteCommit) != c.Commit {
			return refuse(command.TxnInvalidState)
		}
		return command.TxnProducerResult{Outcome: command.TopicOK, ProducerID: st.ProducerID, Epoch: st.Epoch}
	}
	switch {
	case st.Status == store.TxnOngoing:
		p.endTxn(tx, meta, &st, c.Commit)
	case c.Commit:
		return refuse(command.TxnInvalidState) // nothing to commit
	default:
		st.Status, st.UpdatedMs = store.TxnCompleteAbort, meta.ClockMs // an empty abort: only the epoch moves
	}
	bumpEpoch(tx, meta, &st)
	st.PrevEnded = true
	must(tx.PutTxn(st))
	return command.TxnProducerResult{Outcome: command.TopicOK, ProducerID: st.ProducerID, Epoch: st.Epoch}
}

// endTxn writes the transaction's marker on every partition it wrote to,
// records an abort's range for read_committed readers, commits the staged
// offsets of a commit, and leaves st complete (the caller stores it).
func (p *Processor) endTxn(tx *store.Tx, meta *store.Meta, st *store.TxnState, commit bool) {
	for _, tp := range st.Partitions {
		q, err := tx.Queue(tp.Topic)
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted since: nothing left to mark
		}
		must(err)
		part, err := tx.Partition(q.ID, strconv.Itoa(int(tp.Partition)))
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		must(err)
		first, open, err := tx.OpenTxn(part.ID, st.ProducerID)
		must(err)
		if !open {
			continue // added, never written to: no marker needed
		}
		marker := part.NextOffset
		raw := recordbatch.BuildControl(int64(marker), st.ProducerID, st.Epoch, commit, meta.ClockMs)
		must(tx.PutBatch(q, part.ID, marker, 1, meta.ClockMs, meta.NextID, meta.ClockMs, raw))
		part.NextOffset++
		must(tx.PutPartition(part))
		must(tx.DeleteOpenTxn(part.ID, st.ProducerID))
		if !commit {
			must(tx.PutAbortedTxn(part.ID, store.AbortedTxn{ProducerID: st.ProducerID, FirstOffset: first, LastOffset: marker}))
			// Two stale ranges go for every new one, so ranges below the
			// log start never pile up.
			_, err := tx.PruneAbortedTxns(part.ID, part.StartOffset, 2)
			must(err)
		}
		p.appended = append(p.appended, part.ID, q.ID)
	}
	for _, g := range st.Groups {
		must(tx.DeleteTxnGroup(g, st.TransactionalID))
	}
	must(tx.DeleteTxnDue(st.StartMs+int64(st.TimeoutMs), st.TransactionalID))
	if commit {
		for _, g := range groupsOf(st.Offsets) {
			var offsets []command.OffsetCommit
			for _, o := range st.Offsets {
				if o.Group == g {
					offsets = append(offsets, command.OffsetCommit{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset,
						LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata})
				}
			}
			p.commitOffsets(tx, meta, &command.CommitOffsetsCommand{NowMs: meta.ClockMs, Group: g, Offsets: offsets})
		}
		st.Status = store.TxnCompleteCommit
	} else {
		st.Status = store.TxnCompleteAbort
	}
	st.Partitions, st.Groups, st.Offsets, st.StartMs, st.UpdatedMs = nil, nil, nil, 0, meta.ClockMs
}

// groupsOf lists the groups of staged offsets in first-staged order.
func groupsOf(offsets []store.TxnOffset) []string {
	var out []string
	for _, o := range offsets {
		if !slices.Contains(out, o.Group) {
			out = append(out, o.Group)
		}
	}
	return out
}

// checkTxnBatch decides a transactional batch of producerID at epoch to
// topic's partition: the producer's transaction must be in progress with
// the partition added (AddPartitionsToTxn).
func checkTxnBatch(tx *store.Tx, topic string, partition int32, producerID int64, epoch int16) command.TopicOutcome {
	id, found, err := tx.TxnOfProducer(producerID)
	must(err)
	if !found {
		return command.TxnUnknownProducer
	}
	st, outcome := txnFor(tx, id, producerID, epoch)
	switch {
	case outcome != command.TopicOK:
		return outcome
	case st.Status != store.TxnOngoing || !slices.Contains(st.Partitions, store.TxnPartition{Topic: topic, Partition: partition}):
		return command.TxnInvalidState
	}
	return command.TopicOK
}

// forgetTxns answers how many ids it forgot.
func (p *Processor) forgetTxns(tx *store.Tx, meta *store.Meta, c *command.ForgetTxnsCommand) int {
	n := 0
	for _, id := range c.IDs {
		st, err := tx.Txn(id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		must(err)
		if command.TxnExpired(st, meta.ClockMs) {
			must(tx.DeleteTxn(st))
			n++
		}
	}
	return n
}
