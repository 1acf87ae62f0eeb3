package raftfsm

import (
	"errors"
	"math"
	"slices"
	"strconv"

	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/store"
)

// Kafka transactions (KIP-98). The coordinator's state for a transactional
// id is replicated state (store.TxnState), so a transaction in progress
// survives a leader change and the new leader can end it. Ending one is a
// single entry: the markers on every partition it wrote to, the consumer
// offsets it staged, and its new state commit together, so there is no
// "prepare" phase to recover from.

// Transaction limits: one transaction touches at most MaxTxnPartitions
// partitions and MaxTxnGroups consumer groups, and stages at most
// MaxOffsetsPerEntry offsets, so the entry that ends it stays bounded.
const (
	MaxTxnPartitions = 1000
	MaxTxnGroups     = 100
	// MaxTxnTimeoutMs is Kafka's transaction.max.timeout.ms default.
	MaxTxnTimeoutMs = 900_000
)

// Transaction outcomes beyond the topic ones; the kafka package maps them.
const (
	// TxnInvalidState: the call does not fit where the transaction stands
	// (INVALID_TXN_STATE), e.g. a transactional write to a partition not
	// added to the transaction, or EndTxn with none in progress.
	TxnInvalidState TopicOutcome = iota + 64
	// TxnUnknownProducer: the producer id is not the transactional id's
	// (INVALID_PRODUCER_ID_MAPPING).
	TxnUnknownProducer
	// TxnInvalidTimeout: a timeout outside 1..MaxTxnTimeoutMs
	// (INVALID_TRANSACTION_TIMEOUT).
	TxnInvalidTimeout
	// TxnTooLarge: past MaxTxnPartitions, MaxTxnGroups or the staged
	// offsets' bound.
	TxnTooLarge
	// TxnNotAttempted: another partition of the same call was refused
	// (OPERATION_NOT_ATTEMPTED).
	TxnNotAttempted
)

// InitTxnProducerCommand gives a transactional id its producer id and a new
// epoch, fencing every earlier incarnation (KIP-98); a transaction the
// previous incarnation left open is aborted first. ProducerID and Epoch
// are the caller's current ones (KIP-360), or -1.
type InitTxnProducerCommand struct {
	NowMs           int64
	TransactionalID string
	TimeoutMs       int32
	ProducerID      int64
	Epoch           int16
}

// TxnProducerResult answers InitTxnProducerCommand.
type TxnProducerResult struct {
	Outcome    TopicOutcome
	ProducerID int64
	Epoch      int16
}

func (c *InitTxnProducerCommand) since() LogFormat { return LogFormat2 }

// Encode returns the raft entry for the command.
func (c *InitTxnProducerCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdInitTxnProducer))
	e.varint(c.NowMs)
	e.string(c.TransactionalID)
	e.varint(int64(c.TimeoutMs))
	e.varint(c.ProducerID)
	e.varint(int64(c.Epoch))
	return e.b
}

func decodeInitTxnProducer(b []byte) (*InitTxnProducerCommand, error) {
	d := decoder{b: b}
	c := &InitTxnProducerCommand{NowMs: d.varint(), TransactionalID: d.string(), TimeoutMs: int32(d.varint()),
		ProducerID: d.varint(), Epoch: int16(d.varint())}
	return c, d.finish()
}

func (p *Processor) initTxnProducer(tx *store.Tx, meta *store.Meta, c *InitTxnProducerCommand) TxnProducerResult {
	if c.TimeoutMs <= 0 || c.TimeoutMs > MaxTxnTimeoutMs {
		return TxnProducerResult{Outcome: TxnInvalidTimeout, ProducerID: -1, Epoch: -1}
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
				return TxnProducerResult{Outcome: TopicOK, ProducerID: st.ProducerID, Epoch: st.Epoch}
			case c.ProducerID != st.ProducerID || c.Epoch != st.Epoch:
				return TxnProducerResult{Outcome: ProducerFenced, ProducerID: -1, Epoch: -1}
			}
		}
		if st.Status == store.TxnOngoing {
			p.endTxn(tx, meta, &st, false)
		}
		bumpEpoch(tx, meta, &st)
	}
	st.TimeoutMs, st.UpdatedMs = c.TimeoutMs, meta.ClockMs
	must(tx.PutTxn(st))
	return TxnProducerResult{Outcome: TopicOK, ProducerID: st.ProducerID, Epoch: st.Epoch}
}

