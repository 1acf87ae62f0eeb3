package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/cespare/xxhash/v2"
	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/waggle-mq/waggle/dedup"
	"github.com/waggle-mq/waggle/segment"
)

// ErrNotFound is returned by lookups of a row that does not exist.
var ErrNotFound = errors.New("store: not found")

// Store is waggle's replicated state on disk.
type Store struct {
	dir    string
	db     *badger.DB
	segs   *segment.Dir
	refs   *refData // the batches kept in the raft log (refs.go)
	behind error    // see DataBehind

	// pruneFrom is where PruneDedup starts (see pruneFloor): no live key
	// of the dedup expiry index lies before it. It is not state: a store
	// opened, reset or restored starts from the index's first key.
	pruneMu   sync.Mutex
	pruneFrom []byte

	// catalog is every queue record as of the last commit (catalog.go);
	// catalogMu pairs it with the badger snapshot a transaction opens.
	catalogMu sync.RWMutex
	catalog   *catalog

	// filters spare a push the badger read for a new transactionId
	// (dedupfilter.go); a cache, not state.
	filters *dedupFilters

	// dedup indexes the dedup logs (dedupindex.go); derived, not state.
	dedup *dedupIndex

	aclGen aclGeneration // see ACLGeneration
}

// Open opens (or creates) the badger database in dir, with message data in
// segment files under dir/segments, and cuts every segment stream back to
// the point its index was committed.
//
// Writes are not fsynced: the raft log is the durable record, and after a
// crash the state machine replays every entry past the applied index kept
// in the store (see package fsm).
//
// Badger's warnings and errors go to logger when one is given (else to
// badger's own logger on stderr).
func Open(dir string, logger ...Logger) (*Store, error) {
	opts := badger.DefaultOptions(dir).
		WithLoggingLevel(badger.WARNING).
		WithSyncWrites(false).
		WithDetectConflicts(false). // the state machine is the only writer
		// Badger holds metadata and indexes only (message data is in
		// segment files): small memtables and caches keep its memory
		// bounded (the defaults reserve 5 x 64 MB memtables and a 256 MB
		// block cache). 32 MB also bounds one write batch (15 %: 4.8 MB,
		// else "Txn is too big"), which a raft entry's keys must fit.
		WithMemTableSize(32 << 20).
		WithNumMemtables(3).
		WithBlockCacheSize(32 << 20).
		// Two compactors, badger's least, not its four: on a 2-core node four
		// concurrent compactions fought the apply loop and held ~140 MB of
		// table buffers, so the GC ran near the memory limit. 2 M HTTP
		// pushes (16 clients x 100 x 256 B): 44k -> 55-61k msg/s, the last
		// third 22k -> 38-45k, 34 -> 23-26 us of server CPU a message, peak
		// RSS 590 -> 544-564 MiB.
		WithNumCompactors(2).
		// Tables of 2 MB on every level, not doubling to 64 MB on the
		// last. Badger builds a table whole in memory (its blocks raw and
		// compressed), in buffers it pools and keeps while busy; a
		// compaction into a deep level, and the stream writer restoring
		// a snapshot (16 tables at once), built 64 MB tables in 128 MB
		// buffers. A million-partition soak's nodes held 1-1.5 GB of them
		// and passed 1 GB of RSS; a wiped follower's restore peaked at 655
		// MiB of anonymous memory, 405 MiB now.
		WithBaseTableSize(2 << 20).
		// A damaged block or value is refused when read, never served.
		WithChecksumVerificationMode(options.OnBlockRead).
		WithVerifyValueChecksum(true)
	opts.TableSizeMultiplier = 1 // no With method for it
	var log Logger
	if len(logger) > 0 && logger[0] != nil {
		log = logger[0]
		opts = opts.WithLogger(log)
	}
	if err := removeEmptyLogs(dir); err != nil {
		return nil, err
	}
	db, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("open badger at %s: %w", dir, err)
	}
	segs, err := segment.Open(filepath.Join(dir, "segments"))
	if err != nil {
		db.Close()
		return nil, err
	}
	s := &Store{dir: dir, db: db, segs: segs, refs: newRefData(segs), filters: newDedupFilters(db), dedup: newDedupIndex(filepath.Join(dir, dedupIndexDirName), log)}
	segs.OnFault(s.segmentFault)
	// Links of snapshots that were never written out (a crash meanwhile).
	os.RemoveAll(filepath.Join(segs.Root(), pinDirName))
	if err := s.recoverStreams(); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.loadCatalog(); err != nil {
		s.Close()
		return nil, err
	}
	// A store whose data came back shorter than its index (DataBehind) is
	// restored before it serves, and the restore builds the dedup index.
	if s.behind == nil {
		if err := s.loadDedupIndex(); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.filters.rebuild()
	return s, nil
}

// Logger receives badger's log lines (badger.Logger's methods).
type Logger interface {
	Errorf(format string, args ...any)
	Warningf(format string, args ...any)
	Infof(format string, args ...any)
	Debugf(format string, args ...any)
}

// Size reports badger's on-disk sizes: the LSM tree and the value log.
func (s *Store) Size() (lsm, vlog int64) { return s.db.Size() }

// ErrDirGone is Close's answer when the store's directory no longer exists.
var ErrDirGone = errors.New("store: the data directory is gone")

