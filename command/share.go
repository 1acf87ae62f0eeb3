package command

import (
	"fmt"
	"strings"

	"github.com/waggle-mq/waggle/store"
)

// Kafka share groups (KIP-932) on the same leases as HTTP pops: a share
// consumer acquires records of a partition under a lease, acknowledges
// them by offset, and what it releases, or leaves when its lease runs out,
// is delivered again. From log format 11 members hold leases on one
// partition's records side by side; before, one lease per partition and
// group at a time, as a pop.

// ShareAcquireCommand leases up to Batch records in all, partition by
// partition in the order given, to a share group's member, each partition
// under its own lease (LeaseIDs[i] for Partitions[i], stamped by the
// leader). A record already delivered MaxDeliveries times is archived (a
// dead letter where the queue keeps them) instead of delivered again.
// A group that has not read the queue yet starts at its end with FromNew
// (share.auto.offset.reset=latest), at the first record stamped FromMs or
// later with FromMs (by_duration), else at its start (earliest).
//
// With MaxLocks set (log format 11, entry type ShareAcquireShared), a
// partition's records are acquired beside other members' live leases
// (Kafka's share-partition): the records neither finished nor held, among
// the MaxLocks from the group's position on (share.partition.max.record.locks),
// and ReadUncommitted takes records of open and aborted transactions too.
// Without it (format 7) a partition under any live lease is passed over,
// and ReadUncommitted is not written.
type ShareAcquireCommand struct {
	NowMs           int64
	Group           string
	Queue           string
	Partitions      []string
	LeaseIDs        []string
	Batch           int
	LeaseMs         int64
	MaxDeliveries   int32 // 0: no limit
	FromNew         bool
	FromMs          int64
	MaxLocks        int32
	ReadUncommitted bool
}

// ShareAcquireResult answers a ShareAcquireCommand: one pop result per
// partition that leased something (Error set when the queue is unknown).
type ShareAcquireResult struct {
	Error  string
	Leases []PopResult
}

// Share acknowledgement kinds (KIP-932 AcknowledgeType; gap is a record
// the consumer did not get, such as a transaction marker).
const (
	ShareAccept  = "accept"
	ShareRelease = "release"
	ShareReject  = "reject"
	ShareGap     = "gap"
	ShareRenew   = "renew"
)

// ShareAck acknowledges the offsets First..Last (inclusive) of the lease
// a partition is under, when Holder holds it (its id is
// ShareLeaseID(Holder, ...)), with Kind; or, with Rest, every offset of
// that lease not acknowledged yet (a session closing releases what it
// still holds). A renew keeps the lease for RenewMs more from now. Acks
// name the holder, not one lease, so a member's acks reach its leases
// whichever node took them, as Kafka's acks name the member.
type ShareAck struct {
	Queue, Partition string
	Holder           string
	First, Last      int64
	Kind             string
	Rest             bool
	RenewMs          int64
}

// ShareLeaseID is the id of a lease a share group's member holds: unique
// (the leader's id), and naming its holder.
func ShareLeaseID(holder, unique string) string { return "share:" + holder + ":" + unique }

// SharedLeaseID is the id of a lease a share group's member takes beside
// other members' leases (log format 11): ShareLeaseID's form under
// store.SharedLeasePrefix, which keeps it out of the lease index.
func SharedLeaseID(holder, unique string) string {
	return store.SharedLeasePrefix + holder + ":" + unique
}

// HeldBy reports whether lease id is one holder holds.
func HeldBy(id, holder string) bool {
	for _, prefix := range []string{"share:", store.SharedLeasePrefix} {
		if rest, ok := strings.CutPrefix(id, prefix); ok {
			return len(rest) > len(holder)+1 && rest[:len(holder)] == holder && rest[len(holder)] == ':'
		}
	}
	return false
}

// ShareAckCommand acknowledges leased records of a share group.
type ShareAckCommand struct {
	NowMs int64
	Group string
	Acks  []ShareAck
}

// ShareAckResult answers one ShareAck: Error says why none of its offsets
// changed ("" when they all did).
type ShareAckResult struct {
	Error string
}

// MaxShareAcquireBatch bounds the records one ShareAcquire leases.
const MaxShareAcquireBatch = 10_000