// bumpEpoch moves a transactional id to its next epoch, or to a new
// producer id once the epochs run out, remembering the pair it leaves.
func bumpEpoch(tx *store.Tx, meta *store.Meta, st *store.TxnState) {
	st.Prev = &store.TxnProducer{ID: st.ProducerID, Epoch: st.Epoch}
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

// AddToTxnCommand adds partitions (AddPartitionsToTxn) or consumer groups
// (AddOffsetsToTxn) to a producer's transaction, starting it if none is in
// progress.
type AddToTxnCommand struct {
	NowMs           int64
	TransactionalID string
	ProducerID      int64
	Epoch           int16
	Partitions      []store.TxnPartition
	Groups          []string
}

// AddToTxnResult answers AddToTxnCommand: Outcome for the whole call, and
// one outcome per partition, in order.
type AddToTxnResult struct {
	Outcome    TopicOutcome
	Partitions []TopicOutcome
}

func (c *AddToTxnCommand) since() LogFormat { return LogFormat2 }

// Encode returns the raft entry for the command.
func (c *AddToTxnCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdAddToTxn))
	e.txnProducer(c.NowMs, c.TransactionalID, c.ProducerID, c.Epoch)
	e.uvarint(uint64(len(c.Partitions)))
	for _, tp := range c.Partitions {
		e.string(tp.Topic)
		e.varint(int64(tp.Partition))
	}
	e.uvarint(uint64(len(c.Groups)))
	for _, g := range c.Groups {
		e.string(g)
	}
	return e.b
}

// txnProducer writes the fields every call of a transaction starts with.
func (e *encoder) txnProducer(nowMs int64, id string, producerID int64, epoch int16) {
	e.varint(nowMs)
	e.string(id)
	e.varint(producerID)
	e.varint(int64(epoch))
}

func (d *decoder) txnProducer() (nowMs int64, id string, producerID int64, epoch int16) {
	return d.varint(), d.string(), d.varint(), int16(d.varint())
}

func decodeAddToTxn(b []byte) (*AddToTxnCommand, error) {
	d := decoder{b: b}
	c := &AddToTxnCommand{}
	c.NowMs, c.TransactionalID, c.ProducerID, c.Epoch = d.txnProducer()
	if n := d.count(2); n > 0 {
		c.Partitions = make([]store.TxnPartition, n)
		for i := range c.Partitions {
			c.Partitions[i] = store.TxnPartition{Topic: d.string(), Partition: int32(d.varint())}
		}
	}
	if n := d.count(1); n > 0 {
		c.Groups = make([]string, n)
		for i := range c.Groups {
			c.Groups[i] = d.string()
		}
	}
	return c, d.finish()
}

// txnFor loads a transactional id's state for a call from producerID at
// epoch; a non-OK outcome refuses the call.
func txnFor(tx *store.Tx, id string, producerID int64, epoch int16) (store.TxnState, TopicOutcome) {
	st, err := tx.Txn(id)
	if errors.Is(err, store.ErrNotFound) {
		return st, TxnUnknownProducer
	}
	must(err)
	switch {
	case producerID != st.ProducerID:
		return st, TxnUnknownProducer
	case epoch != st.Epoch:
		return st, ProducerFenced
	}
	return st, TopicOK
}

