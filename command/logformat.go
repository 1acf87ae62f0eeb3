package command

import (
	"errors"
	"fmt"
)

// LogFormat numbers the versions of the raft log's encoding. A binary
// decodes every format up to MaxLogFormat; the leader encodes entries in
// the cluster's format (store.Meta.LogFormat), which it raises only once
// every member runs a binary that reads the new one. So a rolling upgrade
// never hands a not-yet-upgraded node an entry it cannot read.
//
// A change to an entry's layout, or a new command type, raises the format:
// the new layout gets a new command type (old types stay decodable for
// ever, for the entries already in logs and snapshots), the command's
// encodeAs writes the older layout for clusters below the new format, and
// a command type that did not exist before declares it in since. The
// golden corpus in testdata/corpus holds entries of every format.
type LogFormat uint32

// Log formats.
const (
	// LogFormat1 is the format of release v0.1.0: commands 1–22, with KV,
	// transaction, timers and tick entries as JSON (types 17–20).
	LogFormat1 LogFormat = 1
	// LogFormat2 writes those four in the binary codec (types 23–26),
	// adds SetLogFormat (27), AlterTopic (28), DeleteRecords (29), the
	// Kafka transaction entries (30–33, 35) and Compact (34), CreateTopic may
	// carry compaction settings, and node registrations carry the format
	// the node reads.
	LogFormat2 LogFormat = 2
	// LogFormat3 adds no command type: it changes what an HTTP push
	// stores. Each partition a push entry reaches gets one segment record
	// and one index pointer for all its messages (as a Kafka batch has),
	// and the dedup records it files share one expiry index entry. A node
	// of format 2 could not read those records, hence the format.
	LogFormat3 LogFormat = 3
	// LogFormat4 adds no command type either: an HTTP push appends the
	// transactionIds it stores to a dedup log (a segment stream per dedup
	// window) instead of writing a badger record per id. A node of format
	// 3 would not find them there, hence the format.
	LogFormat4 LogFormat = 4
	// LogFormat5 adds no command type: a Kafka produce entry's batches
	// stay in the raft log, and the queue's segment gets a ref to each
	// (store.BatchRef) instead of a copy. A node of format 4 could not
	// read the refs, nor the snapshots that carry their batches.
	LogFormat5 LogFormat = 5
	// LogFormat6 adds SaveClassicGroup (42): classic Kafka consumer
	// groups' membership is recorded, and deleting a group's offsets
	// removes it.
	LogFormat6 LogFormat = 6
	// LogFormat7 adds AlterGroupConfig (43): configs of Kafka's GROUP
	// config resource, kept per group; and Kafka share groups'
	// ShareAcquire (44) and ShareAck (45).
	LogFormat7 LogFormat = 7
	// LogFormat8 adds no command type: AlterTopic and CreateTopic may
	// name the topic configs in format8Configs (compression, timestamps,
	// min.insync.replicas, max.compaction.lag.ms and the rest of Kafka's
	// list), which a format 7 state machine refuses.
	LogFormat8 LogFormat = 8
	// LogFormat9 adds EndTxnBump (46): Kafka's transaction version 2
	// (KIP-890 part 2), whose EndTxn moves the producer to a new epoch.
	LogFormat9 LogFormat = 9
	// LogFormat10 adds AlterACLs (47): Kafka ACL bindings, consulted by
	// the authorizer beside the principals' roles.
	LogFormat10 LogFormat = 10
	// LogFormat11 adds ShareAcquireShared (48): share group members
	// acquire records of a partition beside each other's leases, and may
	// read uncommitted; a cursor then holds several leases, which a format
	// 10 node could not read.
	LogFormat11 LogFormat = 11
	// LogFormat12 adds SetReplicas (49): group 0 records which nodes
	// replicate each data group, so replicas can move.
	LogFormat12 LogFormat = 12

	// MaxLogFormat is the newest format this binary reads and writes.
	MaxLogFormat = LogFormat12
)

// Command is an entry the leader proposes.
type Command interface {
	// Encode returns the entry in MaxLogFormat.
	Encode() []byte
}

// olderLayout is a command whose entry reads differently at format 1:
// encodeAs writes it for a cluster at that format.
type olderLayout interface {
	encodeAs(f LogFormat) []byte
}

// newCommand is a command type that formats below since cannot read.
type newCommand interface {
	since() LogFormat
}

// ErrLogFormatTooOld answers a command the cluster's log format cannot carry
// yet: a member still runs a binary that would not read it.
var ErrLogFormatTooOld = errors.New("command: the cluster's log format is too old for this command (a rolling upgrade is not finished)")

// EncodeAs returns cmd's entry for a cluster at log format f.
func EncodeAs(cmd Command, f LogFormat) ([]byte, error) {
	if n, ok := cmd.(newCommand); ok && f < n.since() {
		return nil, fmt.Errorf("%w: needs format %d, cluster at %d", ErrLogFormatTooOld, n.since(), f)
	}
	// Every older layout is format 1's: format 2 gave those commands
	// their binary layout, and no later format changed an entry's.
	if o, ok := cmd.(olderLayout); ok && f < LogFormat2 {
		return o.encodeAs(f), nil
	}
	return cmd.Encode(), nil
}

// SetLogFormatCommand raises the cluster's log format. The leader proposes
// it once every member reports reading Format (so, unlike other new
// command types, it needs no since: it is itself the step); lowering is
// ignored.
type SetLogFormatCommand struct {
	Format LogFormat
}

// Encode returns the raft entry for the command.
func (c *SetLogFormatCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdSetLogFormat))
	e.uvarint(uint64(c.Format))
	return e.b
}

func decodeSetLogFormat(b []byte) (*SetLogFormatCommand, error) {
	d := decoder{b: b}
	c := &SetLogFormatCommand{Format: LogFormat(d.uvarint())}
	return c, d.finish()
}
