package raftfsm

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/waggle-mq/waggle/store"
)

// One test per command type, named TestFSM_<Command>: each applies the
// command to a real store through the FSM (no raft) and checks both its
// typed answer and the state it leaves, read back through the store.

// cmdFSM applies commands to one FSM as consecutive raft entries.
type cmdFSM struct {
	t     *testing.T
	f     *FSM
	index uint64
}

func newCmdFSM(t *testing.T) *cmdFSM { return &cmdFSM{t: t, f: newFSM(t)} }

// apply applies the encoded commands as the next entries, in one batch.
func (h *cmdFSM) apply(cmds ...[]byte) []any {
	out := h.f.ApplyBatch(logs(h.index+1, cmds...))
	h.index += uint64(len(cmds))
	return out
}

func (h *cmdFSM) one(cmd []byte) any { return h.apply(cmd)[0] }

// run applies one command and returns its answer as the type the command
// declares (Answering), failing the test on any other.
func run[R any](h *cmdFSM, c Answering[R]) R {
	h.t.Helper()
	a := h.one(c.Encode())
	var r R
	if a == nil && reflect.TypeFor[R]().Kind() == reflect.Interface {
		return r
	}
	r, ok := a.(R)
	if !ok {
		h.t.Fatalf("%T answered %T (%v), want %T", c, a, a, r)
	}
	return r
}

// view reads the store, failing the test on an error.
func (h *cmdFSM) view(fn func(tx *store.Tx) error) {
	h.t.Helper()
	if err := h.f.store.View(fn); err != nil {
		h.t.Fatal(err)
	}
}

func (h *cmdFSM) queue(name string) store.Queue {
	h.t.Helper()
	var q store.Queue
	h.view(func(tx *store.Tx) (err error) {
		q, err = tx.Queue(name)
		return err
	})
	return q
}

func (h *cmdFSM) meta() store.Meta {
	h.t.Helper()
	var m store.Meta
	h.view(func(tx *store.Tx) (err error) {
		m, err = tx.Meta()
		return err
	})
	return m
}

func (h *cmdFSM) tombstones() []store.Tombstone {
	h.t.Helper()
	var out []store.Tombstone
	h.view(func(tx *store.Tx) (err error) {
		out, err = tx.Tombstones(100)
		return err
	})
	return out
}

// cleanUp applies cleanup entries until no tombstone is left.
func (h *cmdFSM) cleanUp() {
	h.t.Helper()
	for range 1000 {
		if !run(h, &CleanupCommand{MaxWrites: MaxCleanupWrites}).More {
			return
		}
	}
	h.t.Fatal("cleanup does not end")
}

// positions is where a group stands in each partition of a queue that it
// has a position in, by partition name.
func (h *cmdFSM) positions(group, queue string) map[string]int64 {
	h.t.Helper()
	out := map[string]int64{}
	h.view(func(tx *store.Tx) error {
		q, err := tx.Queue(queue)
		if err != nil {
			return err
		}
		v, err := tx.GroupView(group, q.ID)
		if err != nil {
			return err
		}
		parts, err := tx.Partitions(q.ID)
		if err != nil {
			return err
		}
		for _, p := range parts {
			c, found, err := tx.Position(v, p)
			if err != nil {
				return err
			}
			if found {
				out[p.Name] = c.Offset
			}
		}
		return nil
	})
	return out
}

func requirePositions(t *testing.T, h *cmdFSM, group, queue string, want map[string]int64) {
	t.Helper()
	if got := h.positions(group, queue); !maps.Equal(got, want) {
		t.Fatalf("group %s in %s stands at %v, want %v", group, queue, got, want)
	}
}

// cursor is a group's cursor in one partition as the store reads it.
func (h *cmdFSM) cursor(group, queue, partition string) (store.Cursor, bool) {
	h.t.Helper()
	var c store.Cursor
	var found bool
	h.view(func(tx *store.Tx) error {
		q, err := tx.Queue(queue)
		if err != nil {
			return err
		}
		part, err := tx.Partition(q.ID, partition)
		if err != nil {
			return err
		}
		v, err := tx.GroupView(group, q.ID)
		if err != nil {
			return err
		}
		c, found, err = tx.Position(v, part)
		return err
	})
	return c, found
}

func requireNodes(t *testing.T, h *cmdFSM, want ...store.Node) {
	t.Helper()
	var got []store.Node
	h.view(func(tx *store.Tx) (err error) {
		got, err = tx.Nodes()
		return err
	})
	if !slices.Equal(got, want) {
		t.Fatalf("nodes %+v, want %+v", got, want)
	}
}