// Close closes the segment files and the database. When the store's
// directory is gone (deleted or unmounted under a running node), badger's
// Close would try to flush its memtable into it forever: there is nothing
// left to flush into, so the store is abandoned and ErrDirGone returned.
func (s *Store) Close() error {
	s.filters.close() // no build reads badger from here on, abandoned or not
	s.dedup.wait()
	if _, err := os.Stat(s.dir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", ErrDirGone, s.dir)
	}
	return errors.Join(s.segs.Close(), s.db.Close())
}

// SyncData fsyncs the message data appended so far (the active segments;
// sealed ones were fsynced when sealed).
func (s *Store) SyncData() error { return s.segs.SyncAll() }

// BeginWrite starts a read-write transaction. The caller commits or
// discards it.
func (s *Store) BeginWrite() *Tx {
	s.catalogMu.RLock()
	defer s.catalogMu.RUnlock()
	return &Tx{txn: s.db.NewTransaction(true), db: s.db, segs: s.segs, refs: s.refs, store: s, catalog: s.catalog}
}

// View runs fn inside a read-only transaction: a consistent point-in-time
// view of the state.
func (s *Store) View(fn func(tx *Tx) error) error {
	if s.db.IsClosed() {
		return badger.ErrDBClosed // as db.View: a new transaction would wait for ever
	}
	s.catalogMu.RLock()
	txn := s.db.NewTransaction(false)
	cat := s.catalog
	s.catalogMu.RUnlock()
	defer txn.Discard()
	return fn(&Tx{txn: txn, segs: s.segs, refs: s.refs, catalog: cat})
}

// Tx is a badger transaction with waggle's typed reads and writes.
type Tx struct {
	txn           *badger.Txn
	db            *badger.DB // set on write transactions
	segs          *segment.Dir
	refs          *refData // reads the batches refs name
	pendingWrites int
	pendingBytes  int // approximate

	// writeSum sums the hashes of the writes made (digest.go).
	writeSum uint64
	digest   xxhash.Digest

	heads       map[uint64]*streamHead // streams this transaction appended to
	afterCommit []func() error         // file removals, once the commit stands
	aclWrite    bool                   // the transaction changed the ACLs
	committed   bool

	store *Store      // set on write transactions
	prune *pruneFloor // the store's pruneFrom as this transaction moves it

	// catalog is the store's queue records as of this transaction's
	// snapshot (nil: read badger), and queueWrites the records this
	// transaction wrote since (nil: deleted), which the commit adds.
	catalog     *catalog
	queueWrites map[string]*Queue

	// dedupKeys are the hashes of the dedup record keys this transaction
	// set, for the store's filters once it commits (see dedupFilters.add).
	dedupKeys []uint64

	// dedupNew are the ids this transaction wrote to the dedup logs, for
	// its own lookups, and dedupEvents its changes to the logs, for the
	// store's index once it commits.
	dedupNew    map[dedupName]dedup.Entry
	dedupEvents []dedupEvent
	// dedupDrained: a prune found the expiry index empty.
	dedupDrained bool

	// batch is the message batch this transaction read last, whole, so
	// that reading its messages one offset at a time (acks, say) reads
	// and decodes the record once. Any write of a message key drops it.
	batch *cachedBatch
}

// cachedBatch is a message batch (Entry.Messages) of a partition.
type cachedBatch struct {
	partitionID uint64
	entry       Entry
}

// holding returns the cached batch's entry when it holds offset of the
// partition.
func (c *cachedBatch) holding(partitionID, offset uint64) (Entry, bool) {
	if c == nil || c.partitionID != partitionID || offset < c.entry.Offset || offset >= c.entry.Offset+uint64(c.entry.Count) {
		return Entry{}, false
	}
	return c.entry, true
}

// Pending reports how many writes the transaction holds and roughly how many
// bytes they take; callers use it to commit before badger's per-transaction
// limits (about 100,000 writes or 9.6 MB with the default options).
func (t *Tx) Pending() (writes, bytes int) { return t.pendingWrites, t.pendingBytes }

// Commit writes the appended message data to the segment files, then the
// transaction, then removes the files the transaction dropped.
func (t *Tx) Commit() error {
	if err := t.flushStreams(); err != nil {
		return err
	}
	if err := t.commitTxn(); err != nil {
		return err
	}
	t.committed = true
	if len(t.dedupEvents) > 0 {
		t.store.dedup.apply(t.dedupEvents)
	}
	if len(t.dedupKeys) > 0 {
		t.store.filters.add(true, t.dedupKeys...)
		t.store.filters.maybeRebuild()
	} else if t.dedupDrained {
		t.store.filters.drained()
	}
	if t.prune != nil && t.prune.moved {
		t.store.pruneMu.Lock()
		t.store.pruneFrom = t.prune.from
		t.store.pruneMu.Unlock()
	}
	// Best effort: files left behind belong to no stream head, and opening
	// the store removes them.
	for _, fn := range t.afterCommit {
		fn()
	}
	return nil
}

// Discard drops the transaction, and the message data it appended; safe
// after Commit.
func (t *Tx) Discard() {
	if !t.committed && t.heads != nil {
		t.unwindStreams()
	}
	t.txn.Discard()
}

func (t *Tx) set(k, v []byte) error {
	if k[0] == familyMessage {
		t.batch = nil
	}
	t.pendingWrites++
	t.pendingBytes += len(k) + len(v) + 32
	t.noteWrite(writeSet, k, v)
	return t.txn.Set(k, v)
}

func (t *Tx) del(k []byte) error {
	if k[0] == familyMessage {
		t.batch = nil
	}
	t.pendingWrites++
	t.pendingBytes += len(k) + 32
	t.noteWrite(writeDelete, k, nil)
	return t.txn.Delete(k)
}

