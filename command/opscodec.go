package command

// The binary layouts of log format 2 for KV, transaction, timers and tick
// entries (format 1 wrote them as JSON: legacy.go). Fields are written in
// the order below and never reordered; a field added later goes at the
// end of its command, read only when present (decoder.more).

// Flags of an encoded KVOp.
const (
	kvForever  = 1 << 0
	kvRequired = 1 << 1
	kvExpect   = 1 << 2 // an expected version follows
	kvMax      = 1 << 3 // an incr maximum follows
)

// Fewest bytes one encoded element takes (see decoder.count).
const (
	minKVOpSize    = 10
	minTimerOpSize = 7
	minTxnOpSize   = 4
)

// Encode returns the raft entry for the command.
func (c *KVCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdKV))
	e.varint(c.NowMs)
	e.kvOps(c.Ops)
	return e.b
}

func decodeKV(b []byte) (*KVCommand, error) {
	d := decoder{b: b}
	c := &KVCommand{NowMs: d.varint(), Ops: d.kvOps()}
	return c, d.finish()
}

// Encode returns the raft entry for the command.
func (c *TimersCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdTimers))
	e.varint(c.NowMs)
	e.timerOps(c.Ops)
	return e.b
}

func decodeTimers(b []byte) (*TimersCommand, error) {
	d := decoder{b: b}
	c := &TimersCommand{NowMs: d.varint(), Ops: d.timerOps()}
	return c, d.finish()
}

// Encode returns the raft entry for the command.
func (c *TickCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdTick))
	e.varint(c.NowMs)
	e.varint(int64(c.Limit))
	return e.b
}

func decodeTick(b []byte) (*TickCommand, error) {
	d := decoder{b: b}
	c := &TickCommand{NowMs: d.varint(), Limit: int(d.varint())}
	return c, d.finish()
}

// Encode returns the raft entry for the command.
func (c *TransactionCommand) Encode() []byte {
	e := encoder{}
	e.byte(byte(CmdTransaction))
	e.varint(c.NowMs)
	e.string(c.TxnID)
	e.uvarint(uint64(len(c.Ops)))
	for i := range c.Ops {
		op := &c.Ops[i]
		e.string(op.Type)
		e.string(op.Group)
		if op.Ack == nil {
			e.byte(0)
		} else {
			e.byte(1)
			e.ack(op.Ack)
		}
		e.uvarint(uint64(len(op.Items)))
		for j := range op.Items {
			e.pushItem(&op.Items[j])
		}
	}
	e.kvOps(c.KV)
	e.timerOps(c.Timers)
	return e.b
}

func decodeTransaction(b []byte) (*TransactionCommand, error) {
	d := decoder{b: b}
	c := &TransactionCommand{NowMs: d.varint(), TxnID: d.string()}
	if n := d.count(minTxnOpSize); n > 0 {
		c.Ops = make([]TxnOp, n)
	}
	for i := range c.Ops {
		op := TxnOp{Type: d.string(), Group: d.string()}
		if d.byte() == 1 {
			a := d.ack()
			op.Ack = &a
		}
		if n := d.count(minPushItemSize); n > 0 {
			op.Items = make([]PushItem, n)
		}
		for j := range op.Items {
			op.Items[j] = d.pushItem()
		}
		c.Ops[i] = op
	}
	c.KV, c.Timers = d.kvOps(), d.timerOps()
	return c, d.finish()
}

func (e *encoder) kvOps(ops []KVOp) {
	e.uvarint(uint64(len(ops)))
	for i := range ops {
		op := &ops[i]
		e.string(op.Op)
		e.string(op.NS)
		e.string(op.Key)
		e.uvarint(uint64(len(op.Keys)))
		for _, k := range op.Keys {
			e.string(k)
		}
		e.string(op.Prefix)
		e.string(op.After)
		e.varint(int64(op.Limit))
		e.bytes(op.Value)
		e.varint(op.TTLSeconds)
		var flags byte
		if op.Forever {
			flags |= kvForever
		}
		if op.Required {
			flags |= kvRequired
		}
		if op.Expect != nil {
			flags |= kvExpect
		}
		if op.Max != nil {
			flags |= kvMax
		}
		e.byte(flags)
		if op.Expect != nil {
			e.varint(*op.Expect)
		}
		if op.Max != nil {
			e.varint(*op.Max)
		}
	}
}

func (d *decoder) kvOps() []KVOp {
	n := d.count(minKVOpSize)
	if n == 0 {
		return nil
	}
	ops := make([]KVOp, n)
	for i := range ops {
		op := KVOp{Op: d.string(), NS: d.string(), Key: d.string()}
		if k := d.count(1); k > 0 {
			op.Keys = make([]string, k)
			for j := range op.Keys {
				op.Keys[j] = d.string()
			}
		}
		op.Prefix, op.After, op.Limit = d.string(), d.string(), int(d.varint())
		op.Value, op.TTLSeconds = d.optionalBytes(), d.varint()
		flags := d.byte()
		op.Forever, op.Required = flags&kvForever != 0, flags&kvRequired != 0
		if flags&kvExpect != 0 {
			v := d.varint()
			op.Expect = &v
		}
		if flags&kvMax != 0 {
			v := d.varint()
			op.Max = &v
		}
		ops[i] = op
	}
	return ops
}

func (e *encoder) timerOps(ops []TimerOp) {
	e.uvarint(uint64(len(ops)))
	for i := range ops {
		op := &ops[i]
		e.string(op.Op)
		e.string(op.Queue)
		e.string(op.TimerKey)
		e.string(op.Partition)
		e.varint(op.DelayMs)
		e.string(op.Txn)
		e.bytes(op.Payload)
	}
}

func (d *decoder) timerOps() []TimerOp {
	n := d.count(minTimerOpSize)
	if n == 0 {
		return nil
	}
	ops := make([]TimerOp, n)
	for i := range ops {
		ops[i] = TimerOp{Op: d.string(), Queue: d.string(), TimerKey: d.string(), Partition: d.string(),
			DelayMs: d.varint(), Txn: d.string(), Payload: d.optionalBytes()}
	}
	return ops
}
