package command

// OffsetCommit is one partition's position in a CommitOffsetsCommand or a
// DeleteOffsetsCommand (where only Topic and Partition matter).
type OffsetCommit struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// CommitOffsetsCommand stores a consumer group's committed offsets.
type CommitOffsetsCommand struct {
	NowMs   int64
	Group   string
	Offsets []OffsetCommit
}

// DeleteOffsetsCommand forgets a group's committed offsets: the listed
// ones, or the whole group (cursors, leases, subscriptions) when All is set.
type DeleteOffsetsCommand struct {
	Group   string
	All     bool
	Offsets []OffsetCommit
}

// minOffsetCommitSize is the fewest bytes one encoded OffsetCommit takes.
const minOffsetCommitSize = 5

func encodeOffsets(e *encoder, offsets []OffsetCommit) {
	e.uvarint(uint64(len(offsets)))
	for _, o := range offsets {
		e.string(o.Topic)
		e.varint(int64(o.Partition))
		e.varint(o.Offset)
		e.varint(int64(o.LeaderEpoch))
		e.string(o.Metadata)
	}
}

func decodeOffsets(d *decoder) []OffsetCommit {
	out := make([]OffsetCommit, d.count(minOffsetCommitSize))
	for i := range out {
		out[i] = OffsetCommit{Topic: d.string(), Partition: int32(d.varint()), Offset: d.varint(),
			LeaderEpoch: int32(d.varint()), Metadata: d.string()}
	}
	return out
}

// Encode returns the raft entry for the command.
func (c *CommitOffsetsCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdCommitOffsets))
	e.varint(c.NowMs)
	e.string(c.Group)
	encodeOffsets(&e, c.Offsets)
	return e.b
}

func decodeCommitOffsets(b []byte) (*CommitOffsetsCommand, error) {
	d := decoder{b: b}
	c := &CommitOffsetsCommand{NowMs: d.varint(), Group: d.string()}
	c.Offsets = decodeOffsets(&d)
	return c, d.finish()
}

// Encode returns the raft entry for the command.
func (c *DeleteOffsetsCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdDeleteOffsets))
	e.string(c.Group)
	if c.All {
		e.byte(1)
	} else {
		e.byte(0)
	}
	encodeOffsets(&e, c.Offsets)
	return e.b
}

func decodeDeleteOffsets(b []byte) (*DeleteOffsetsCommand, error) {
	d := decoder{b: b}
	c := &DeleteOffsetsCommand{Group: d.string(), All: d.byte() == 1}
	c.Offsets = decodeOffsets(&d)
	return c, d.finish()
}
