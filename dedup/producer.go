package dedup

// Kafka's idempotent producer (KIP-98, KIP-360): per (producerId,
// partition) the broker remembers the producer's epoch and its last
// batches, so a resent batch is answered with its original offset instead
// of being appended twice.

// MaxProducerBatches is how many recent batches are remembered: the most a
// client keeps in flight per partition.
const MaxProducerBatches = 5

// ProducerExpirationMs is how long a producer's state lives after its last
// append, in replicated time (Kafka's producer.id.expiration.ms default).
const ProducerExpirationMs = 24 * 3600 * 1000

// ProducerBatch is one remembered batch.
type ProducerBatch struct {
	FirstSeq, LastSeq int32
	BaseOffset        int64
}

// ProducerState is the replicated state of one producer on one partition.
type ProducerState struct {
	Epoch        int16
	Batches      []ProducerBatch // oldest first, at most MaxProducerBatches
	LastUpdateMs int64
}

// SequenceVerdict is what to do with a batch.
type SequenceVerdict int

// Verdicts.
const (
	// AppendBatch: the batch is new and in order.
	AppendBatch SequenceVerdict = iota
	// DuplicateBatch: an exact resend of a remembered batch; answer its
	// original base offset and append nothing.
	DuplicateBatch
	// OutOfOrder: a sequence gap (OUT_OF_ORDER_SEQUENCE_NUMBER).
	OutOfOrder
	// StaleEpoch: an epoch older than the producer's (INVALID_PRODUCER_EPOCH).
	StaleEpoch
)

// nextSeq is the sequence after seq; sequences wrap at 2^31-1.
func nextSeq(seq int32) int32 {
	if seq == 1<<31-1 {
		return 0
	}
	return seq + 1
}

// CheckSequence decides a batch (epoch, firstSeq..lastSeq) against the
// producer's state at nowMs. found is false when there is no state, or
// expired state counts as none. For DuplicateBatch the remembered batch
// is returned.
func CheckSequence(st ProducerState, found bool, epoch int16, firstSeq, lastSeq int32, nowMs int64) (SequenceVerdict, ProducerBatch) {
	if !found || nowMs-st.LastUpdateMs > ProducerExpirationMs || len(st.Batches) == 0 {
		return AppendBatch, ProducerBatch{} // no state: any first sequence is accepted
	}
	switch {
	case epoch < st.Epoch:
		return StaleEpoch, ProducerBatch{}
	case epoch > st.Epoch:
		if firstSeq != 0 { // a new epoch starts over at sequence 0 (KIP-360)
			return OutOfOrder, ProducerBatch{}
		}
		return AppendBatch, ProducerBatch{}
	}
	for _, b := range st.Batches {
		if b.FirstSeq == firstSeq && b.LastSeq == lastSeq {
			return DuplicateBatch, b
		}
	}
	if firstSeq != nextSeq(st.Batches[len(st.Batches)-1].LastSeq) {
		return OutOfOrder, ProducerBatch{}
	}
	return AppendBatch, ProducerBatch{}
}

// Record returns the state after appending batch b under epoch at nowMs.
func (st ProducerState) Record(epoch int16, b ProducerBatch, nowMs int64) ProducerState {
	out := ProducerState{Epoch: epoch, LastUpdateMs: nowMs}
	if epoch == st.Epoch {
		out.Batches = append(out.Batches, st.Batches...)
	}
	out.Batches = append(out.Batches, b)
	if n := len(out.Batches); n > MaxProducerBatches {
		out.Batches = out.Batches[n-MaxProducerBatches:]
	}
	return out
}