// get returns the value at k, or ErrNotFound.
func (t *Tx) get(k []byte) ([]byte, error) {
	item, err := t.txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return item.ValueCopy(nil)
}

// Meta returns the state machine's bookkeeping; a new store has the zero Meta
// with NextID 1.
func (t *Tx) Meta() (Meta, error) {
	b, err := t.get(metaKey())
	if errors.Is(err, ErrNotFound) {
		return Meta{NextID: 1}, nil
	}
	if err != nil {
		return Meta{}, err
	}
	m, err := decodeMeta(b)
	if err != nil {
		return m, err
	}
	switch f, err := t.get(logFormatKey()); {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return m, err
	case len(f) != 4:
		return m, errBadRecord
	default:
		m.LogFormat = binary.BigEndian.Uint32(f)
	}
	return m, t.readDigest(&m)
}

// PutMeta writes the bookkeeping record and the state digest (all of
// Meta but LogFormat).
func (t *Tx) PutMeta(m Meta) error {
	if err := t.set(metaKey(), m.encode()); err != nil {
		return err
	}
	return t.set(digestKey(), m.encodeDigest())
}

// PutLogFormat records the raft log format the cluster writes (see
// Meta.LogFormat).
func (t *Tx) PutLogFormat(f uint32) error {
	return t.set(logFormatKey(), binary.BigEndian.AppendUint32(nil, f))
}

// commitTxn commits the badger transaction and, when it wrote queue
// records, swaps in the catalog with them while no transaction opens.
func (t *Tx) commitTxn() error {
	if len(t.queueWrites) == 0 {
		return t.txn.Commit()
	}
	// The state machine is the only writer, so the next catalog can be
	// built before the lock: only the commit and the swap hold it.
	t.store.catalogMu.RLock()
	next := t.store.catalog.with(t.queueWrites)
	t.store.catalogMu.RUnlock()
	t.store.catalogMu.Lock()
	defer t.store.catalogMu.Unlock()
	if err := t.txn.Commit(); err != nil {
		return err
	}
	t.store.catalog = next
	return nil
}

// noteQueue records a queue record this transaction wrote (nil: deleted).
func (t *Tx) noteQueue(name string, q *Queue) {
	if t.queueWrites == nil {
		t.queueWrites = map[string]*Queue{}
	}
	t.queueWrites[name] = q
}

// Queue returns the named queue, or ErrNotFound.
func (t *Tx) Queue(name string) (Queue, error) {
	if q, written := t.queueWrites[name]; written {
		if q == nil {
			return Queue{}, ErrNotFound
		}
		return q.clone(), nil
	}
	if t.catalog != nil {
		if q, ok := t.catalog.queue(name); ok {
			return q, nil
		}
		return Queue{}, ErrNotFound
	}
	b, err := t.get(queueKey(name))
	if err != nil {
		return Queue{}, err
	}
	return decodeQueue(b)
}

// PutQueue creates or replaces a queue record.
func (t *Tx) PutQueue(q Queue) error {
	if err := t.set(queueByIDKey(q.ID), []byte(q.Name)); err != nil {
		return err
	}
	if err := t.set(queueKey(q.Name), q.encode()); err != nil {
		return err
	}
	c := q.clone()
	t.noteQueue(q.Name, &c)
	return nil
}

// QueueByID returns a queue by its numeric id, or ErrNotFound.
func (t *Tx) QueueByID(id uint64) (Queue, error) {
	if t.catalog != nil && len(t.queueWrites) == 0 {
		if q, ok := t.catalog.queueByID(id); ok {
			return q, nil
		}
		return Queue{}, ErrNotFound
	}
	name, err := t.get(queueByIDKey(id))
	if err != nil {
		return Queue{}, err
	}
	return t.Queue(string(name))
}

// QueueByTopicID returns the queue whose Kafka topic id (Queue.TopicID)
// is id, or ErrNotFound.
func (t *Tx) QueueByTopicID(id [16]byte) (Queue, error) {
	if t.catalog != nil && len(t.queueWrites) == 0 {
		if q, ok := t.catalog.queueByTopicID(id); ok {
			return q, nil
		}
		return Queue{}, ErrNotFound
	}
	qs, err := t.Queues()
	for _, q := range qs {
		if q.TopicID() == id {
			return q, nil
		}
	}
	if err == nil {
		err = ErrNotFound
	}
	return Queue{}, err
}

// PartitionByID returns a partition by its numeric id, or ErrNotFound.
func (t *Tx) PartitionByID(id uint64) (Partition, error) { return t.partitionByID(id) }

// Queues lists every queue in name order.
func (t *Tx) Queues() ([]Queue, error) { return t.QueuesAfter("", math.MaxInt) }

// QueuesAfter lists up to limit queues in name order, from the one after
// the named queue ("": from the first).
func (t *Tx) QueuesAfter(after string, limit int) ([]Queue, error) {
	if t.catalog != nil && len(t.queueWrites) == 0 {
		return t.catalog.after(after, limit), nil
	}
	var out []Queue
	var seek []byte
	if after != "" {
		seek = append(queueKey(after), 0)
	}
	err := t.scan(queuePrefix(), seek, func(_, v []byte) (bool, error) {
		q, err := decodeQueue(v)
		if err != nil {
			return false, err
		}
		out = append(out, q)
		return len(out) < limit, nil
	})
	return out, err
}

// Node returns a registered node, or ErrNotFound.
func (t *Tx) Node(id string) (Node, error) {
	b, err := t.get(nodeKey(id))
	if err != nil {
		return Node{}, err
	}
	return decodeJSONRecord[Node](b)
}