func (p *Processor) addToTxn(tx *store.Tx, meta *store.Meta, c *AddToTxnCommand) AddToTxnResult {
	res := AddToTxnResult{Partitions: make([]TopicOutcome, len(c.Partitions))}
	st, outcome := txnFor(tx, c.TransactionalID, c.ProducerID, c.Epoch)
	if outcome != TopicOK {
		return refuseAll(res, outcome)
	}
	failed := false
	for i, tp := range c.Partitions {
		res.Partitions[i] = kafkaPartitionExists(tx, tp.Topic, tp.Partition)
		failed = failed || res.Partitions[i] != TopicOK
	}
	if failed { // all or nothing, as Kafka does
		for i := range res.Partitions {
			if res.Partitions[i] == TopicOK {
				res.Partitions[i] = TxnNotAttempted
			}
		}
		res.Outcome = TxnNotAttempted
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
	if len(parts) > MaxTxnPartitions || len(groups) > MaxTxnGroups {
		return refuseAll(res, TxnTooLarge)
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

func refuseAll(res AddToTxnResult, outcome TopicOutcome) AddToTxnResult {
	res.Outcome = outcome
	for i := range res.Partitions {
		res.Partitions[i] = outcome
	}
	return res
}

// kafkaPartitionExists checks that a topic has the partition.
func kafkaPartitionExists(tx *store.Tx, topic string, partition int32) TopicOutcome {
	q, err := tx.Queue(topic)
	if errors.Is(err, store.ErrNotFound) {
		return TopicUnknown
	}
	must(err)
	if partition < 0 || partition >= max(q.KafkaPartitions, 1) {
		return TopicUnknownPartition
	}
	return TopicOK
}

// TxnOffsetCommitCommand stages consumer group offsets in a transaction:
// they are committed when it commits and dropped when it aborts.
type TxnOffsetCommitCommand struct {
	NowMs           int64
	TransactionalID string
	ProducerID      int64
	Epoch           int16
	Group           string
	Offsets         []OffsetCommit
}

func (c *TxnOffsetCommitCommand) since() LogFormat { return LogFormat2 }

// Encode returns the raft entry for the command.
func (c *TxnOffsetCommitCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdTxnOffsetCommit))
	e.txnProducer(c.NowMs, c.TransactionalID, c.ProducerID, c.Epoch)
	e.string(c.Group)
	encodeOffsets(&e, c.Offsets)
	return e.b
}

func decodeTxnOffsetCommit(b []byte) (*TxnOffsetCommitCommand, error) {
	d := decoder{b: b}
	c := &TxnOffsetCommitCommand{}
	c.NowMs, c.TransactionalID, c.ProducerID, c.Epoch = d.txnProducer()
	c.Group = d.string()
	c.Offsets = decodeOffsets(&d)
	return c, d.finish()
}

// txnOffsetCommit answers one outcome per offset.
func (p *Processor) txnOffsetCommit(tx *store.Tx, meta *store.Meta, c *TxnOffsetCommitCommand) []TopicOutcome {
	out := make([]TopicOutcome, len(c.Offsets))
	fill := func(o TopicOutcome) []TopicOutcome {
		for i := range out {
			out[i] = o
		}
		return out
	}
	st, outcome := txnFor(tx, c.TransactionalID, c.ProducerID, c.Epoch)
	switch {
	case outcome != TopicOK:
		return fill(outcome)
	case st.Status != store.TxnOngoing || !slices.Contains(st.Groups, c.Group):
		return fill(TxnInvalidState) // AddOffsetsToTxn comes first
	}
	staged := slices.Clone(st.Offsets)
	for i, o := range c.Offsets {
		if out[i] = kafkaPartitionExists(tx, o.Topic, o.Partition); out[i] != TopicOK {
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
	if len(staged) > MaxOffsetsPerEntry {
		return fill(TxnTooLarge)
	}
	st.Offsets, st.UpdatedMs = staged, meta.ClockMs
	must(tx.PutTxn(st))
	return out
}

// EndTxnCommand commits or aborts a producer's transaction. The leader
// also proposes it, with TimedOut set, to abort a transaction that has
// outlived its timeout; that abort bumps the epoch, fencing the producer
// (its later calls answer PRODUCER_FENCED), as Kafka does.
type EndTxnCommand struct {
	NowMs           int64
	TransactionalID string
	ProducerID      int64
	Epoch           int16
	Commit          bool
	TimedOut        bool
}

func (c *EndTxnCommand) since() LogFormat { return LogFormat2 }

// Encode returns the raft entry for the command.
func (c *EndTxnCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdEndTxn))
	e.txnProducer(c.NowMs, c.TransactionalID, c.ProducerID, c.Epoch)
	var flags byte
	if c.Commit {
		flags |= 1
	}
	if c.TimedOut {
		flags |= 2
	}
	e.byte(flags)
	return e.b
}

func decodeEndTxn(b []byte) (*EndTxnCommand, error) {
	d := decoder{b: b}
	c := &EndTxnCommand{}
	c.NowMs, c.TransactionalID, c.ProducerID, c.Epoch = d.txnProducer()
	flags := d.byte()
	c.Commit, c.TimedOut = flags&1 != 0, flags&2 != 0
	return c, d.finish()
}

func (p *Processor) endTxnCommand(tx *store.Tx, meta *store.Meta, c *EndTxnCommand) TopicOutcome {
	st, outcome := txnFor(tx, c.TransactionalID, c.ProducerID, c.Epoch)
	if outcome != TopicOK {
		return outcome
	}
	if c.TimedOut {
		// The leader saw it expire; by the replicated clock it must have.
		if st.Status != store.TxnOngoing || meta.ClockMs < st.StartMs+int64(st.TimeoutMs) || c.Commit {
			return TxnInvalidState
		}
		p.endTxn(tx, meta, &st, false)
		bumpEpoch(tx, meta, &st) // fence the producer that let it expire
		must(tx.PutTxn(st))
		return TopicOK
	}
	switch st.Status {
	case store.TxnOngoing:
		p.endTxn(tx, meta, &st, c.Commit)
		must(tx.PutTxn(st))
		return TopicOK
	case store.TxnCompleteCommit, store.TxnCompleteAbort:
		if (st.Status == store.TxnCompleteCommit) == c.Commit {
			return TopicOK // a retry of the call that ended it
		}
	}
	return TxnInvalidState
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
			var offsets []OffsetCommit
			for _, o := range st.Offsets {
				if o.Group == g {
					offsets = append(offsets, OffsetCommit{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset,
						LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata})
				}
			}
			p.commitOffsets(tx, meta, &CommitOffsetsCommand{NowMs: meta.ClockMs, Group: g, Offsets: offsets})
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
func checkTxnBatch(tx *store.Tx, topic string, partition int32, producerID int64, epoch int16) TopicOutcome {
	id, found, err := tx.TxnOfProducer(producerID)
	must(err)
	if !found {
		return TxnUnknownProducer
	}
	st, outcome := txnFor(tx, id, producerID, epoch)
	switch {
	case outcome != TopicOK:
		return outcome
	case st.Status != store.TxnOngoing || !slices.Contains(st.Partitions, store.TxnPartition{Topic: topic, Partition: partition}):
		return TxnInvalidState
	}
	return TopicOK
}

// TxnIDExpirationMs is how long a transactional id without a transaction
// in progress is kept after its last use, in replicated time (Kafka's
// transactional.id.expiration.ms default, 7 days).
const TxnIDExpirationMs = 7 * 24 * 3600 * 1000

// MaxForgetTxns bounds the ids one ForgetTxnsCommand names.
const MaxForgetTxns = 1000

// ForgetTxnsCommand forgets transactional ids unused for
// TxnIDExpirationMs; the leader proposes it for the ids it found expired,
// and the state machine checks each again by the replicated clock. A
// producer that comes back later starts afresh with a new producer id.
type ForgetTxnsCommand struct {
	NowMs int64
	IDs   []string
}

func (c *ForgetTxnsCommand) since() LogFormat { return LogFormat2 }

// Encode returns the raft entry for the command.
func (c *ForgetTxnsCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdForgetTxns))
	e.varint(c.NowMs)
	e.uvarint(uint64(len(c.IDs)))
	for _, id := range c.IDs {
		e.string(id)
	}
	return e.b
}

func decodeForgetTxns(b []byte) (*ForgetTxnsCommand, error) {
	d := decoder{b: b}
	c := &ForgetTxnsCommand{NowMs: d.varint()}
	n := d.count(1)
	if n > MaxForgetTxns {
		return nil, errors.New("raftfsm: too many transactional ids in one forget entry")
	}
	if n > 0 {
		c.IDs = make([]string, n)
		for i := range c.IDs {
			c.IDs[i] = d.string()
		}
	}
	return c, d.finish()
}

// TxnExpired reports whether a transactional id may be forgotten at nowMs.
func TxnExpired(st store.TxnState, nowMs int64) bool {
	return st.Status != store.TxnOngoing && nowMs-st.UpdatedMs >= TxnIDExpirationMs
}

// forgetTxns answers how many ids it forgot.
func (p *Processor) forgetTxns(tx *store.Tx, meta *store.Meta, c *ForgetTxnsCommand) int {
	n := 0
	for _, id := range c.IDs {
		st, err := tx.Txn(id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		must(err)
		if TxnExpired(st, meta.ClockMs) {
			must(tx.DeleteTxn(st))
			n++
		}
	}
	return n
}