func TestFSM_RegisterNode(t *testing.T) {
	h := newCmdFSM(t)
	n1 := store.Node{ID: "n1", HTTPAddr: "10.0.0.1:8080", KafkaAddr: "10.0.0.1:9092", LogFormat: uint32(LogFormat2)}
	n2 := store.Node{ID: "n2", HTTPAddr: "10.0.0.2:8080", KafkaAddr: "10.0.0.2:9092", LogFormat: uint32(LogFormat1)}
	for _, n := range []store.Node{n2, n1} {
		if a := run(h, &RegisterNodeCommand{Node: n}); a != nil {
			t.Fatalf("registering %s answered %v, want nothing", n.ID, a)
		}
	}
	requireNodes(t, h, n1, n2) // in id order, whatever the order they came in

	// Registering again replaces the addresses; the list does not grow.
	moved := n1
	moved.HTTPAddr, moved.KafkaAddr, moved.LogFormat = "10.0.0.9:8080", "10.0.0.9:9092", uint32(MaxLogFormat)
	run(h, &RegisterNodeCommand{Node: moved})
	requireNodes(t, h, moved, n2)

	// A node of the first release writes the entry without its log
	// format: it reads 0.
	old := store.Node{ID: "n3", HTTPAddr: "10.0.0.3:8080", KafkaAddr: "10.0.0.3:9092", LogFormat: uint32(LogFormat2)}
	if a := h.one((&RegisterNodeCommand{Node: old}).encodeAs(LogFormat1)); a != nil {
		t.Fatalf("a format 1 registration answered %v", a)
	}
	old.LogFormat = 0
	requireNodes(t, h, moved, n2, old)
	h.view(func(tx *store.Tx) error {
		n, err := tx.Node("n2")
		if err != nil || n != n2 {
			t.Errorf("node n2 reads %+v, %v", n, err)
		}
		return nil
	})
}

func TestFSM_ForgetNode(t *testing.T) {
	h := newCmdFSM(t)
	nodes := []store.Node{
		{ID: "n1", HTTPAddr: "h1:8080", KafkaAddr: "h1:9092"},
		{ID: "n2", HTTPAddr: "h2:8080", KafkaAddr: "h2:9092"},
		{ID: "n3", HTTPAddr: "h3:8080", KafkaAddr: "h3:9092"},
	}
	for _, n := range nodes {
		run(h, &RegisterNodeCommand{Node: n})
	}
	if a := run(h, &ForgetNodeCommand{ID: "n2"}); a != nil {
		t.Fatalf("forgetting answered %v, want nothing", a)
	}
	requireNodes(t, h, nodes[0], nodes[2])
	h.view(func(tx *store.Tx) error {
		if n, err := tx.Node("n2"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a forgotten node reads %+v, %v; want not found", n, err)
		}
		return nil
	})

	// Forgetting again, or a node never registered, changes nothing.
	run(h, &ForgetNodeCommand{ID: "n2"})
	run(h, &ForgetNodeCommand{ID: "nx"})
	requireNodes(t, h, nodes[0], nodes[2])

	// A forgotten node may join again.
	run(h, &RegisterNodeCommand{Node: nodes[1]})
	requireNodes(t, h, nodes...)
	for _, n := range nodes {
		run(h, &ForgetNodeCommand{ID: n.ID})
	}
	requireNodes(t, h)
}