// PutNode registers or updates a node's addresses.
func (t *Tx) PutNode(n Node) error { return t.set(nodeKey(n.ID), encodeJSONRecord(n)) }

// DeleteNode forgets a node.
func (t *Tx) DeleteNode(id string) error { return t.del(nodeKey(id)) }

// Nodes lists the registered nodes in id order (as strings).
func (t *Tx) Nodes() ([]Node, error) {
	var out []Node
	err := t.scan(nodePrefix(), nil, func(_, v []byte) (bool, error) {
		n, err := decodeJSONRecord[Node](v)
		out = append(out, n)
		return err == nil, err
	})
	return out, err
}

// PutLease indexes a lease id to the cursor holding it.
func (t *Tx) PutLease(id, group string, queueID uint64, partition string) error {
	return t.set(leaseKey(id), cursorKey(group, queueID, partition))
}

// DeleteLease drops a lease id from the index.
func (t *Tx) DeleteLease(id string) error { return t.del(leaseKey(id)) }

// PutDeadLetter stores a dead letter under its id.
func (t *Tx) PutDeadLetter(d DeadLetter) error {
	return t.set(deadLetterKey(d.ID), encodeJSONRecord(d))
}

// DeleteDeadLetter removes a dead letter.
func (t *Tx) DeleteDeadLetter(id uint64) error { return t.del(deadLetterKey(id)) }

// DeadLetterByID returns a dead letter, or ErrNotFound.
func (t *Tx) DeadLetterByID(id uint64) (DeadLetter, error) {
	b, err := t.get(deadLetterKey(id))
	if err != nil {
		return DeadLetter{}, err
	}
	return decodeJSONRecord[DeadLetter](b)
}

// DeadLetters lists up to limit dead letters in id order, those of one
// queue when queueID is not zero (it reads the others to skip them).
func (t *Tx) DeadLetters(queueID uint64, limit int) ([]DeadLetter, error) {
	var out []DeadLetter
	err := t.scan([]byte{familyDeadLetter}, nil, func(_, v []byte) (bool, error) {
		d, err := decodeJSONRecord[DeadLetter](v)
		if err != nil {
			return false, err
		}
		if queueID == 0 || d.QueueID == queueID {
			out = append(out, d)
		}
		return len(out) < limit, nil
	})
	return out, err
}

