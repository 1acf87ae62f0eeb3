package fsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/command"
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
func run[R any](h *cmdFSM, c command.Answering[R]) R {
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
		if !run(h, &command.CleanupCommand{MaxWrites: command.MaxCleanupWrites}).More {
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
		v, err := tx.ConsumerGroupView(group, q.ID)
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
		v, err := tx.ConsumerGroupView(group, q.ID)
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
	n1 := store.Node{ID: "n1", HTTPAddr: "10.0.0.1:8080", KafkaAddr: "10.0.0.1:9092", LogFormat: uint32(command.LogFormat2)}
	n2 := store.Node{ID: "n2", HTTPAddr: "10.0.0.2:8080", KafkaAddr: "10.0.0.2:9092", LogFormat: uint32(command.LogFormat1)}
	for _, n := range []store.Node{n2, n1} {
		if a := run(h, &command.RegisterNodeCommand{Node: n}); a != nil {
			t.Fatalf("registering %s answered %v, want nothing", n.ID, a)
		}
	}
	requireNodes(t, h, n1, n2) // in id order, whatever the order they came in

	// Registering again replaces the addresses; the list does not grow.
	moved := n1
	moved.HTTPAddr, moved.KafkaAddr, moved.LogFormat = "10.0.0.9:8080", "10.0.0.9:9092", uint32(command.MaxLogFormat)
	run(h, &command.RegisterNodeCommand{Node: moved})
	requireNodes(t, h, moved, n2)

	// A node of the first release writes the entry without its log
	// format: it reads 0.
	old := store.Node{ID: "n3", HTTPAddr: "10.0.0.3:8080", KafkaAddr: "10.0.0.3:9092", LogFormat: uint32(command.LogFormat2)}
	if a := h.one(mustEncodeAs(t, &command.RegisterNodeCommand{Node: old}, command.LogFormat1)); a != nil {
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
		run(h, &command.RegisterNodeCommand{Node: n})
	}
	if a := run(h, &command.ForgetNodeCommand{ID: "n2"}); a != nil {
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
	run(h, &command.ForgetNodeCommand{ID: "n2"})
	run(h, &command.ForgetNodeCommand{ID: "nx"})
	requireNodes(t, h, nodes[0], nodes[2])

	// A forgotten node may join again.
	run(h, &command.RegisterNodeCommand{Node: nodes[1]})
	requireNodes(t, h, nodes...)
	for _, n := range nodes {
		run(h, &command.ForgetNodeCommand{ID: n.ID})
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
	a := run(h, &command.NewProducerIDCommand{})
	b := run(h, &command.NewProducerIDCommand{})
	if a != 1 || b != 2 {
		t.Fatalf("a new cluster's first producer ids are %d, %d; want 1, 2", a, b)
	}

	// Queues and partitions take their ids from the same counter: a
	// producer id is never one of theirs.
	if r := run(h, &command.CreateTopicCommand{NowMs: 1, Name: "t", Partitions: 2}); r != command.TopicOK {
		t.Fatalf("create topic: %d", r)
	}
	c := run(h, &command.NewProducerIDCommand{})
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
	enc := (&command.NewProducerIDCommand{}).Encode()
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
	if d := run(h2, &command.NewProducerIDCommand{}); d != c+4 {
		t.Fatalf("first producer id after a restart %d, want %d", d, c+4)
	}
}

func TestFSM_AddPartitions(t *testing.T) {
	h := newCmdFSM(t)
	if r := run(h, &command.CreateTopicCommand{NowMs: 1000, Name: "t", Partitions: 2}); r != command.TopicOK {
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

	if r := run(h, &command.AddPartitionsCommand{Name: "t", Count: 4}); r != command.TopicOK {
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
		if r := run(h, &command.AddPartitionsCommand{Name: "t", Count: c}); r != command.TopicInvalidPartitions {
			t.Fatalf("count %d on a topic of 4: %d, want invalid partitions", c, r)
		}
	}
	if q, now := h.queue("t"), partIDs("t"); q.KafkaPartitions != 4 || !maps.Equal(now, after) {
		t.Fatalf("refused counts changed the topic: %d partitions, %v", q.KafkaPartitions, now)
	}
	if r := run(h, &command.AddPartitionsCommand{Name: "nope", Count: 3}); r != command.TopicUnknown {
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
	if r := run(h, &command.AddPartitionsCommand{Name: "h", Count: 1}); r != command.TopicInvalidPartitions {
		t.Fatalf("count 1 on an HTTP queue: %d", r)
	}
	if r := run(h, &command.AddPartitionsCommand{Name: "h", Count: 3}); r != command.TopicOK {
		t.Fatalf("growing an HTTP queue to 3: %d", r)
	}
	if q, parts := h.queue("h"), partIDs("h"); q.KafkaPartitions != 3 || parts["1"] == 0 || parts["2"] == 0 || parts["p"] == 0 {
		t.Fatalf("HTTP queue after growing: %d Kafka partitions, partitions %v", q.KafkaPartitions, parts)
	}
}

func TestFSM_AlterTopic(t *testing.T) {
	h := newCmdFSM(t)
	if r := run(h, &command.CreateTopicCommand{NowMs: 1000, Name: "t", Partitions: 3, RetentionMs: 1000, MaxMessageBytes: 100}); r != command.TopicOK {
		t.Fatalf("create topic: %d", r)
	}
	created := h.queue("t")
	settings := []command.TopicSetting{
		{Name: command.ConfigRetentionMs, Value: 60_000},
		{Name: command.ConfigRetentionBytes, Value: 1 << 20},
		{Name: command.ConfigSegmentBytes, Value: 1 << 20},
		{Name: command.ConfigSegmentMs, Value: 5_000},
		{Name: command.ConfigCleanupPolicy, Value: store.PolicyCompact},
		{Name: command.ConfigMinCompactionLagMs, Value: 10},
		{Name: command.ConfigDeleteRetentionMs, Value: -1},
		{Name: command.ConfigMinCleanableDirtyRatio, Value: 500_000},
	}
	want := created
	want.RetentionMs, want.RetentionBytes, want.SegmentBytes, want.SegmentMs = 60_000, 1<<20, 1<<20, 5_000
	want.CleanupPolicy, want.MinCompactionLagMs, want.DeleteRetentionMs, want.MinCleanableDirtyPPM = store.PolicyCompact, 10, -1, 500_000
	for range 2 { // a repeat is harmless
		if r := run(h, &command.AlterTopicCommand{Name: "t", Settings: settings}); r != command.TopicOK {
			t.Fatalf("alter: %d", r)
		}
		if q := h.queue("t"); !reflect.DeepEqual(q, want) {
			t.Fatalf("after altering:\n%+v\nwant (max.message.bytes and the rest untouched)\n%+v", q, want)
		}
	}

	// A config named twice: the last value holds.
	run(h, &command.AlterTopicCommand{Name: "t", Settings: []command.TopicSetting{{Name: command.ConfigSegmentMs, Value: 7}, {Name: command.ConfigSegmentMs, Value: 9_000}}})
	if q := h.queue("t"); q.SegmentMs != 9_000 {
		t.Fatalf("segment.ms %d after setting 7 then 9000", q.SegmentMs)
	}

	// 0 returns a config to its default.
	if r := run(h, &command.AlterTopicCommand{Name: "t", Settings: []command.TopicSetting{{Name: command.ConfigRetentionMs}, {Name: command.ConfigSegmentBytes}, {Name: command.ConfigSegmentMs}}}); r != command.TopicOK {
		t.Fatalf("reset to defaults: %d", r)
	}
	q := h.queue("t")
	if got := command.RetentionMs(q, command.DefaultKafkaRetentionMs); q.RetentionMs != 0 || got != command.DefaultKafkaRetentionMs {
		t.Fatalf("retention after reset: stored %d, effective %d; want 0 and the Kafka default", q.RetentionMs, got)
	}
	if bytes, _ := store.SegmentLimits(q); q.SegmentBytes != 0 || q.SegmentMs != 0 || bytes != store.DefaultSegmentBytes {
		t.Fatalf("segments after reset: %d bytes (effective %d), %d ms", q.SegmentBytes, bytes, q.SegmentMs)
	}

	// A config the state machine does not know refuses the whole command:
	// the valid setting before it is not applied.
	before := h.queue("t")
	if r := run(h, &command.AlterTopicCommand{Name: "t", Settings: []command.TopicSetting{{Name: command.ConfigRetentionMs, Value: 5}, {Name: "no.such.config", Value: 1}}}); r != command.TopicInvalidConfig {
		t.Fatalf("an unknown config: %d, want invalid config", r)
	}
	if q := h.queue("t"); !reflect.DeepEqual(q, before) {
		t.Fatalf("a refused alter changed the topic:\n%+v\nwas\n%+v", q, before)
	}

	// Nothing to set changes nothing; an unknown topic is refused, not made.
	if r := run(h, &command.AlterTopicCommand{Name: "t"}); r != command.TopicOK || !reflect.DeepEqual(h.queue("t"), before) {
		t.Fatalf("an empty alter: %d", r)
	}
	if r := run(h, &command.AlterTopicCommand{Name: "nope", Settings: settings[:1]}); r != command.TopicUnknown {
		t.Fatalf("an unknown topic: %d, want unknown", r)
	}
	h.view(func(tx *store.Tx) error {
		if _, err := tx.Queue("nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("altering an unknown topic created it: %v", err)
		}
		return nil
	})
}

func TestFSM_DeleteQueue(t *testing.T) {
	h := newCmdFSM(t)
	h.apply(push(1000, item("q", "p", "a", 1), item("q", "p", "b", 2), item("q", "r", "c", 3)))
	pop := requirePop(t, h.one(popCmd(1001, "g", "L", 10, 60_000)), []int64{0, 1}, nil)
	old := h.queue("q")
	nextID := h.meta().NextID

	if r := run(h, &command.DeleteQueueCommand{Name: "q"}); r != command.TopicOK {
		t.Fatalf("delete: %d", r)
	}
	h.view(func(tx *store.Tx) error {
		if _, err := tx.Queue("q"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the deleted queue reads by name: %v", err)
		}
		if _, err := tx.QueueByID(old.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the deleted queue reads by id: %v", err)
		}
		return nil
	})
	ts := h.tombstones()
	if len(ts) != 1 || ts[0].Kind != store.TombstoneQueue || ts[0].QueueID != old.ID || ts[0].Queue != "q" || ts[0].Seq != nextID {
		t.Fatalf("tombstones %+v, want one for queue %d at sequence %d", ts, old.ID, nextID)
	}
	if m := h.meta(); m.NextID != nextID+1 {
		t.Fatalf("id counter %d after a delete, want %d (the tombstone took one)", m.NextID, nextID+1)
	}

	// Deleting again, or a queue that never was, is unknown and files nothing.
	for _, name := range []string{"q", "never"} {
		if r := run(h, &command.DeleteQueueCommand{Name: name}); r != command.TopicUnknown {
			t.Fatalf("deleting %q: %d, want unknown", name, r)
		}
	}
	if n := len(h.tombstones()); n != 1 {
		t.Fatalf("%d tombstones after deleting unknown queues", n)
	}

	// What consumers of the old queue hold is gone with it.
	ack := h.one(ackCmd(1002, "g", command.Ack{PartitionID: pop.PartitionID, LeaseID: "L", TransactionID: "a", Status: command.AckCompleted})).([]command.AckResult)[0]
	if ack.Success || ack.Error != "the queue was deleted" {
		t.Fatalf("an ack in the deleted queue: %+v", ack)
	}
	if r := run(h, &command.ExtendLeaseCommand{NowMs: 1003, LeaseID: "L", Seconds: 60}); r.Success {
		t.Fatalf("a lease in the deleted queue was extended: %+v", r)
	}
	if r := h.one(popCmd(1004, "g", "L1", 10, 60_000)).(command.PopResult); r.Error != "unknown queue" || len(r.Offsets) != 0 {
		t.Fatalf("a pop of the deleted queue: %+v", r)
	}

	// The name is free at once: a new, empty queue with a new id, where
	// the old queue's transactionIds are no duplicates.
	requireResult(t, pushResults(t, h.one(push(1005, item("q", "p", "a", 9))))[0], command.PushQueued, 0, 9)
	if q := h.queue("q"); q.ID <= old.ID {
		t.Fatalf("the new queue has id %d, the deleted one had %d", q.ID, old.ID)
	}
	requirePop(t, h.one(popCmd(1006, "g", "L2", 10, 60_000)), []int64{0}, []int32{1})

	// Cleanup removes everything the old queue left and nothing of the
	// new one: the keys are those of a store that only ever saw the new
	// queue.
	h.cleanUp()
	if ts := h.tombstones(); len(ts) != 0 {
		t.Fatalf("tombstones left after cleanup: %+v", ts)
	}
	h.view(func(tx *store.Tx) error {
		if _, err := tx.PartitionByID(pop.PartitionID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the old queue's partition is still there: %v", err)
		}
		if _, found, err := tx.Dedup(pop.PartitionID, "a"); found || err != nil {
			t.Errorf("the old queue's dedup record is still there (%v)", err)
		}
		return nil
	})
	fresh := newCmdFSM(t)
	fresh.apply(push(1005, item("q", "p", "a", 9)), popCmd(1006, "g", "L2", 10, 60_000))
	var got, want map[byte]int
	h.view(func(tx *store.Tx) (err error) { got, err = tx.KeysByFamily(); return err })
	fresh.view(func(tx *store.Tx) (err error) { want, err = tx.KeysByFamily(); return err })
	if !maps.Equal(got, want) {
		t.Fatalf("keys by family after cleanup %v, want those of the new queue alone %v", got, want)
	}
	if c, found := h.cursor("g", "q", "p"); !found || len(c.Leases) != 1 || c.Leases[0].ID != "L2" {
		t.Fatalf("the new queue's cursor after cleanup: %+v (found %v)", c, found)
	}
}

func TestFSM_CommitOffsets(t *testing.T) {
	h := newCmdFSM(t)
	if r := run(h, &command.CreateTopicCommand{NowMs: 1000, Name: "t", Partitions: 2}); r != command.TopicOK {
		t.Fatalf("create topic: %d", r)
	}
	out := run(h, &command.CommitOffsetsCommand{NowMs: 2000, Group: "g", Offsets: []command.OffsetCommit{
		{Topic: "t", Partition: 0, Offset: 5, LeaderEpoch: 3, Metadata: "m0"},
		{Topic: "t", Partition: 1, Offset: 7},
		{Topic: "t", Partition: 2, Offset: 1},
		{Topic: "t", Partition: -1, Offset: 1},
		{Topic: "nope", Partition: 0, Offset: 1},
	}})
	if want := []command.TopicOutcome{command.TopicOK, command.TopicOK, command.TopicUnknownPartition, command.TopicUnknownPartition, command.TopicUnknown}; !slices.Equal(out, want) {
		t.Fatalf("outcomes %v, want %v", out, want)
	}
	requirePositions(t, h, "g", "t", map[string]int64{"0": 5, "1": 7})
	c0, _ := h.cursor("g", "t", "0")
	if c0.LeaderEpoch != 3 || c0.Metadata != "m0" || c0.UpdatedMs != 2000 {
		t.Fatalf("partition 0's commit reads %+v", c0)
	}
	h.view(func(tx *store.Tx) error {
		if _, err := tx.Queue("nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a commit to an unknown topic created it: %v", err)
		}
		if groups, err := tx.CursorGroups(); !slices.Equal(groups, []string{"g"}) || err != nil {
			t.Errorf("groups with positions: %v, %v", groups, err)
		}
		return nil
	})

	// A later commit replaces offset, epoch and metadata, even backwards
	// (Kafka allows it), and leaves the other partition alone; repeating
	// it changes nothing.
	for range 2 {
		if out := run(h, &command.CommitOffsetsCommand{NowMs: 3000, Group: "g", Offsets: []command.OffsetCommit{{Topic: "t", Partition: 0, Offset: 2, LeaderEpoch: 4}}}); !slices.Equal(out, []command.TopicOutcome{command.TopicOK}) {
			t.Fatalf("second commit: %v", out)
		}
		requirePositions(t, h, "g", "t", map[string]int64{"0": 2, "1": 7})
		c0, _ = h.cursor("g", "t", "0")
		c1, _ := h.cursor("g", "t", "1")
		if c0.LeaderEpoch != 4 || c0.Metadata != "" || c0.UpdatedMs != 3000 || c1.UpdatedMs != 2000 {
			t.Fatalf("after the second commit: partition 0 %+v, partition 1 %+v", c0, c1)
		}
	}
	// Another group's commits are its own.
	run(h, &command.CommitOffsetsCommand{NowMs: 3001, Group: "g2", Offsets: []command.OffsetCommit{{Topic: "t", Partition: 1, Offset: 1}}})
	requirePositions(t, h, "g2", "t", map[string]int64{"1": 1})
	requirePositions(t, h, "g", "t", map[string]int64{"0": 2, "1": 7})

	// A Kafka commit sets the offset and keeps what else the cursor
	// holds: an HTTP consumer's lease on the partition stays live.
	h.apply(push(4000, item("q", "0", "x", 1), item("q", "0", "y", 2)))
	requirePop(t, h.one(popCmd(4001, "g", "L", 10, 60_000)), []int64{0, 1}, nil)
	if out := run(h, &command.CommitOffsetsCommand{NowMs: 4002, Group: "g", Offsets: []command.OffsetCommit{{Topic: "q", Partition: 0, Offset: 1}}}); !slices.Equal(out, []command.TopicOutcome{command.TopicOK}) {
		t.Fatalf("commit on an HTTP queue: %v", out)
	}
	if c, _ := h.cursor("g", "q", "0"); c.Offset != 1 || len(c.Leases) != 1 || c.Leases[0].ID != "L" || !slices.Equal(c.Leases[0].Offsets, []int64{0, 1}) {
		t.Fatalf("cursor after a commit under a lease: %+v", c)
	}
	if r := run(h, &command.ExtendLeaseCommand{NowMs: 4003, LeaseID: "L", Seconds: 120}); !r.Success {
		t.Fatal("the lease did not survive the commit")
	}

	// A commit after a seek counts over the reset.
	run(h, &command.SeekCommand{NowMs: 4004, Group: "g", Queue: "t", ToEnd: true})
	requirePositions(t, h, "g", "t", map[string]int64{"0": 0, "1": 0})
	run(h, &command.CommitOffsetsCommand{NowMs: 4005, Group: "g", Offsets: []command.OffsetCommit{{Topic: "t", Partition: 1, Offset: 4}}})
	requirePositions(t, h, "g", "t", map[string]int64{"0": 0, "1": 4})
}

func TestFSM_DeleteOffsets(t *testing.T) {
	h := newCmdFSM(t)
	run(h, &command.CreateTopicCommand{NowMs: 1000, Name: "t", Partitions: 3})
	run(h, &command.CommitOffsetsCommand{NowMs: 1001, Group: "g", Offsets: []command.OffsetCommit{{Topic: "t", Partition: 0, Offset: 5}, {Topic: "t", Partition: 1, Offset: 6}, {Topic: "t", Partition: 2, Offset: 7}}})
	run(h, &command.CommitOffsetsCommand{NowMs: 1001, Group: "g2", Offsets: []command.OffsetCommit{{Topic: "t", Partition: 0, Offset: 9}}})

	// Per partition: the named positions go, an unknown topic counts none.
	if n := run(h, &command.DeleteOffsetsCommand{Group: "g", Offsets: []command.OffsetCommit{{Topic: "t", Partition: 0}, {Topic: "nope", Partition: 0}}}); n != 1 {
		t.Fatalf("deleted %d positions, want 1", n)
	}
	requirePositions(t, h, "g", "t", map[string]int64{"1": 6, "2": 7})
	requirePositions(t, h, "g2", "t", map[string]int64{"0": 9})

	// In a queue the group reset, a partition without a cursor of its own
	// is where the reset puts it: deleting its offset leaves it with no
	// position, not back at the reset's.
	run(h, &command.SeekCommand{NowMs: 1002, Group: "g3", Queue: "t", Offset: 0})
	requirePositions(t, h, "g3", "t", map[string]int64{"0": 0, "1": 0, "2": 0})
	if n := run(h, &command.DeleteOffsetsCommand{Group: "g3", Offsets: []command.OffsetCommit{{Topic: "t", Partition: 1}}}); n != 1 {
		t.Fatalf("deleted %d positions of a reset group, want 1", n)
	}
	requirePositions(t, h, "g3", "t", map[string]int64{"0": 0, "2": 0})

	// The whole group: gone at once, answered 1, a tombstone for cleanup.
	if n := run(h, &command.DeleteOffsetsCommand{Group: "g", All: true}); n != 1 {
		t.Fatalf("deleting group g answered %d, want 1", n)
	}
	requirePositions(t, h, "g", "t", map[string]int64{})
	requirePositions(t, h, "g2", "t", map[string]int64{"0": 9})
	h.view(func(tx *store.Tx) error {
		if groups, err := tx.CursorGroups(); !slices.Equal(groups, []string{"g2", "g3"}) || err != nil {
			t.Errorf("groups with positions after deleting g: %v, %v", groups, err)
		}
		return nil
	})
	if ts := h.tombstones(); len(ts) != 1 || ts[0].Kind != store.TombstoneGroup || ts[0].Group != "g" {
		t.Fatalf("tombstones %+v, want one for group g", ts)
	}
	// Again, or a group that never was: 0, and no tombstone.
	for _, g := range []string{"g", "never"} {
		if n := run(h, &command.DeleteOffsetsCommand{Group: g, All: true}); n != 0 {
			t.Fatalf("deleting group %s answered %d, want 0", g, n)
		}
	}
	if n := len(h.tombstones()); n != 1 {
		t.Fatalf("%d tombstones after deleting groups without positions", n)
	}

	// The name is free at once; cleanup leaves the new positions alone.
	run(h, &command.CommitOffsetsCommand{NowMs: 1003, Group: "g", Offsets: []command.OffsetCommit{{Topic: "t", Partition: 2, Offset: 1}}})
	requirePositions(t, h, "g", "t", map[string]int64{"2": 1})
	h.cleanUp()
	if ts := h.tombstones(); len(ts) != 0 {
		t.Fatalf("tombstones left after cleanup: %+v", ts)
	}
	requirePositions(t, h, "g", "t", map[string]int64{"2": 1})
	requirePositions(t, h, "g2", "t", map[string]int64{"0": 9})
}

func TestFSM_ExtendLease(t *testing.T) {
	h := newCmdFSM(t)
	h.apply(push(1000, item("q", "p", "a", 1), item("q", "p", "b", 2)))
	pop := requirePop(t, h.one(popCmd(1000, "g", "L", 2, 10_000)), []int64{0, 1}, nil)
	if pop.ExpiresAtMs != 11_000 {
		t.Fatalf("lease expires at %d, want 11000", pop.ExpiresAtMs)
	}
	leaseExpiry := func() int64 {
		var exp int64
		h.view(func(tx *store.Tx) error {
			g, c, err := tx.LeaseCursor("L")
			if err != nil || g != "g" || c.LeaseByID("L") == nil {
				t.Fatalf("lease L reads group %q, %+v, %v", g, c.Leases, err)
			}
			exp = c.LeaseByID("L").ExpiresAtMs
			return nil
		})
		return exp
	}

	if r := run(h, &command.ExtendLeaseCommand{NowMs: 2000, LeaseID: "L", Seconds: 30}); r != (command.ExtendLeaseResult{Success: true, ExpiresAtMs: 32_000}) {
		t.Fatalf("extend by 30 s at 2000: %+v", r)
	}
	if exp := leaseExpiry(); exp != 32_000 {
		t.Fatalf("stored expiry %d, want 32000", exp)
	}
	// Never shorter: a smaller extension keeps the later expiry.
	if r := run(h, &command.ExtendLeaseCommand{NowMs: 3000, LeaseID: "L", Seconds: 5}); r != (command.ExtendLeaseResult{Success: true, ExpiresAtMs: 32_000}) {
		t.Fatalf("extend by 5 s at 3000: %+v", r)
	}
	// Past the first expiry the partition is still leased.
	requirePop(t, h.one(popCmd(20_000, "g", "M", 2, 10_000)), nil, nil)
	if r := run(h, &command.ExtendLeaseCommand{NowMs: 20_001, LeaseID: "nope", Seconds: 30}); r != (command.ExtendLeaseResult{}) {
		t.Fatalf("an unknown lease: %+v", r)
	}

	// At its expiry the lease cannot be extended, and the next pop
	// delivers its messages again.
	if r := run(h, &command.ExtendLeaseCommand{NowMs: 32_000, LeaseID: "L", Seconds: 30}); r != (command.ExtendLeaseResult{}) {
		t.Fatalf("an expired lease: %+v", r)
	}
	if exp := leaseExpiry(); exp != 32_000 {
		t.Fatalf("a refused extension moved the expiry to %d", exp)
	}
	m := requirePop(t, h.one(popCmd(32_001, "g", "M2", 2, 10_000)), []int64{0, 1}, []int32{2, 2})
	if r := run(h, &command.ExtendLeaseCommand{NowMs: 32_002, LeaseID: "L", Seconds: 30}); r.Success {
		t.Fatalf("a lease settled by the next pop: %+v", r)
	}

	// A stamp behind the replicated clock counts from the clock.
	if r := run(h, &command.ExtendLeaseCommand{NowMs: 1, LeaseID: "M2", Seconds: 60}); r != (command.ExtendLeaseResult{Success: true, ExpiresAtMs: 32_002 + 60_000}) {
		t.Fatalf("extend stamped behind the clock: %+v", r)
	}
	// A released lease (every message acked) is gone.
	acks := h.one(ackCmd(32_003, "g",
		command.Ack{PartitionID: m.PartitionID, LeaseID: "M2", TransactionID: "a", Status: command.AckCompleted},
		command.Ack{PartitionID: m.PartitionID, LeaseID: "M2", TransactionID: "b", Status: command.AckCompleted})).([]command.AckResult)
	if !acks[1].LeaseReleased {
		t.Fatalf("acks %+v", acks)
	}
	if r := run(h, &command.ExtendLeaseCommand{NowMs: 32_004, LeaseID: "M2", Seconds: 60}); r.Success {
		t.Fatalf("a released lease was extended: %+v", r)
	}
}

func TestFSM_Seek(t *testing.T) {
	h := newCmdFSM(t)
	for i := range 5 { // offsets 0-4 of p and r, stamped 1000-5000
		h.apply(push(int64(1000*(i+1)), item("q", "p", fmt.Sprint("m", i), byte(i)), item("q", "r", fmt.Sprint("n", i), byte(10+i))))
	}
	requirePop(t, h.one(popCmd(6000, "g", "L", 2, 60_000)), []int64{0, 1}, nil)
	seek := func(c command.SeekCommand) {
		t.Helper()
		c.Group, c.Queue = "g", "q"
		if r := run(h, &c); r != command.TopicOK {
			t.Fatalf("seek %+v: %d", c, r)
		}
	}
	if r := run(h, &command.SeekCommand{NowMs: 6000, Group: "g", Queue: "nope", ToEnd: true}); r != command.TopicUnknown {
		t.Fatalf("seek in an unknown queue: %d", r)
	}

	// To the end: every partition; the lease goes with the old cursor.
	seek(command.SeekCommand{NowMs: 6001, ToEnd: true})
	requirePositions(t, h, "g", "q", map[string]int64{"p": 5, "r": 5})
	if r := run(h, &command.ExtendLeaseCommand{NowMs: 6002, LeaseID: "L", Seconds: 60}); r.Success {
		t.Fatal("a lease from before the seek was extended")
	}
	requirePop(t, h.one(popCmd(6003, "g", "L2", 10, 60_000)), nil, nil)
	h.apply(push(7000, item("q", "p", "m5", 5)))
	requirePop(t, h.one(popCmd(7001, "g", "L3", 10, 60_000)), []int64{5}, []int32{1})

	// To an offset, held between each partition's start and end.
	seek(command.SeekCommand{NowMs: 7002, Offset: 2})
	requirePositions(t, h, "g", "q", map[string]int64{"p": 2, "r": 2})
	seek(command.SeekCommand{NowMs: 7003, Offset: 99})
	requirePositions(t, h, "g", "q", map[string]int64{"p": 6, "r": 5})
	seek(command.SeekCommand{NowMs: 7004, Offset: -5})
	requirePositions(t, h, "g", "q", map[string]int64{"p": 0, "r": 0})

	// To a time: the first message stamped at or after it, or the end.
	seek(command.SeekCommand{NowMs: 7005, TimestampMs: 2500})
	requirePositions(t, h, "g", "q", map[string]int64{"p": 2, "r": 2})
	seek(command.SeekCommand{NowMs: 7006, TimestampMs: 99_999})
	requirePositions(t, h, "g", "q", map[string]int64{"p": 6, "r": 5})
	seek(command.SeekCommand{NowMs: 7007, TimestampMs: 4000})
	requirePositions(t, h, "g", "q", map[string]int64{"p": 3, "r": 3})
	// Delivery goes on from there, first deliveries again.
	p := run(h, &command.PopCommand{NowMs: 7008, Group: "g", Queue: "q", Partition: "p", Batch: 10, LeaseMs: 60_000, LeaseID: "L4"})
	if !slices.Equal(p.Offsets, []int64{3, 4, 5}) || !slices.Equal(p.Attempts, []int32{1, 1, 1}) {
		t.Fatalf("pop after the time seek: %v (attempts %v)", p.Offsets, p.Attempts)
	}

	// A group that never read is placed too; other groups are untouched.
	requirePop(t, h.one(popCmd(7009, "g2", "K", 1, 60_000)), []int64{0}, nil)
	if r := run(h, &command.SeekCommand{NowMs: 7010, Group: "g3", Queue: "q", ToEnd: true}); r != command.TopicOK {
		t.Fatalf("seek of a new group: %d", r)
	}
	requirePositions(t, h, "g3", "q", map[string]int64{"p": 6, "r": 5})
	if c, found := h.cursor("g2", "q", "p"); !found || c.Offset != 0 || c.LeaseByID("K") == nil {
		t.Fatalf("another group's cursor after a seek: %+v", c)
	}

}

// messages lists a partition's messages from offset 0.
func (h *cmdFSM) messages(queue, partition string) []store.Message {
	h.t.Helper()
	var out []store.Message
	h.view(func(tx *store.Tx) error {
		q, err := tx.Queue(queue)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		part, err := tx.Partition(q.ID, partition)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		es, err := tx.Entries(part.ID, 0, 1<<20, 100)
		for _, e := range es {
			out = append(out, *e.Message)
		}
		return err
	})
	return out
}

func TestFSM_Timers(t *testing.T) {
	h := newCmdFSM(t)
	sched := func(key string, delayMs int64) command.TimerOp {
		return command.TimerOp{Op: command.TimerSchedule, Queue: "q", TimerKey: key, DelayMs: delayMs, Payload: json.RawMessage(`{"k":"` + key + `"}`)}
	}
	cancel := func(key string) command.TimerOp {
		return command.TimerOp{Op: command.TimerCancel, Queue: "q", TimerKey: key}
	}
	res := run(h, &command.TimersCommand{NowMs: 1000, Ops: []command.TimerOp{sched("a", 5000), sched("b", 1000), cancel("never")}})
	want := []command.TimerResult{{OK: true, Status: "scheduled", DeliverAtMs: 6000}, {OK: true, Status: "scheduled", DeliverAtMs: 2000}, {OK: true, Status: "absent"}}
	if !slices.Equal(res, want) {
		t.Fatalf("schedule: %+v, want %+v", res, want)
	}
	timers := func() []store.Timer {
		var out []store.Timer
		h.view(func(tx *store.Tx) (err error) {
			out, err = tx.Timers("q", 10)
			return err
		})
		return out
	}
	if ts := timers(); len(ts) != 2 || ts[0].Key != "a" || ts[0].DueAtMs != 6000 || string(ts[0].Payload) != `{"k":"a"}` || ts[1].Key != "b" || ts[1].DueAtMs != 2000 {
		t.Fatalf("timers stored: %+v", ts)
	}

	// Scheduling a key again replaces its timer and due time; cancelling
	// removes it.
	res = run(h, &command.TimersCommand{NowMs: 1500, Ops: []command.TimerOp{sched("a", 10_000), cancel("b")}})
	want = []command.TimerResult{{OK: true, Status: "rescheduled", DeliverAtMs: 11_500}, {OK: true, Status: "cancelled"}}
	if !slices.Equal(res, want) {
		t.Fatalf("reschedule and cancel: %+v, want %+v", res, want)
	}
	if ts := timers(); len(ts) != 1 || ts[0].Key != "a" || ts[0].DueAtMs != 11_500 {
		t.Fatalf("timers after reschedule and cancel: %+v", ts)
	}
	if r := run(h, &command.TimersCommand{NowMs: 1600, Ops: []command.TimerOp{cancel("b")}}); !slices.Equal(r, []command.TimerResult{{OK: true, Status: "absent"}}) {
		t.Fatalf("cancelling twice: %+v", r)
	}

	// Ticks fire nothing before the due time: not at b's, nor at a's old one.
	for _, now := range []int64{2000, 6000, 11_499} {
		if r := run(h, &command.TickCommand{NowMs: now, Limit: 10}); r.Fired != 0 {
			t.Fatalf("tick at %d fired %d", now, r.Fired)
		}
	}
	if ms := h.messages("q", "Default"); len(ms) != 0 {
		t.Fatalf("messages before any timer was due: %+v", ms)
	}
	if r := run(h, &command.TickCommand{NowMs: 11_500, Limit: 10}); r != (command.TickResult{Fired: 1}) {
		t.Fatalf("tick at a's due time: %+v", r)
	}
	ms := h.messages("q", "Default")
	wantID := timerMessageID(store.Timer{Queue: "q", Key: "a", DueAtMs: 11_500})
	if len(ms) != 1 || ms[0].TransactionID != "timer:q:a" || string(ms[0].Payload) != `{"k":"a"}` || ms[0].TimestampMs != 11_500 || ms[0].ID != wantID {
		t.Fatalf("fired messages %+v, want a's payload as timer:q:a, id %x", ms, wantID)
	}
	if ts := timers(); len(ts) != 0 {
		t.Fatalf("timers left after firing: %+v", ts)
	}
	if r := run(h, &command.TickCommand{NowMs: 20_000, Limit: 10}); r.Fired != 0 || len(h.messages("q", "Default")) != 1 {
		t.Fatalf("a fired timer fired again: %+v", r)
	}

	// A timer with its own partition and transactionId; a second one with
	// the same id inside the queue's dedup window fires as a duplicate.
	own := command.TimerOp{Op: command.TimerSchedule, Queue: "q", TimerKey: "c", Partition: "x", Txn: "once", DelayMs: 100}
	run(h, &command.TimersCommand{NowMs: 20_000, Ops: []command.TimerOp{own}})
	if r := run(h, &command.TickCommand{NowMs: 20_100, Limit: 10}); r.Fired != 1 {
		t.Fatalf("tick fired %d, want c", r.Fired)
	}
	own.TimerKey = "d"
	run(h, &command.TimersCommand{NowMs: 20_200, Ops: []command.TimerOp{own}})
	if r := run(h, &command.TickCommand{NowMs: 20_300, Limit: 10}); r.Fired != 1 {
		t.Fatalf("tick fired %d, want d", r.Fired)
	}
	if ms := h.messages("q", "x"); len(ms) != 1 || ms[0].TransactionID != "once" || string(ms[0].Payload) != "null" || ms[0].TimestampMs != 20_100 {
		t.Fatalf("partition x holds %+v, want c's message alone (payload null)", ms)
	}

	// Limit bounds one tick; the rest fire in the next.
	run(h, &command.TimersCommand{NowMs: 30_000, Ops: []command.TimerOp{sched("e", 0), sched("f", 0), sched("g", 0)}})
	if r := run(h, &command.TickCommand{NowMs: 30_000, Limit: 2}); r.Fired != 2 || len(timers()) != 1 {
		t.Fatalf("a tick of limit 2 fired %d, left %d", r.Fired, len(timers()))
	}
	if r := run(h, &command.TickCommand{NowMs: 30_000, Limit: 2}); r.Fired != 1 || len(timers()) != 0 || len(h.messages("q", "Default")) != 4 {
		t.Fatalf("the next tick fired %d, left %d", r.Fired, len(timers()))
	}
}

// noop applies an entry that is not a command: it moves the applied index
// as a command entry does, and nothing else.
func (h *cmdFSM) noop() {
	h.index++
	h.f.ApplyBatch([]*raft.Log{{Index: h.index, Term: 1, Type: raft.LogNoop}})
}

func TestFSM_Transaction(t *testing.T) {
	v := json.RawMessage(`"v"`)
	var pop command.PopResult
	// setup: two messages of q leased to g as L, a KV row "taken", and
	// (committed) a transaction that acks in1, pushes o1 to out, writes KV
	// row "fresh" and schedules a timer.
	setup := func() *cmdFSM {
		h := newCmdFSM(t)
		h.apply(push(1000, item("q", "p", "in1", 1), item("q", "p", "in2", 2)))
		pop = requirePop(t, h.one(popCmd(1001, "g", "L", 2, 60_000)), []int64{0, 1}, nil)
		h.one(kvCmd(1002, command.KVOp{Op: command.KVPut, NS: "n", Key: "taken", Value: v, Forever: true}))
		res := run(h, &command.TransactionCommand{NowMs: 1003, TxnID: "T1",
			Ops: []command.TxnOp{
				{Type: "ack", Group: "g", Ack: &command.Ack{PartitionID: pop.PartitionID, LeaseID: "L", TransactionID: "in1", Status: command.AckCompleted}},
				{Type: "push", Items: []command.PushItem{item("out", "0", "o1", 7), item("out", "0", "o1", 8)}},
			},
			KV:     []command.KVOp{{Op: command.KVPut, NS: "n", Key: "fresh", Value: v, Forever: true}},
			Timers: []command.TimerOp{{Op: command.TimerSchedule, Queue: "out", TimerKey: "t1", DelayMs: 1000}},
		})
		if !res.Success || res.Reason != "" || len(res.Ops) != 2 || res.Ops[0].Ack == nil || !res.Ops[0].Ack.Success || res.Ops[0].Ack.LeaseReleased {
			t.Fatalf("commit: %+v", res)
		}
		push := res.Ops[1].Push
		if len(push) != 2 {
			t.Fatalf("commit's push results %+v", push)
		}
		requireResult(t, push[0], command.PushQueued, 0, 7)
		requireResult(t, push[1], command.PushDuplicate, 0, 7) // repeated inside the transaction: stored once
		if len(res.KV) != 1 || !res.KV[0].Applied || res.KV[0].Version != 1 {
			t.Fatalf("commit's KV results %+v", res.KV)
		}
		if !slices.Equal(res.Timers, []command.TimerResult{{OK: true, Status: "scheduled", DeliverAtMs: 2003}}) {
			t.Fatalf("commit's timer results %+v", res.Timers)
		}
		return h
	}

	// Commit: every part is in the state.
	h := setup()
	if ms := h.messages("out", "0"); len(ms) != 1 || ms[0].TransactionID != "o1" {
		t.Fatalf("out holds %+v, want o1 once", ms)
	}
	if c, _ := h.cursor("g", "q", "p"); len(c.Leases) != 1 || c.Leases[0].Acks[0] != command.AckCompleted || c.Leases[0].Acks[1] != "" {
		t.Fatalf("lease after the commit: %+v", c.Leases)
	}
	h.view(func(tx *store.Tx) error {
		if r, found, err := tx.KV("n", "fresh"); !found || r.Version != 1 || err != nil {
			t.Errorf("KV row fresh: %+v, %v, %v", r, found, err)
		}
		if tm, found, err := tx.Timer("out", "t1"); !found || tm.DueAtMs != 2003 || err != nil {
			t.Errorf("timer t1: %+v, %v, %v", tm, found, err)
		}
		return nil
	})

	// Rollbacks: each refusal leaves the state exactly as a replica that
	// applied no command there has it.
	ackIn2 := command.TxnOp{Type: "ack", Group: "g", Ack: &command.Ack{PartitionID: pop.PartitionID, LeaseID: "L", TransactionID: "in2", Status: command.AckCompleted}}
	pushO2 := command.TxnOp{Type: "push", Items: []command.PushItem{item("out", "0", "o2", 9)}}
	putNew := command.KVOp{Op: command.KVPut, NS: "n", Key: "new", Value: v, Forever: true}
	timer := []command.TimerOp{{Op: command.TimerSchedule, Queue: "out", TimerKey: "t2", DelayMs: 1000}}
	for _, c := range []struct {
		name   string
		cmd    command.TransactionCommand
		reason string
		abort  *command.KVAbort
	}{
		{"kv precondition", command.TransactionCommand{Ops: []command.TxnOp{ackIn2, pushO2}, Timers: timer,
			KV: []command.KVOp{putNew, {Op: command.KVPutIfAbsent, NS: "n", Key: "taken", Value: v, Forever: true, Required: true}}},
			command.RollbackKVPrecondition, &command.KVAbort{FailedIndex: 1, KVReason: command.KVExists, Version: 1, Value: v}},
		{"duplicate push", command.TransactionCommand{Ops: []command.TxnOp{ackIn2, pushO2, {Type: "push", Items: []command.PushItem{item("out", "0", "o1", 10)}}},
			KV: []command.KVOp{putNew}, Timers: timer}, command.RollbackDuplicate, nil},
		{"ack on a wrong lease", command.TransactionCommand{Ops: []command.TxnOp{pushO2,
			{Type: "ack", Group: "g", Ack: &command.Ack{PartitionID: pop.PartitionID, LeaseID: "wrong", TransactionID: "in2", Status: command.AckCompleted}}},
			KV: []command.KVOp{putNew}, Timers: timer}, command.RollbackRejectedAck, nil},
		{"ack of a message not in the lease", command.TransactionCommand{Ops: []command.TxnOp{pushO2,
			{Type: "ack", Group: "g", Ack: &command.Ack{PartitionID: pop.PartitionID, LeaseID: "L", TransactionID: "elsewhere", Status: command.AckCompleted}}},
			KV: []command.KVOp{putNew}, Timers: timer}, command.RollbackRejectedAck, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			applied, untouched := setup(), setup()
			c.cmd.NowMs, c.cmd.TxnID = 1003, "T2" // not past the clock: the clock stays as it was
			res := run(applied, &c.cmd)
			if res.Success || res.Reason != c.reason || res.Error == "" || res.Ops != nil || res.KV != nil || res.Timers != nil {
				t.Fatalf("answer %+v, want a rollback for %s", res, c.reason)
			}
			if !reflect.DeepEqual(res.Abort, c.abort) {
				t.Fatalf("abort %+v, want %+v", res.Abort, c.abort)
			}
			untouched.noop()
			if !slices.Equal(snapshotBytes(t, applied.f), snapshotBytes(t, untouched.f)) {
				t.Fatal("the rolled-back transaction changed the state")
			}
		})
	}
}

func TestFSM_Retain(t *testing.T) {
	h := newCmdFSM(t)
	one := int64(1)
	// Retention of 1 s seals a segment once it is 1 s old: each push
	// below (one message in each of p and r) starts a segment.
	run(h, &command.ConfigureQueueCommand{NowMs: 0, Queue: "q", Options: command.QueueOptions{RetentionSeconds: &one}})
	for i := range 3 {
		h.apply(push(int64(1000*(i+1)), item("q", "p", fmt.Sprint("a", i), byte(i)), item("q", "r", fmt.Sprint("b", i), byte(10+i))))
	}
	q := h.queue("q")
	point := func(lim store.RetentionLimit) uint64 {
		var pos uint64
		h.view(func(tx *store.Tx) error {
			var found bool
			pos, found, _ = tx.RetentionPoint(q.ID, lim)
			if !found {
				t.Fatalf("no retention point for %+v", lim)
			}
			return nil
		})
		return pos
	}
	first := point(store.RetentionLimit{CutoffMs: 1500})  // the first second's segment
	second := point(store.RetentionLimit{CutoffMs: 2500}) // and the next one's
	if !(0 < first && first < second) {
		t.Fatalf("retention points %d, %d", first, second)
	}
	starts := func() map[string]uint64 {
		out := map[string]uint64{}
		h.view(func(tx *store.Tx) error {
			parts, err := tx.Partitions(q.ID)
			for _, p := range parts {
				out[p.Name] = p.StartOffset
			}
			return err
		})
		return out
	}

	// Group g read offset 0 of p and failed it: it waits for redelivery.
	g := run(h, &command.PopCommand{NowMs: 3000, Group: "g", Queue: "q", Partition: "p", Batch: 1, LeaseMs: 60_000, LeaseID: "L"})
	if !slices.Equal(g.Offsets, []int64{0}) {
		t.Fatalf("g's pop: %+v", g)
	}
	if r := h.one(ackCmd(3000, "g", command.Ack{PartitionID: g.PartitionID, LeaseID: "L", TransactionID: "a0", Status: command.AckFailed})).([]command.AckResult)[0]; !r.LeaseReleased {
		t.Fatalf("g's failed ack: %+v", r)
	}

	// Proposals that do not hold change nothing.
	nextID := h.meta().NextID
	for name, c := range map[string]command.RetainCommand{
		"a cutoff in the future":         {NowMs: 3000, QueueID: q.ID, Pos: first, CutoffMs: 3001},
		"not the end of a segment":       {NowMs: 3000, QueueID: q.ID, Pos: first + 1, CutoffMs: 1500},
		"a segment not past the cutoff":  {NowMs: 3000, QueueID: q.ID, Pos: second, CutoffMs: 1500},
		"an unknown queue":               {NowMs: 3000, QueueID: q.ID + 1000, Pos: first, CutoffMs: 1500},
		"a completed cutoff (in future)": {NowMs: 3000, QueueID: q.ID, Pos: second, CutoffMs: 1500, CompletedPos: second, CompletedCutoffMs: 9000},
	} {
		if r := run(h, &c); r.Started {
			t.Fatalf("%s: started a trim", name)
		}
	}
	if ts, m := h.tombstones(), h.meta(); len(ts) != 0 || m.NextID != nextID {
		t.Fatalf("refused proposals left tombstones %+v, id counter %d (was %d)", ts, m.NextID, nextID)
	}

	// A proposal that holds files a trim; cleanup drops the data before
	// it and moves every partition's start past it.
	if r := run(h, &command.RetainCommand{NowMs: 3000, QueueID: q.ID, Pos: first, CutoffMs: 1500}); !r.Started {
		t.Fatal("retain did not start a trim")
	}
	if ts := h.tombstones(); len(ts) != 1 || ts[0].Kind != store.TombstoneTrim || ts[0].QueueID != q.ID || ts[0].Pos != first || ts[0].Seq != nextID {
		t.Fatalf("tombstones %+v, want a trim of queue %d before %d", ts, q.ID, first)
	}
	h.cleanUp()
	if got := starts(); !maps.Equal(got, map[string]uint64{"p": 1, "r": 1}) {
		t.Fatalf("partition starts after the trim: %v", got)
	}
	if ms := h.messages("q", "p"); len(ms) != 2 || ms[0].Offset != 1 || ms[1].Offset != 2 {
		t.Fatalf("p holds %+v after the trim, want offsets 1 and 2", ms)
	}
	// Repeating it finds the segment gone.
	if r := run(h, &command.RetainCommand{NowMs: 3000, QueueID: q.ID, Pos: first, CutoffMs: 1500}); r.Started {
		t.Fatal("a repeated retain started another trim")
	}
	// The dedup index is not trimmed: a retried id is still a duplicate.
	requireResult(t, pushResults(t, h.one(push(3001, item("q", "p", "a0", 9))))[0], command.PushDuplicate, 0, 0)
	// g's cursor, left behind, jumps to the new start and counts the
	// message it never finished; a new group starts there and lost none.
	g = run(h, &command.PopCommand{NowMs: 3002, Group: "g", Queue: "q", Partition: "p", Batch: 10, LeaseMs: 60_000, LeaseID: "L2"})
	if !slices.Equal(g.Offsets, []int64{1, 2}) || !slices.Equal(g.Attempts, []int32{1, 1}) {
		t.Fatalf("g's pop after the trim: %v (attempts %v)", g.Offsets, g.Attempts)
	}
	if c, _ := h.cursor("g", "q", "p"); c.Expired != 1 || c.Offset != 1 || len(c.Failures) != 0 {
		t.Fatalf("g's cursor after the trim: %+v; want offset 1, 1 expired, no failures", c)
	}
	requirePop(t, h.one(popCmd(3002, "g2", "K", 10, 60_000)), []int64{1, 2}, nil)
	if c, _ := h.cursor("g2", "q", "p"); c.Expired != 0 {
		t.Fatalf("a new group counts %d expired", c.Expired)
	}

	// What every group finished: segments that end by CompletedPos and
	// were last appended to before CompletedCutoffMs.
	if r := run(h, &command.RetainCommand{NowMs: 3003, QueueID: q.ID, Pos: second, CompletedPos: second, CompletedCutoffMs: 2500}); !r.Started {
		t.Fatal("retain of completed messages did not start a trim")
	}
	h.cleanUp()
	if got := starts(); !maps.Equal(got, map[string]uint64{"p": 2, "r": 2}) {
		t.Fatalf("partition starts after the trim of completed messages: %v", got)
	}

	// By size: the stream keeps at least KeepBytes; every sealed segment
	// goes, the active one stays.
	h.apply(push(4000, item("q", "p", "a3", 3), item("q", "r", "b3", 13))) // seals the segment of 3000
	sealed := point(store.RetentionLimit{KeepBytes: 1})
	if sealed <= second {
		t.Fatalf("retention point by size %d, not past %d", sealed, second)
	}
	if r := run(h, &command.RetainCommand{NowMs: 4000, QueueID: q.ID, Pos: sealed, KeepBytes: 1}); !r.Started {
		t.Fatal("retain by size did not start a trim")
	}
	h.cleanUp()
	if got := starts(); !maps.Equal(got, map[string]uint64{"p": 3, "r": 3}) {
		t.Fatalf("partition starts after the trim by size: %v", got)
	}
	if ms := h.messages("q", "r"); len(ms) != 1 || ms[0].TransactionID != "b3" {
		t.Fatalf("r holds %+v, want b3 alone", ms)
	}
}

// An ack of a leased message that retention trimmed: from log format 2 the
// trimmed offset holds no entry, so an ack of transactionId x (which only
// offset 1 still holds) is booked on offset 1 and its dead letter carries
// offset 1's payload. Up to format 1 the state machine answered the next
// entry for a trimmed offset, booking the ack on offset 0 with offset 1's
// payload; a replica keeps doing so for entries of that format, as older
// binaries applying the same log do.
func TestFSM_Retain_AckOfATrimmedOffset(t *testing.T) {
	for _, tc := range []struct {
		format     command.LogFormat
		wantOffset int64
	}{{command.LogFormat1, 0}, {command.LogFormat2, 1}} {
		t.Run(fmt.Sprintf("format %d", tc.format), func(t *testing.T) {
			h := newCmdFSM(t)
			if tc.format >= command.LogFormat2 {
				h.apply((&command.SetLogFormatCommand{Format: tc.format}).Encode())
			}
			zero, one, noRetry := int64(0), int64(1), int32(0)
			run(h, &command.ConfigureQueueCommand{NowMs: 0, Queue: "q", Options: command.QueueOptions{DedupWindowSeconds: &zero, RetentionSeconds: &one, RetryLimit: &noRetry}})
			msg := func(txID string, tag byte, payload string) command.PushItem {
				return command.PushItem{Queue: "q", Partition: "p", TransactionID: txID, MessageID: [16]byte{tag}, Payload: []byte(payload)}
			}
			h.apply(push(1000, msg("x", 1, `"A"`)), push(2000, msg("x", 2, `"B"`)), push(3000, msg("y", 3, `"C"`)))
			pop := requirePop(t, h.one(popCmd(3000, "g", "L", 2, 60_000)), []int64{0, 1}, nil)
			q := h.queue("q")
			var first uint64
			h.view(func(tx *store.Tx) (err error) {
				first, _, err = tx.RetentionPoint(q.ID, store.RetentionLimit{CutoffMs: 1500})
				return err
			})
			if r := run(h, &command.RetainCommand{NowMs: 3000, QueueID: q.ID, Pos: first, CutoffMs: 1500}); !r.Started {
				t.Fatal("retain did not start a trim")
			}
			h.cleanUp()
			h.view(func(tx *store.Tx) error {
				if e, found, err := tx.EntryAt(pop.PartitionID, 0); found || err != nil {
					t.Errorf("EntryAt(0) after the trim: offset %d found, %v; want not found", e.Offset, err)
				}
				return nil
			})
			r := h.one(ackCmd(3001, "g", command.Ack{PartitionID: pop.PartitionID, LeaseID: "L", TransactionID: "x", Status: command.AckFailed})).([]command.AckResult)[0]
			if !r.Success || !r.DeadLettered {
				t.Fatalf("failing x: %+v", r)
			}
			var dls []store.DeadLetter
			h.view(func(tx *store.Tx) (err error) {
				dls, err = tx.DeadLetters(q.ID, 10)
				return err
			})
			if len(dls) != 1 || dls[0].Offset != tc.wantOffset || string(dls[0].Payload) != `"B"` {
				t.Fatalf("dead letters %+v, want offset %d with the payload \"B\"", dls, tc.wantOffset)
			}
		})
	}
}