func TestFSM_NewProducerID(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFSM(st)
	if err != nil {
		t.Fatal(err)
	}
	h := &cmdFSM{t: t, f: f}
	a := run(h, &NewProducerIDCommand{})
	b := run(h, &NewProducerIDCommand{})
	if a != 1 || b != 2 {
		t.Fatalf("a new cluster's first producer ids are %d, %d; want 1, 2", a, b)
	}

	// Queues and partitions take their ids from the same counter: a
	// producer id is never one of theirs.
	if r := run(h, &CreateTopicCommand{NowMs: 1, Name: "t", Partitions: 2}); r != TopicOK {
		t.Fatalf("create topic: %d", r)
	}
	c := run(h, &NewProducerIDCommand{})
	var ids []int64
	h.view(func(tx *store.Tx) error {
		q, err := tx.Queue("t")
		if err != nil {
			return err
		}
		parts, err := tx.Partitions(q.ID)
		ids = append(ids, int64(q.ID))
		for _, p := range parts {
			ids = append(ids, int64(p.ID))
		}
		return err
	})
	if !slices.Equal(ids, []int64{b + 1, b + 2, b + 3}) || c != b+4 {
		t.Fatalf("queue and partition ids %v, next producer id %d; want %v and %d", ids, c, []int64{b + 1, b + 2, b + 3}, b+4)
	}

	// Several in one batch each get their own.
	enc := (&NewProducerIDCommand{}).Encode()
	answers := h.apply(enc, enc, enc)
	for i, a := range answers {
		if a != c+1+int64(i) {
			t.Fatalf("batched producer id %d is %v, want %d", i, a, c+1+int64(i))
		}
	}
	if m := h.meta(); m.NextID != uint64(c+4) {
		t.Fatalf("stored counter %d after handing out %d, want %d", m.NextID, c+3, c+4)
	}

	// The counter is state: after a restart the ids go on.
	st.Close()
	f2, err := NewFSM(openStore(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	h2 := &cmdFSM{t: t, f: f2, index: h.index}
	if d := run(h2, &NewProducerIDCommand{}); d != c+4 {
		t.Fatalf("first producer id after a restart %d, want %d", d, c+4)
	}
}

func TestFSM_AddPartitions(t *testing.T) {
	h := newCmdFSM(t)
	if r := run(h, &CreateTopicCommand{NowMs: 1000, Name: "t", Partitions: 2}); r != TopicOK {
		t.Fatalf("create topic: %d", r)
	}
	h.apply(push(1001, item("t", "0", "a", 1)))
	partIDs := func(queue string) map[string]uint64 {
		out := map[string]uint64{}
		h.view(func(tx *store.Tx) error {
			q, err := tx.Queue(queue)
			if err != nil {
				return err
			}
			parts, err := tx.Partitions(q.ID)
			for _, p := range parts {
				out[p.Name] = p.ID
			}
			return err
		})
		return out
	}
	before := partIDs("t")

	if r := run(h, &AddPartitionsCommand{Name: "t", Count: 4}); r != TopicOK {
		t.Fatalf("growing 2 to 4: %d", r)
	}
	after := partIDs("t")
	if q := h.queue("t"); q.KafkaPartitions != 4 || len(after) != 4 || after["2"] == 0 || after["3"] == 0 {
		t.Fatalf("after growing to 4: %d Kafka partitions, partitions %v", q.KafkaPartitions, after)
	}
	if after["0"] != before["0"] || after["1"] != before["1"] {
		t.Fatalf("growing replaced existing partitions: %v, then %v", before, after)
	}
	h.view(func(tx *store.Tx) error {
		e, found, err := tx.EntryAt(after["0"], 0)
		if err != nil || !found || e.Message.TransactionID != "a" {
			t.Errorf("partition 0's message after growing: %+v, %v, %v", e, found, err)
		}
		return nil
	})

	// Kafka only ever grows a topic: the same count again, fewer, none
	// or more than the bound are refused, and change nothing.
	for _, c := range []int32{4, 3, 1, 0, -1, maxKafkaPartitions + 1} {
		if r := run(h, &AddPartitionsCommand{Name: "t", Count: c}); r != TopicInvalidPartitions {
			t.Fatalf("count %d on a topic of 4: %d, want invalid partitions", c, r)
		}
	}
	if q, now := h.queue("t"), partIDs("t"); q.KafkaPartitions != 4 || !maps.Equal(now, after) {
		t.Fatalf("refused counts changed the topic: %d partitions, %v", q.KafkaPartitions, now)
	}
	if r := run(h, &AddPartitionsCommand{Name: "nope", Count: 3}); r != TopicUnknown {
		t.Fatalf("an unknown topic: %d, want unknown", r)
	}
	h.view(func(tx *store.Tx) error {
		if _, err := tx.Queue("nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("growing an unknown topic created it: %v", err)
		}
		return nil
	})

	// A queue created over HTTP has one Kafka partition; it grows too.
	h.apply(push(1002, item("h", "p", "x", 2)))
	if r := run(h, &AddPartitionsCommand{Name: "h", Count: 1}); r != TopicInvalidPartitions {
		t.Fatalf("count 1 on an HTTP queue: %d", r)
	}
	if r := run(h, &AddPartitionsCommand{Name: "h", Count: 3}); r != TopicOK {
		t.Fatalf("growing an HTTP queue to 3: %d", r)
	}
	if q, parts := h.queue("h"), partIDs("h"); q.KafkaPartitions != 3 || parts["1"] == 0 || parts["2"] == 0 || parts["p"] == 0 {
		t.Fatalf("HTTP queue after growing: %d Kafka partitions, partitions %v", q.KafkaPartitions, parts)
	}
}

func TestFSM_AlterTopic(t *testing.T) {
	h := newCmdFSM(t)
	if r := run(h, &CreateTopicCommand{NowMs: 1000, Name: "t", Partitions: 3, RetentionMs: 1000, MaxMessageBytes: 100}); r != TopicOK {
		t.Fatalf("create topic: %d", r)
	}
	created := h.queue("t")
	settings := []TopicSetting{
		{Name: ConfigRetentionMs, Value: 60_000},
		{Name: ConfigRetentionBytes, Value: 1 << 20},
		{Name: ConfigSegmentBytes, Value: 1 << 20},
		{Name: ConfigSegmentMs, Value: 5_000},
		{Name: ConfigCleanupPolicy, Value: store.PolicyCompact},
		{Name: ConfigMinCompactionLagMs, Value: 10},
		{Name: ConfigDeleteRetentionMs, Value: -1},
		{Name: ConfigMinCleanableDirtyRatio, Value: 500_000},
	}
	want := created
	want.RetentionMs, want.RetentionBytes, want.SegmentBytes, want.SegmentMs = 60_000, 1<<20, 1<<20, 5_000
	want.CleanupPolicy, want.MinCompactionLagMs, want.DeleteRetentionMs, want.MinCleanableDirtyPPM = store.PolicyCompact, 10, -1, 500_000
	for range 2 { // a repeat is harmless
		if r := run(h, &AlterTopicCommand{Name: "t", Settings: settings}); r != TopicOK {
			t.Fatalf("alter: %d", r)
		}
		if q := h.queue("t"); q != want {
			t.Fatalf("after altering:\n%+v\nwant (max.message.bytes and the rest untouched)\n%+v", q, want)
		}
	}

	// A config named twice: the last value holds.
	run(h, &AlterTopicCommand{Name: "t", Settings: []TopicSetting{{Name: ConfigSegmentMs, Value: 7}, {Name: ConfigSegmentMs, Value: 9_000}}})
	if q := h.queue("t"); q.SegmentMs != 9_000 {
		t.Fatalf("segment.ms %d after setting 7 then 9000", q.SegmentMs)
	}

	// 0 returns a config to its default.
	if r := run(h, &AlterTopicCommand{Name: "t", Settings: []TopicSetting{{Name: ConfigRetentionMs}, {Name: ConfigSegmentBytes}, {Name: ConfigSegmentMs}}}); r != TopicOK {
		t.Fatalf("reset to defaults: %d", r)
	}
	q := h.queue("t")
	if got := RetentionMs(q, DefaultKafkaRetentionMs); q.RetentionMs != 0 || got != DefaultKafkaRetentionMs {
		t.Fatalf("retention after reset: stored %d, effective %d; want 0 and the Kafka default", q.RetentionMs, got)
	}
	if bytes, _ := store.SegmentLimits(q); q.SegmentBytes != 0 || q.SegmentMs != 0 || bytes != store.DefaultSegmentBytes {
		t.Fatalf("segments after reset: %d bytes (effective %d), %d ms", q.SegmentBytes, bytes, q.SegmentMs)
	}

	// A config the state machine does not know refuses the whole command:
	// the valid setting before it is not applied.
	before := h.queue("t")
	if r := run(h, &AlterTopicCommand{Name: "t", Settings: []TopicSetting{{Name: ConfigRetentionMs, Value: 5}, {Name: "no.such.config", Value: 1}}}); r != TopicInvalidConfig {
		t.Fatalf("an unknown config: %d, want invalid config", r)
	}
	if q := h.queue("t"); q != before {
		t.Fatalf("a refused alter changed the topic:\n%+v\nwas\n%+v", q, before)
	}

	// Nothing to set changes nothing; an unknown topic is refused, not made.
	if r := run(h, &AlterTopicCommand{Name: "t"}); r != TopicOK || h.queue("t") != before {
		t.Fatalf("an empty alter: %d", r)
	}
	if r := run(h, &AlterTopicCommand{Name: "nope", Settings: settings[:1]}); r != TopicUnknown {
		t.Fatalf("an unknown topic: %d, want unknown", r)
	}
	h.view(func(tx *store.Tx) error {
		if _, err := tx.Queue("nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("altering an unknown topic created it: %v", err)
		}
		return nil
	})
}