// Producer returns a Kafka producer's state on a partition; found is false
// when there is none.
func (t *Tx) Producer(producerID int64, partitionID uint64) (st dedup.ProducerState, found bool, err error) {
	b, err := t.get(producerKey(producerID, partitionID))
	if errors.Is(err, ErrNotFound) {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	st, err = decodeProducer(b)
	return st, err == nil, err
}

// PutProducer stores a Kafka producer's state on a partition.
func (t *Tx) PutProducer(producerID int64, partitionID uint64, st dedup.ProducerState) error {
	return t.set(producerKey(producerID, partitionID), encodeProducer(st))
}

// Partition returns a queue's partition by name, or ErrNotFound.
func (t *Tx) Partition(queueID uint64, name string) (Partition, error) {
	b, err := t.get(partitionKey(queueID, name))
	if err != nil {
		return Partition{}, err
	}
	if len(b) != 8 {
		return Partition{}, errBadRecord
	}
	return t.partitionByID(beUint64(b))
}

func (t *Tx) partitionByID(id uint64) (Partition, error) {
	b, err := t.get(partMetaKey(id))
	if err != nil {
		return Partition{}, err
	}
	return decodePartitionMeta(id, b)
}

// CreatePartition writes a new partition and its name entry.
func (t *Tx) CreatePartition(p Partition) error {
	if err := t.set(partitionKey(p.QueueID, p.Name), appendUint64(nil, p.ID)); err != nil {
		return err
	}
	return t.PutPartition(p)
}

// PutPartition updates a partition's offsets.
func (t *Tx) PutPartition(p Partition) error {
	return t.set(partMetaKey(p.ID), p.encodeMeta())
}

// Partitions lists a queue's partitions in name order.
func (t *Tx) Partitions(queueID uint64) ([]Partition, error) {
	return t.PartitionsAfter(queueID, "", math.MaxInt)
}

// PartitionsAfter lists up to limit of a queue's partitions in name order,
// from the one after the named partition ("": from the first).
func (t *Tx) PartitionsAfter(queueID uint64, after string, limit int) ([]Partition, error) {
	var out []Partition
	prefix := partitionPrefix(queueID)
	seek := prefix
	if after != "" {
		seek = append(partitionKey(queueID, after), 0)
	}
	err := t.scan(prefix, seek, func(_, v []byte) (bool, error) {
		if len(v) != 8 {
			return false, errBadRecord
		}
		p, err := t.partitionByID(beUint64(v))
		out = append(out, p)
		return err == nil && len(out) < limit, err
	})
	return out, err
}

// PutMessage stores a message at its offset in a partition of q; its
// timestamp is the replicated time of the append.
func (t *Tx) PutMessage(q Queue, partitionID uint64, m Message) error {
	body := m.appendTo(recordBody(partitionID, m.Offset, m.encodedSize()))
	return t.appendData(q, partitionID, m.Offset, body, 1, m.TimestampMs, m.AppendSeq, m.TimestampMs)
}

// PutMessages stores the messages one push entry appended to a partition of
// q, at consecutive offsets from msgs[0]'s, with msgs[0]'s time and append
// sequence: one segment record and one pointer for all of them (log format
// 3), where PutMessage writes one of each per message.
func (t *Tx) PutMessages(q Queue, partitionID uint64, msgs []Message) error {
	first := msgs[0]
	body := appendMessageBatch(recordBody(partitionID, first.Offset, messageBatchSize(msgs)), msgs)
	return t.appendData(q, partitionID, first.Offset, body, uint32(len(msgs)), first.TimestampMs, first.AppendSeq, first.TimestampMs)
}

// PutBatch stores a Kafka record batch covering count offsets from base in
// a partition of q, appended at appendMs (replicated time). raw must
// already carry base as its first offset.
func (t *Tx) PutBatch(q Queue, partitionID, base uint64, count uint32, maxTimestampMs int64, appendSeq uint64, appendMs int64, raw []byte) error {
	body := appendBatch(recordBody(partitionID, base, 21+len(raw)), count, maxTimestampMs, appendSeq, raw)
	return t.appendData(q, partitionID, base, body, count, maxTimestampMs, appendSeq, appendMs)
}

// Entries reads a partition's entries from offset on: the entry holding
// from (a batch may start before it), then the ones after, stopping after
// maxCount entries or once maxBytes are collected. The first entry is
// always returned, however large, so a reader cannot get stuck behind an
// entry larger than its limit.
func (t *Tx) Entries(partitionID, from uint64, maxBytes, maxCount int) ([]Entry, error) {
	return t.entries(partitionID, from, maxBytes, maxCount, true)
}

// EntryHeads lists up to maxCount entries of a partition from offset from
// on as the index holds them: offsets, counts, times, no body (a message
// batch is one entry). EntryBodies reads one's body.
func (t *Tx) EntryHeads(partitionID, from uint64, maxCount int) ([]Entry, error) {
	return t.entries(partitionID, from, math.MaxInt, maxCount, false)
}

// EntryBodies reads the body of an entry EntryHeads listed: the entry
// whole, or a message batch's messages, one entry each.
func (t *Tx) EntryBodies(partitionID uint64, head Entry) ([]Entry, error) {
	e := head // stored inline: the body is there
	if head.ptr != nil {
		var err error
		if e, err = t.pointed(partitionID, head.Offset, *head.ptr); err != nil {
			return nil, err
		}
	}
	if e.Messages == nil {
		return []Entry{e}, nil
	}
	out := make([]Entry, len(e.Messages))
	for i := range e.Messages {
		out[i] = messageEntry(e, i)
	}
	return out, nil
}

// entries is Entries; without bodies, the entries carry only what the
// index holds (offsets, count, times) and no segment is read.
func (t *Tx) entries(partitionID, from uint64, maxBytes, maxCount int, bodies bool) ([]Entry, error) {
	prefix := messageKey(partitionID, 0)[:9]
	start := messageKey(partitionID, from)
	// The entry holding from is the last one whose first offset is <= from.
	rev := t.txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
	rev.Seek(start)
	if rev.Valid() {
		start = rev.Item().KeyCopy(nil)
	}
	rev.Close()

	var out []Entry
	size := 0
	err := t.scan(prefix, start, func(k, v []byte) (bool, error) {
		_, off, err := parseMessageKey(k)
		if err != nil {
			return false, err
		}
		e, err := t.indexEntry(partitionID, off, v, false)
		if err != nil {
			return false, err
		}
		if off+uint64(e.Count) <= from {
			return true, nil // the entry before from, when none holds it
		}
		if len(out) > 0 && size+e.Size() > maxBytes {
			return false, nil
		}
		if bodies && e.ptr != nil {
			if e, err = t.pointed(partitionID, off, *e.ptr); err != nil {
				return false, err
			}
		}
		if e.Messages == nil {
			out = append(out, e)
			size += e.Size()
			return len(out) < maxCount, nil
		}
		// A message batch reads as one entry per message, from from on.
		for i := range e.Messages {
			m := messageEntry(e, i)
			if m.Offset < from {
				continue
			}
			if len(out) > 0 && size+m.Size() > maxBytes {
				return false, nil
			}
			out = append(out, m)
			size += m.Size()
			if len(out) == maxCount {
				return false, nil
			}
		}
		return true, nil
	})
	return out, err
}

// messageEntry is message i of a message batch as an entry of its own.
func messageEntry(batch Entry, i int) Entry {
	m := &batch.Messages[i]
	return Entry{Offset: m.Offset, Count: 1, MaxTimestampMs: m.TimestampMs, AppendSeq: m.AppendSeq, Message: m}
}

// pointed reads the entry a pointer names, keeping a message batch in the
// transaction's cache (see Tx.batch).
func (t *Tx) pointed(partitionID, offset uint64, p pointer) (Entry, error) {
	if e, ok := t.batch.holding(partitionID, offset); ok && e.Offset == offset {
		return e, nil
	}
	e, err := t.readPointed(partitionID, offset, p)
	if err == nil && e.Messages != nil {
		t.batch = &cachedBatch{partitionID: partitionID, entry: e}
	}
	return e, err
}

// indexEntry decodes a message key's value: an entry stored inline (by
// older binaries) or a pointer into a segment, read when body is set.
func (t *Tx) indexEntry(partitionID, offset uint64, v []byte, body bool) (Entry, error) {
	if len(v) == 0 || v[0] != kindPointer {
		return decodeEntry(offset, v)
	}
	p, err := decodePointer(v)
	if err != nil {
		return Entry{}, err
	}
	if body {
		return t.pointed(partitionID, offset, p)
	}
	return Entry{Offset: offset, Count: p.count, MaxTimestampMs: p.maxTimestampMs, AppendSeq: p.appendSeq, ptr: &p}, nil
}

// EntryAt returns the entry holding offset: a direct read when an entry
// starts there (every HTTP message does), else the batch around it; found
// is false when no entry holds it (a gap, say, that compaction or
// retention left).
// Direct reads matter inside the state machine: a badger iterator on a
// write transaction first sorts all the transaction's pending writes.
func (t *Tx) EntryAt(partitionID, offset uint64) (Entry, bool, error) {
	return t.entryAt(partitionID, offset, true)
}

func (t *Tx) entryAt(partitionID, offset uint64, body bool) (Entry, bool, error) {
	if e, ok := t.batch.holding(partitionID, offset); ok && body {
		return messageEntry(e, int(offset-e.Offset)), true, nil
	}
	b, err := t.get(messageKey(partitionID, offset))
	if err == nil {
		e, err := t.indexEntry(partitionID, offset, b, body)
		if err == nil && e.Messages != nil {
			e = messageEntry(e, 0)
		}
		return e, err == nil, err
	}
	if !errors.Is(err, ErrNotFound) {
		return Entry{}, false, err
	}
	// entries starts at the entry holding offset, or at the next one when
	// none holds it (offset in a gap): that one is not found.
	entries, err := t.entries(partitionID, offset, 1, 1, body)
	if err != nil || len(entries) == 0 || entries[0].Offset > offset || entries[0].Offset+uint64(entries[0].Count) <= offset {
		return Entry{}, false, err
	}
	return entries[0], true, nil
}

// EntryAtOrAfter is EntryAt as it was up to log format 1: for an offset no
// entry holds it answers the next entry, if any. State machines applying
// entries of that format use it, so every binary applies them alike.
func (t *Tx) EntryAtOrAfter(partitionID, offset uint64) (Entry, bool, error) {
	return t.entryAtOrAfter(partitionID, offset, true)
}

func (t *Tx) entryAtOrAfter(partitionID, offset uint64, body bool) (Entry, bool, error) {
	if e, found, err := t.entryAt(partitionID, offset, body); found || err != nil {
		return e, found, err
	}
	entries, err := t.entries(partitionID, offset, 1, 1, body)
	if err != nil || len(entries) == 0 || entries[0].Offset+uint64(entries[0].Count) <= offset {
		return Entry{}, false, err
	}
	return entries[0], true, nil
}

// FirstEntryAtOrAfter finds the first entry of a partition whose newest
// record is at or after tsMs (found is false when none is).
func (t *Tx) FirstEntryAtOrAfter(p Partition, tsMs int64) (e Entry, found bool, err error) {
	for from := p.StartOffset; from < p.NextOffset; {
		entries, err := t.entries(p.ID, from, 4<<20, 1000, false)
		if err != nil || len(entries) == 0 {
			return Entry{}, false, err
		}
		for _, e := range entries {
			if e.MaxTimestampMs >= tsMs {
				if e.ptr != nil {
					e, err = t.pointed(p.ID, e.Offset, *e.ptr)
				}
				if err == nil && e.Messages != nil {
					e = messageEntry(e, 0) // all its messages have one time
				}
				return e, err == nil, err
			}
		}
		last := entries[len(entries)-1]
		from = last.Offset + uint64(last.Count)
	}
	return Entry{}, false, nil
}

// Dedup returns the dedup record of a transactionId in a partition; found
// is false when there is none.
//
// The dedup logs (log format 4) hold every id recorded since the cluster
// reached that format, so an id found there is newer than any badger
// record of it; badger's records, written before, are read only for an id
// the logs do not hold.
func (t *Tx) Dedup(partitionID uint64, txID string) (e dedup.Entry, found bool, err error) {
	if e, ok := t.dedupNew[dedupName{partitionID, txID}]; ok {
		return e, true, nil
	}
	if t.store != nil {
		if e, found, err := t.store.dedup.lookup(t.segs, partitionID, txID); found || err != nil || t.store.filters.none() && len(t.dedupKeys) == 0 {
			return e, found, err
		}
	}
	key, hashed := dedupKey(partitionID, txID)
	if t.store != nil && !t.store.filters.mayContain(t.store.filters.hash(key)) {
		return dedup.Entry{}, false, nil // never recorded: no read
	}
	if t.store != nil {
		t.store.filters.reads.Add(1)
	}
	b, err := t.get(key)
	if errors.Is(err, ErrNotFound) {
		return dedup.Entry{}, false, nil
	}
	if err != nil {
		return dedup.Entry{}, false, err
	}
	e, storedID, _, err := decodeDedup(b)
	if err != nil {
		return dedup.Entry{}, false, err
	}
	if hashed && storedID != txID {
		return dedup.Entry{}, false, nil // a SHA-256 collision: another id's record
	}
	return e, true, nil
}

// PutDedup records a transactionId and files it in the expiry index at
// e.ExpiresAtMs. A record it replaces (one whose window has passed but
// which was not pruned yet) leaves its own index entry behind, already
// due: the next prune drops it without touching the new record. That
// keeps a push at three writes per message.
func (t *Tx) PutDedup(partitionID uint64, txID string, e dedup.Entry) error {
	key, storedID := dedupRecordKey(partitionID, txID)
	if err := t.setDedup(key, encodeDedup(e, storedID, nil)); err != nil {
		return err
	}
	ek := expiryKey(e.ExpiresAtMs, key)
	t.notePruneKey(ek)
	return t.set(ek, nil)
}

// PutDedupGroup records the transactionIds of the messages one push entry
// stored in a partition (entries[i] is ids[i]'s record, all with one
// ExpiresAtMs) and files them under one expiry index entry (log format 3):
// a push then writes one key per message, its dedup record.
func (t *Tx) PutDedupGroup(partitionID uint64, ids []string, entries []dedup.Entry) error {
	size := binary.MaxVarintLen64
	g := &dedupGroup{offset: entries[0].Offset, count: uint32(len(ids))}
	for i, id := range ids {
		key, storedID := dedupRecordKey(partitionID, id)
		if err := t.setDedup(key, encodeDedup(entries[i], storedID, g)); err != nil {
			return err
		}
		size += binary.MaxVarintLen64 + len(id)
	}
	v := make([]byte, 0, size)
	for _, id := range ids {
		v = binary.AppendUvarint(v, uint64(len(id)))
		v = append(v, id...)
	}
	ek := expiryGroupKey(entries[0].ExpiresAtMs, partitionID, g.offset, g.count)
	t.notePruneKey(ek)
	return t.set(ek, v)
}

// setDedup writes a dedup record and adds its key to the store's filters:
// now, for this transaction's own lookups, and again once it commits.
func (t *Tx) setDedup(key, record []byte) error {
	h := t.store.filters.hash(key)
	t.store.filters.add(false, h)
	t.dedupKeys = append(t.dedupKeys, h)
	return t.set(key, record)
}

// dedupRecordKey is the key of txID's dedup record and the id the record
// must end with: the whole id when the key holds only its hash.
func dedupRecordKey(partitionID uint64, txID string) (key []byte, storedID string) {
	key, hashed := dedupKey(partitionID, txID)
	if hashed {
		storedID = txID
	}
	return key, storedID
}

// notePruneKey moves the prune floor back before an expiry index key
// filed behind it.
func (t *Tx) notePruneKey(ek []byte) {
	if f := t.pruneFloor(); f != nil && f.from != nil && bytes.Compare(ek, f.from) < 0 {
		f.from, f.moved = ek, true
	}
}

// groupIDs decodes an expiry group's value: count transactionIds.
func groupIDs(v []byte, count uint32) ([]string, error) {
	if uint64(count) > uint64(len(v)) {
		return nil, errBadRecord
	}
	ids := make([]string, 0, count)
	for len(v) > 0 {
		n, w := binary.Uvarint(v)
		if w <= 0 || n > uint64(len(v)-w) {
			return nil, errBadRecord
		}
		ids = append(ids, string(v[w:w+int(n)]))
		v = v[w+int(n):]
	}
	if len(ids) != int(count) {
		return nil, errBadRecord
	}
	return ids, nil
}

// PruneDedup forgets up to limit dedup records whose expiry time is at or
// before nowMs, oldest first, and reports how many it removed: badger's
// records (each expiry group counting as its ids), then the dedup logs'
// expired segments (each counting as one; see pruneDedupLogs).
//
// Its cost does not grow with the index entries deleted before it ran,
// which badger keeps until compaction drops them: the scan counts deleted
// keys, so the entries a deleted queue left after now (up to a window
// ahead) end it like live ones, and it starts where the last prune on
// this store stopped, past the entries pruned so far. A scan of live keys
// from the index's first key walked both kinds on every prune (tens of
// milliseconds per 100,000, on the apply path, each second).
func (t *Tx) PruneDedup(nowMs int64, limit int) (int, error) {
	var due [][]byte
	records := 0 // the records due holds: a group holds several
	f := t.pruneFloor()
	var from, resume []byte
	if f != nil {
		from = f.from
	}
	err := t.scanVersions(expiryPrefix(), from, func(k []byte, deleted bool) (bool, error) {
		at, key, err := parseExpiryKey(k)
		if err != nil {
			return false, err
		}
		if at > nowMs {
			resume = append([]byte(nil), k...)
			return false, nil
		}
		if !deleted {
			due = append(due, append([]byte(nil), k...))
			records++
			if key[0] == expiryGroup {
				_, count := parseExpiryGroup(key)
				records += int(count) - 1
			}
		}
		// Everything up to k is deleted, or is about to be.
		resume = append(append(resume[:0], k...), 0)
		return records < limit, nil
	})
	if err != nil {
		return 0, err
	}
	if f != nil && resume != nil {
		f.from, f.moved = resume, true
	}
	t.dedupDrained = resume == nil && len(due) == 0
	if records < limit && t.store != nil {
		n, err := t.pruneDedupLogs(nowMs, limit-records)
		if err != nil {
			return 0, err
		}
		records += n
	}
	for _, k := range due {
		at, key, _ := parseExpiryKey(k)
		if key[0] != expiryGroup {
			if err := t.forgetDedup(key, at); err != nil {
				return 0, err
			}
		} else {
			v, err := t.get(k)
			if err != nil {
				return 0, err
			}
			partitionID, count := parseExpiryGroup(key)
			ids, err := groupIDs(v, count)
			if err != nil {
				return 0, err
			}
			for _, id := range ids {
				dk, _ := dedupKey(partitionID, id)
				if err := t.forgetDedup(dk, at); err != nil {
					return 0, err
				}
			}
		}
		if err := t.del(k); err != nil {
			return 0, err
		}
	}
	return records, nil
}

// forgetDedup deletes the dedup record at key if it is the one an expiry
// index entry at expiresAtMs filed: a record stored again since then has
// a later entry of its own, and stays.
func (t *Tx) forgetDedup(key []byte, expiresAtMs int64) error {
	b, err := t.get(key)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	e, _, _, err := decodeDedup(b)
	if err != nil {
		return err
	}
	if e.ExpiresAtMs != expiresAtMs {
		return nil
	}
	return t.del(key)
}

// pruneFloor is where a write transaction's PruneDedup starts: the
// store's pruneFrom when the transaction began, moved on by its prunes and
// back by the index entries it files before it (PutDedup), and handed back
// to the store when the transaction commits. The state machine is the one
// writer, so transactions do not race for it.
type pruneFloor struct {
	from  []byte // nil: the index's first key
	moved bool
}

// pruneFloor returns the transaction's floor, nil on a read transaction.
func (t *Tx) pruneFloor() *pruneFloor {
	if t.prune == nil && t.store != nil {
		t.store.pruneMu.Lock()
		t.prune = &pruneFloor{from: t.store.pruneFrom}
		t.store.pruneMu.Unlock()
	}
	return t.prune
}

// forgetPruneFloor makes the next prune start from the index's first key,
// for a store whose keys were replaced.
func (s *Store) forgetPruneFloor() {
	s.pruneMu.Lock()
	s.pruneFrom = nil
	s.pruneMu.Unlock()
}

// scan calls fn for each key with the prefix, from seek (or the prefix) on,
// until fn returns false or an error. Keys and values are only valid during
// the call. The iterator is limited to the prefix, so a seek never walks
// through deleted keys past it on its way to a live one.
func (t *Tx) scan(prefix, seek []byte, fn func(k, v []byte) (bool, error)) error {
	it := t.txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: false})
	defer it.Close()
	if len(seek) == 0 {
		seek = prefix
	}
	for it.Seek(seek); it.Valid(); it.Next() {
		item := it.Item()
		var more bool
		err := item.Value(func(v []byte) error {
			var err error
			more, err = fn(item.Key(), v)
			return err
		})
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// scanVersions is scan without values, with the keys deleted but not yet
// dropped by compaction among the keys (deleted is true). A scan of live
// keys skips deleted ones inside the iterator, however many lie before
// the next live key; this one lets fn stop among them.
func (t *Tx) scanVersions(prefix, seek []byte, fn func(k []byte, deleted bool) (bool, error)) error {
	it := t.txn.NewIterator(badger.IteratorOptions{Prefix: prefix, AllVersions: true})
	defer it.Close()
	if len(seek) == 0 {
		seek = prefix
	}
	var last []byte
	for it.Seek(seek); it.Valid(); it.Next() {
		item := it.Item()
		k := item.Key()
		if last != nil && bytes.Equal(k, last) {
			continue // an older version: the newest comes first
		}
		last = append(last[:0], k...)
		more, err := fn(k, item.IsDeletedOrExpired())
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// Verify opens the badger database in dir, checks every table's block
// checksums, and closes it. It is for a stopped node's start-up check.
func Verify(dir string) error {
	_, err := VerifyApplied(dir, false)
	return err
}

// VerifyApplied is Verify, also reporting the raft index the store had
// applied (what a restart re-applies from). With segments, it also reads
// every segment record up to each stream's committed end and checks it
// (Stream.Verify): the whole data, for waggle verify on demand.
func VerifyApplied(dir string, segments bool) (applied uint64, err error) {
	if err := removeEmptyLogs(dir); err != nil {
		return 0, err
	}
	db, err := badger.Open(badger.DefaultOptions(dir).WithLoggingLevel(badger.ERROR).WithDetectConflicts(false))
	if err != nil {
		return 0, fmt.Errorf("open badger at %s: %w", dir, err)
	}
	verr := db.VerifyChecksum()
	if verr == nil {
		verr = db.View(func(txn *badger.Txn) error {
			tx := &Tx{txn: txn}
			m, err := tx.Meta()
			applied = m.AppliedIndex
			if err != nil || !segments {
				return err
			}
			segs, err := segment.Open(filepath.Join(dir, "segments"))
			if err != nil {
				return err
			}
			defer segs.Close()
			return tx.eachStreamHead(func(id uint64, h streamHead) error {
				if err := segs.Stream(id).Verify(h.End); err != nil {
					return fmt.Errorf("stream %d: %w", id, err)
				}
				return nil
			})
		})
	}
	if err := db.Close(); verr == nil && err != nil {
		verr = fmt.Errorf("close badger at %s: %w", dir, err)
	}
	return applied, verr
}

// KeysByFamily counts the keys of each key family (their first byte), for
// checks and tests.
func (t *Tx) KeysByFamily() (map[byte]int, error) {
	out := map[byte]int{}
	err := t.scan(nil, nil, func(k, _ []byte) (bool, error) {
		out[k[0]]++
		return true, nil
	})
	return out, err
}

// removeEmptyLogs deletes badger's memtable and value logs (*.mem,
// *.vlog) that hold no bytes. Badger creates each and sizes it, and its
// writes are not fsynced (the raft log is the durable copy), so after a
// machine crash one may come back empty; badger then refuses to open
// ("Create a new file") although the file held nothing it had synced.
// Values are small here (under badger's value threshold), so no table
// points into a value log.
func removeEmptyLogs(dir string) error {
	for _, pattern := range []string{"*.mem", "*.vlog"} {
		logs, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return err
		}
		for _, path := range logs {
			if fi, err := os.Stat(path); err == nil && fi.Size() == 0 {
				if err := os.Remove(path); err != nil {
					return fmt.Errorf("remove the empty badger log %s: %w", path, err)
				}
			}
		}
	}
	return nil
}
