package store

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/waggle-mq/waggle/recordbatch"
	"github.com/waggle-mq/waggle/segment"
)

// memRaftLog is a raft log of entries by index, entries removable.
type memRaftLog struct {
	mu      sync.Mutex
	entries map[uint64][]byte
	reads   int // EntryData calls
}

func (m *memRaftLog) EntryData(index uint64) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if d, ok := m.entries[index]; ok {
		return bytes.Clone(d), nil
	}
	return nil, ErrEntryGone
}

func (m *memRaftLog) dropBelow(index uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.entries {
		if i < index {
			delete(m.entries, i)
		}
	}
}

// refFixture writes n batches of about 4 KB as refs into partition 5 of a
// queue with 64 KiB segments, each batch inside raft entry 100+i at byte
// 7 of the entry: the segments seal by the batches' bytes, not the refs'.
type refFixture struct {
	q    Queue
	log  *memRaftLog
	raws [][]byte // as the producer sent them
}

const refEpoch = 3

func writeRefFixture(t *testing.T, s *Store, n int) refFixture {
	t.Helper()
	f := refFixture{q: Queue{ID: 1, Name: "q", SegmentBytes: MinSegmentBytes}, log: &memRaftLog{entries: map[uint64][]byte{}}}
	s.SetRaftLog(f.log)
	putQueue(t, s, f.q, uint64(2*n), 5)
	for i := range n {
		raw := recordbatch.Build(0, []recordbatch.Record{{Value: randomPayload(2000)}, {Value: randomPayload(2000)}})
		f.raws = append(f.raws, raw)
		entry := append(append(randomPayload(7), raw...), randomPayload(4)...)
		f.log.entries[uint64(100+i)] = entry
		write(t, s, func(tx *Tx) error {
			ref := BatchRef{Index: uint64(100 + i), At: 7, Length: uint32(len(raw)), Epoch: refEpoch}
			return tx.PutBatchRef(f.q, 5, uint64(2*i), 2, 1000, uint64(i), int64(1000+i), ref)
		})
	}
	return f
}