// MaxShareLocks bounds a ShareAcquireShared's MaxLocks (Kafka's bound on
// share.partition.max.record.locks).
const MaxShareLocks = 10_000

func (c *ShareAcquireCommand) since() LogFormat {
	if c.MaxLocks > 0 {
		return LogFormat11
	}
	return LogFormat7
}
func (c *ShareAckCommand) since() LogFormat { return LogFormat7 }

// Encode returns the raft entry for the command.
func (c *ShareAcquireCommand) Encode() []byte {
	e := encoder{}
	if c.MaxLocks > 0 {
		e.byte(byte(CmdShareAcquireShared))
	} else {
		e.byte(byte(CmdShareAcquire))
	}
	e.varint(c.NowMs)
	e.string(c.Group)
	e.string(c.Queue)
	e.uvarint(uint64(len(c.Partitions)))
	for i, p := range c.Partitions {
		e.string(p)
		e.string(c.LeaseIDs[i])
	}
	e.varint(int64(c.Batch))
	e.varint(c.LeaseMs)
	e.varint(int64(c.MaxDeliveries))
	e.bool(c.FromNew)
	e.varint(c.FromMs)
	if c.MaxLocks > 0 {
		e.varint(int64(c.MaxLocks))
		e.bool(c.ReadUncommitted)
	}
	return e.b
}

func decodeShareAcquire(b []byte) (*ShareAcquireCommand, error) {
	d := decoder{b: b}
	c := decodeShareAcquireFields(&d)
	return c, d.finish()
}

func decodeShareAcquireShared(b []byte) (*ShareAcquireCommand, error) {
	d := decoder{b: b}
	c := decodeShareAcquireFields(&d)
	c.MaxLocks, c.ReadUncommitted = int32(d.varint()), d.byte() == 1
	if d.err == nil && (c.MaxLocks < 1 || c.MaxLocks > MaxShareLocks) {
		return nil, fmt.Errorf("command: share acquire max locks %d", c.MaxLocks)
	}
	for _, id := range c.LeaseIDs {
		if store.IndexedLease(id) {
			return nil, fmt.Errorf("command: shared lease id %q lacks its prefix", id)
		}
	}
	return c, d.finish()
}

// decodeShareAcquireFields reads the fields both layouts of a share
// acquisition start with.
func decodeShareAcquireFields(d *decoder) *ShareAcquireCommand {
	c := &ShareAcquireCommand{NowMs: d.varint(), Group: d.string(), Queue: d.string()}
	n := d.count(2)
	c.Partitions, c.LeaseIDs = make([]string, n), make([]string, n)
	for i := range n {
		c.Partitions[i], c.LeaseIDs[i] = d.string(), d.string()
	}
	c.Batch, c.LeaseMs, c.MaxDeliveries, c.FromNew, c.FromMs = int(d.varint()), d.varint(), int32(d.varint()), d.byte() == 1, d.varint()
	if d.err == nil && (c.Batch < 1 || c.Batch > MaxShareAcquireBatch) {
		d.err = fmt.Errorf("command: share acquire batch %d", c.Batch)
	}
	return c
}

// Encode returns the raft entry for the command.
func (c *ShareAckCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdShareAck))
	e.varint(c.NowMs)
	e.string(c.Group)
	e.uvarint(uint64(len(c.Acks)))
	for _, a := range c.Acks {
		e.string(a.Queue)
		e.string(a.Partition)
		e.string(a.Holder)
		e.varint(a.First)
		e.varint(a.Last)
		e.string(a.Kind)
		e.bool(a.Rest)
		e.varint(a.RenewMs)
	}
	return e.b
}

func decodeShareAck(b []byte) (*ShareAckCommand, error) {
	d := decoder{b: b}
	c := &ShareAckCommand{NowMs: d.varint(), Group: d.string()}
	c.Acks = make([]ShareAck, d.count(8))
	for i := range c.Acks {
		c.Acks[i] = ShareAck{Queue: d.string(), Partition: d.string(), Holder: d.string(), First: d.varint(), Last: d.varint(),
			Kind: d.string(), Rest: d.byte() == 1, RenewMs: d.varint()}
	}
	return c, d.finish()
}
