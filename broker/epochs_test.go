package broker

import (
	"testing"

	"github.com/hashicorp/raft"
	"github.com/waggle-mq/waggle/command"
)

func TestShareBytes(t *testing.T) {
	for _, c := range []struct {
		kept  []uint64
		total uint64
		want  []int64
	}{
		{[]uint64{1}, 100, []int64{100}},
		{[]uint64{1, 1}, 100, []int64{50, 50}},
		{[]uint64{1, 0, 3}, 100, []int64{25, 0, 75}},
		{[]uint64{1, 1, 1}, 100, []int64{33, 33, 34}}, // the remainder to the last
		{[]uint64{0, 0}, 100, []int64{100, 0}},        // nothing kept: markers or trimmed data
	} {
		sizes := make([]int64, len(c.kept))
		var sum uint64
		for _, k := range c.kept {
			sum += k
		}
		shareBytes(sizes, c.kept, sum, c.total)
		for i := range sizes {
			if sizes[i] != c.want[i] {
				t.Errorf("kept %v of %d bytes: %v, want %v", c.kept, c.total, sizes, c.want)
				break
			}
		}
	}
}

// PartitionSizes grows with what a partition keeps, and the leader epoch
// is the raft term.
func TestPartitionSizesAndLeaderEpoch(t *testing.T) {
	s := startService(t)
	if got, want := s.LeaderEpoch(), int32(s.node.Raft.CurrentTerm()); got != want || got < 1 {
		t.Fatalf("leader epoch %d, want the term %d", got, want)
	}
	if s.node.Raft.State() != raft.Leader {
		t.Fatal("not the leader")
	}
	if outcome, err := s.CreateTopic("t", 2, nil); err != nil || outcome != command.TopicOK {
		t.Fatalf("create topic: %v, %v", outcome, err)
	}
	infos, err := s.Topics([]string{"t"})
	if err != nil || len(infos) != 1 {
		t.Fatalf("topics: %v, %v", infos, err)
	}
	sizes, err := s.PartitionSizes(infos[0])
	if err != nil || len(sizes) != 2 || sizes[0] != 0 || sizes[1] != 0 {
		t.Fatalf("empty topic: %v, %v", sizes, err)
	}
	var last int64
	for i := range 3 {
		produceOne(t, s, "t")
		sizes, err = s.PartitionSizes(infos[0])
		if err != nil || sizes[0] <= last || sizes[1] != 0 {
			t.Fatalf("after %d produces: %v, %v (was %d)", i+1, sizes, err, last)
		}
		last = sizes[0]
	}
}

// LeaderEpoch is on Fetch's hot path (once per request): one atomic load.
func BenchmarkLeaderEpoch(b *testing.B) {
	s := startService(b)
	for b.Loop() {
		_ = s.LeaderEpoch()
	}
}