// check reads every batch back and compares it with what was produced,
// rebased to its offset and the ref's epoch.
func (f refFixture) check(t *testing.T, s *Store) {
	t.Helper()
	err := s.View(func(tx *Tx) error {
		es, err := tx.Entries(5, 0, math.MaxInt, 1000)
		if err != nil {
			return err
		}
		if len(es) != len(f.raws) {
			t.Fatalf("%d entries, want %d", len(es), len(f.raws))
		}
		for i, e := range es {
			want := recordbatch.Rebase(f.raws[i], int64(2*i), refEpoch)
			if e.Offset != uint64(2*i) || e.Count != 2 || !bytes.Equal(e.Batch, want) {
				t.Fatalf("entry %d: offset %d count %d, %d bytes; want offset %d, the batch produced (%d bytes) rebased", i, e.Offset, e.Count, len(e.Batch), 2*i, len(want))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func sealedRecords(t *testing.T, s *Store, queueID uint64) []SegmentRecord {
	t.Helper()
	var out []SegmentRecord
	err := s.View(func(tx *Tx) error {
		return tx.scan(segmentPrefix(queueID), nil, func(k, v []byte) (bool, error) {
			sr, err := decodeSegmentRecord(k, v)
			out = append(out, sr)
			return err == nil, err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestBatchRefsAreReadFromTheLogThenFromSidecars(t *testing.T) {
	s := openTest(t)
	f := writeRefFixture(t, s, 40)
	f.check(t, s)

	// 40 batches of ~4 KB in 64 KiB segments: sealed by what the refs
	// name, though the refs themselves take 65 bytes each.
	sealed := sealedRecords(t, s, f.q.ID)
	if len(sealed) < 2 {
		t.Fatalf("%d sealed segments, want the batches' bytes to seal several", len(sealed))
	}
	refs, live := uint32(0), uint64(0)
	for _, sr := range sealed {
		if sr.Refs == 0 || sr.MinRef != 100+uint64(refs) || sr.RefBytes == 0 || sr.End-sr.Base > 4096 {
			t.Fatalf("segment %+v: want its refs counted from raft index %d, and only refs in its file", sr, 100+refs)
		}
		refs += sr.Refs
		live += sr.RefBytes
	}
	hold, err := s.LogHold()
	if err != nil {
		t.Fatal(err)
	}
	var all uint64
	for _, r := range f.raws {
		all += uint64(len(r))
	}
	if hold.Floor != 100 || hold.Live != all || hold.Pin == nil || hold.Pin.Base != sealed[0].Base {
		t.Fatalf("hold %+v (pin %+v): want floor 100, %d live bytes, pinned by the first segment", hold, hold.Pin, all)
	}
	err = s.View(func(tx *Tx) error {
		n, err := tx.StreamBytes(f.q.ID)
		if err == nil && n < all {
			t.Errorf("the stream counts %d bytes, its batches alone are %d", n, all)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	// Copying the first segment's batches out moves the floor to the
	// second's first ref; the log can then lose what came before.
	if err := s.Relocate(*hold.Pin); err != nil {
		t.Fatal(err)
	}
	hold, err = s.LogHold()
	if err != nil {
		t.Fatal(err)
	}
	if want := sealed[1].MinRef; hold.Floor != want {
		t.Fatalf("floor %d after the first segment went to its sidecar, want %d", hold.Floor, want)
	}
	f.log.dropBelow(hold.Floor)
	f.check(t, s)

	// A snapshot carries every batch in sidecars: a store with no raft
	// log at all restores it and reads them all.
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if pinned, _ := s.LogHold(); pinned.Floor != hold.Floor {
		t.Fatalf("an open snapshot holds the log from %d, want %d", pinned.Floor, hold.Floor)
	}
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	sn.Release()
	other := openTest(t)
	if err := other.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	f.check(t, other)
	if h, err := other.LogHold(); err != nil || h.Floor != math.MaxUint64 {
		t.Fatalf("a restored store holds the log from %d (%v): its sidecars hold every batch", h.Floor, err)
	}
	sidecars, _ := filepath.Glob(filepath.Join(other.segs.Root(), "*", "*.ref"))
	if len(sidecars) != len(sealed)+1 {
		t.Fatalf("restored %d sidecars, want one per segment (%d)", len(sidecars), len(sealed)+1)
	}

	// Retention drops segments with their sidecars.
	if err := other.segs.Stream(f.q.ID).DropBefore(sealed[0].End); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(other.segs.Root(), "*", "*.ref")); len(left) != len(sidecars)-1 {
		t.Fatalf("%d sidecars after dropping a segment, want %d", len(left), len(sidecars)-1)
	}
}

// A damaged sidecar fails the read; it never answers other bytes.
func TestDamagedSidecarFailsTheRead(t *testing.T) {
	s := openTest(t)
	f := writeRefFixture(t, s, 20)
	hold, err := s.LogHold()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Relocate(*hold.Pin); err != nil {
		t.Fatal(err)
	}
	f.log.dropBelow(math.MaxUint64)
	path := s.segs.Stream(f.q.ID).SidecarPath(hold.Pin.Base)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-10] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	err = s.View(func(tx *Tx) error {
		_, err := tx.Entries(5, 0, math.MaxInt, 1000)
		return err
	})
	if !errors.Is(err, segment.ErrCorrupt) {
		t.Fatalf("reading past a damaged sidecar: %v, want ErrCorrupt", err)
	}
}

// Without the raft log or a sidecar a ref's batch is gone: the read says so.
func TestRefWithoutItsEntryFailsTheRead(t *testing.T) {
	s := openTest(t)
	f := writeRefFixture(t, s, 3)
	f.log.dropBelow(math.MaxUint64)
	err := s.View(func(tx *Tx) error {
		_, err := tx.Entries(5, 0, math.MaxInt, 1000)
		return err
	})
	if !errors.Is(err, ErrEntryGone) {
		t.Fatalf("reading a ref whose entry is gone: %v, want ErrEntryGone", err)
	}
}

// A push's messages keep their payloads in the raft entry: one ref spans
// them, the record keeps ids and transactionIds; they read back the same
// from the log and, copied out, from the sidecar.
func TestMessageRefsReadPayloadsFromTheEntry(t *testing.T) {
	s := openTest(t)
	log := &memRaftLog{entries: map[uint64][]byte{}}
	s.SetRaftLog(log)
	q := Queue{ID: 2, Name: "orders"}
	putQueue(t, s, q, 3, 9)
	entry := randomPayload(30)
	var msgs []Message
	var ats []uint32
	for i := range 3 {
		m := Message{Offset: uint64(i), TimestampMs: 500, TransactionID: fmt.Sprintf("tx-%d", i), AppendSeq: 4}
		m.ID[0] = byte(i + 1)
		ats = append(ats, uint32(len(entry)))
		m.Payload = []byte(fmt.Sprintf(`{"n":%d,"p":"%x"}`, i, randomPayload(20+i)))
		entry = append(append(entry, m.Payload...), randomPayload(5)...) // other fields between payloads
		msgs = append(msgs, m)
	}
	log.entries[7] = entry
	write(t, s, func(tx *Tx) error { return tx.PutMessageRefs(q, 9, msgs, 7, ats) })
	check := func() {
		t.Helper()
		err := s.View(func(tx *Tx) error {
			es, err := tx.Entries(9, 0, math.MaxInt, 100)
			if err != nil {
				return err
			}
			if len(es) != len(msgs) {
				t.Fatalf("%d entries, want %d", len(es), len(msgs))
			}
			for i, e := range es {
				m := e.Message
				if m == nil || m.Offset != msgs[i].Offset || m.ID != msgs[i].ID || m.TransactionID != msgs[i].TransactionID || !bytes.Equal(m.Payload, msgs[i].Payload) || m.TimestampMs != 500 || m.AppendSeq != 4 {
					t.Fatalf("message %d: %+v, want %+v", i, m, msgs[i])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check()
	segs, _ := filepath.Glob(filepath.Join(s.segs.Root(), "2", "*.seg"))
	for _, p := range segs {
		if b, _ := os.ReadFile(p); bytes.Contains(b, msgs[0].Payload) {
			t.Fatalf("segment %s holds a payload that the raft entry holds", p)
		}
	}
	hold, err := s.LogHold()
	if err != nil || hold.Floor != 7 || hold.Pin == nil {
		t.Fatalf("hold %+v (%v): want the entry held", hold, err)
	}
	if err := s.Relocate(*hold.Pin); err != nil {
		t.Fatal(err)
	}
	log.dropBelow(math.MaxUint64)
	check()
}

// A wide push names one raft entry from a ref in each partition it
// reaches; copying its segment to a sidecar, and a snapshot that builds
// the sidecar from the log, read that entry once, not once a partition.
func TestWidePushRefsReadTheirEntryOnce(t *testing.T) {
	s := openTest(t)
	log := &memRaftLog{entries: map[uint64][]byte{}}
	s.SetRaftLog(log)
	q := Queue{ID: 3, Name: "wide"}
	const partitions = 50
	putQueue(t, s, q, partitions, 1)
	entry := randomPayload(16)
	var payloads [][]byte
	write(t, s, func(tx *Tx) error {
		for p := range partitions {
			m := Message{TimestampMs: 500, TransactionID: fmt.Sprintf("tx-%d", p)}
			m.ID[0] = byte(p + 1)
			m.Payload = []byte(fmt.Sprintf(`"%x"`, randomPayload(24)))
			at := uint32(len(entry))
			entry = append(append(entry, m.Payload...), randomPayload(3)...)
			payloads = append(payloads, m.Payload)
			if err := tx.PutMessageRefs(q, uint64(1+p), []Message{m}, 9, []uint32{at}); err != nil {
				return err
			}
		}
		return nil
	})
	log.entries[9] = entry
	check := func(s *Store) {
		t.Helper()
		err := s.View(func(tx *Tx) error {
			for p := range partitions {
				es, err := tx.Entries(uint64(1+p), 0, math.MaxInt, 10)
				if err != nil {
					return err
				}
				if len(es) != 1 || es[0].Message == nil || !bytes.Equal(es[0].Message.Payload, payloads[p]) {
					t.Fatalf("partition %d: %d entries, want its one message", p, len(es))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	// A snapshot builds the open segment's sidecar from the log.
	log.reads = 0
	stream := snapshotOf(t, s)
	if log.reads != 1 {
		t.Fatalf("the snapshot read the entry %d times for %d refs, want once", log.reads, partitions)
	}
	other := openTest(t)
	if err := other.Restore(bytes.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	check(other)

	hold, err := s.LogHold()
	if err != nil || hold.Pin == nil {
		t.Fatalf("hold %+v (%v): want the entry held", hold, err)
	}
	log.reads = 0
	if err := s.Relocate(*hold.Pin); err != nil {
		t.Fatal(err)
	}
	if log.reads != 1 {
		t.Fatalf("relocating read the entry %d times for %d refs, want once", log.reads, partitions)
	}
	log.dropBelow(math.MaxUint64)
	check(s)
}
