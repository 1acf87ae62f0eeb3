package txncheck

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var (
	base   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pA, pB = Partition{"a", 0}, Partition{"b", 0}
)

func at(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }

func rec(p Partition, off int64, v string) Record { return Record{p, off, v} }

func obs(p Partition, off int64, v string, ms int) Observation {
	return Observation{rec(p, off, v), at(ms)}
}

func put(p Partition, v string, off int64) Write { return Write{p, v, off} }

// clean is a history with no anomaly: two overlapping writers, an aborted
// transaction whose records hold offsets the final log skips, a
// consume-transform-produce transaction, and a reader of each isolation.
func clean() *History {
	return &History{
		Txns: []Txn{
			{ID: "T1", Producer: "p1", Start: at(0), EndCalled: at(10), End: at(12), Outcome: Committed,
				Writes: []Write{put(pA, "a1", 0)}},
			{ID: "T2", Producer: "p2", Start: at(5), EndCalled: at(20), End: at(22), Outcome: Committed,
				Writes: []Write{put(pA, "a2", 1), put(pB, "b1", 0)}},
			{ID: "T3", Producer: "p1", Start: at(15), EndCalled: at(25), End: at(26), Outcome: Aborted,
				Writes: []Write{put(pA, "a3", 2)}},
			{ID: "T4", Producer: "p3", Group: "g", Start: at(30), EndCalled: at(40), End: at(42), Outcome: Committed,
				Reads:  []Observation{obs(pA, 0, "a1", 31), obs(pA, 1, "a2", 31)},
				Writes: []Write{put(pB, "b2", 2)}},
		},
		Readers: []Reader{
			{Name: "committed", ReadCommitted: true, Seen: []Observation{
				obs(pA, 0, "a1", 13), obs(pA, 1, "a2", 23), obs(pB, 0, "b1", 23), obs(pB, 2, "b2", 43)}},
			{Name: "uncommitted", Seen: []Observation{
				obs(pA, 0, "a1", 3), obs(pA, 1, "a2", 8), obs(pA, 2, "a3", 18)}},
		},
		Final: map[Partition][]Record{
			pA: {rec(pA, 0, "a1"), rec(pA, 1, "a2")}, // a3 at 2 aborted, its marker at 3
			pB: {rec(pB, 0, "b1"), rec(pB, 2, "b2")}, // T2's commit marker at 1
		},
		GroupOffsets: map[string]map[Partition]int64{"g": {pA: 2}},
	}
}

func txn(h *History, id string) *Txn {
	i := slices.IndexFunc(h.Txns, func(t Txn) bool { return t.ID == id })
	return &h.Txns[i]
}

func TestCheckFindsEachAnomaly(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(h *History)
		want   []Kind
	}{
		{"clean", func(h *History) {}, nil},
		{"committed write missing", func(h *History) {
			h.Final[pB] = h.Final[pB][:1]
		}, []Kind{Lost}},
		{"value twice in the log", func(h *History) {
			h.Final[pA] = append(h.Final[pA], rec(pA, 4, "a1"))
		}, []Kind{Duplicate}},
		{"value read at another offset", func(h *History) {
			txn(h, "T4").Reads[1].Offset = 5
		}, []Kind{InconsistentOffset}},
		{"value nobody wrote", func(h *History) {
			h.Final[pA] = append(h.Final[pA], rec(pA, 4, "zz"))
		}, []Kind{UnknownValue}},
		{"half a transaction", func(h *History) {
			txn(h, "T2").Outcome = Unknown
			h.Final[pB] = h.Final[pB][1:]
		}, []Kind{Partial}},
		{"aborted write read committed", func(h *History) {
			h.Readers[0].Seen = slices.Insert(h.Readers[0].Seen, 2, obs(pA, 2, "a3", 27))
		}, []Kind{AbortedRead}},
		{"write read before its commit", func(h *History) {
			h.Readers[0].Seen[1].At = at(15)
		}, []Kind{IntermediateRead}},
		{"transactions that read each other", func(h *History) {
			// Each read the other's write: with honest clocks one of the
			// reads came before a commit was asked for.
			txn(h, "T1").Reads = []Observation{obs(pB, 2, "b2", 5)}
		}, []Kind{CircularFlow, IntermediateRead}},
		{"offset order against real time", func(h *History) {
			txn(h, "T2").Start = at(13) // after T1 ended, yet written first
			txn(h, "T1").Writes[0].Offset, txn(h, "T2").Writes[0].Offset = 1, 0
			h.Final[pA] = []Record{rec(pA, 0, "a2"), rec(pA, 1, "a1")}
			txn(h, "T4").Reads = []Observation{obs(pA, 0, "a2", 31), obs(pA, 1, "a1", 31)}
			h.Readers = nil
		}, []Kind{WriteOrder}},
		{"a long transaction spans a producer's next two", func(h *History) {
			// L writes to a before A and to b after B: offset order and
			// process order form a cycle, yet every write came after its
			// transaction began and before it asked to commit.
			*h = History{
				Txns: []Txn{
					{ID: "L", Producer: "p9", Start: at(0), EndCalled: at(100), End: at(101), Outcome: Committed,
						Writes: []Write{put(pA, "l1", 0), put(pB, "l2", 1)}},
					{ID: "A", Producer: "p1", Start: at(10), EndCalled: at(20), End: at(21), Outcome: Committed,
						Writes: []Write{put(pA, "a1", 1)}},
					{ID: "B", Producer: "p1", Start: at(30), EndCalled: at(40), End: at(41), Outcome: Committed,
						Writes: []Write{put(pB, "b1", 0)}},
				},
				Final: map[Partition][]Record{
					pA: {rec(pA, 0, "l1"), rec(pA, 1, "a1")},
					pB: {rec(pB, 0, "b1"), rec(pB, 1, "l2")},
				},
			}
		}, nil},
		{"reader passed over a record", func(h *History) {
			h.Readers[0].Seen = h.Readers[0].Seen[1:]
		}, []Kind{Skip}},
		{"reader went back", func(h *History) {
			h.Readers[1].Seen = append(h.Readers[1].Seen, obs(pA, 0, "a1", 19))
		}, []Kind{Backwards}},
		{"group consumed a record twice", func(h *History) {
			h.Txns = append(h.Txns, Txn{ID: "T5", Producer: "p3", Group: "g", Start: at(45), EndCalled: at(50), End: at(52),
				Outcome: Committed, Reads: []Observation{obs(pA, 0, "a1", 46)}, Writes: []Write{put(pB, "b3", 4)}})
			h.Final[pB] = append(h.Final[pB], rec(pB, 4, "b3"))
			// T5 also read a stale prefix of a after T2 committed: G-single.
		}, []Kind{DoubleConsume, GSingle}},
		{"group committed past a record it never consumed", func(h *History) {
			h.GroupOffsets["g"][pB] = 1
		}, []Kind{MissedConsume}},
		{"concurrent writers interleaved", func(h *History) {
			txn(h, "T1").Writes = append(txn(h, "T1").Writes, put(pB, "bT1", 1))
			txn(h, "T4").Writes[0].Offset = 3
			h.Final[pB] = []Record{rec(pB, 0, "b1"), rec(pB, 1, "bT1"), rec(pB, 3, "b2")}
			h.Readers[0].Seen = slices.Insert(h.Readers[0].Seen, 3, obs(pB, 1, "bT1", 23))
			h.Readers[0].Seen[4].Offset = 3
		}, []Kind{WriteCycle}},
		{"read one partition fresh and another stale", func(h *History) {
			h.Txns = append(h.Txns, Txn{ID: "T6", Producer: "p4", Start: at(23), EndCalled: at(25), End: at(26),
				Outcome: Committed, Reads: []Observation{obs(pB, 0, "b1", 24), obs(pA, 0, "a1", 24)}})
		}, []Kind{GSingle}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := clean()
			tc.mutate(h)
			r := Check(h)
			var got []Kind
			for k, n := range r.Counts {
				if n > 0 {
					got = append(got, k)
				}
			}
			slices.Sort(got)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("found %q, want %q\n%s", got, want, r)
			}
			wantForbidden := slices.ContainsFunc(want, func(k Kind) bool { return slices.Contains(forbidden, k) })
			if (r.Forbidden() > 0) != wantForbidden {
				t.Fatalf("Forbidden() = %d, want forbidden %v\n%s", r.Forbidden(), wantForbidden, r)
			}
		})
	}
}

// TestCheckPassesABigSerialHistory runs a generated history in which
// transactions run one at a time, so every dependency agrees with real
// time: nothing may be reported, and the check must stay fast at size.
func TestCheckPassesABigSerialHistory(t *testing.T) {
	h := serialHistory(5000, rand.New(rand.NewPCG(1, 2)))
	start := time.Now()
	r := Check(h)
	if n := len(r.Counts); n != 0 {
		t.Fatalf("serial history reported anomalies:\n%s", r)
	}
	if r.Stats.Committed == 0 || r.Stats.WR == 0 || r.Stats.RW == 0 || r.Stats.WW == 0 {
		t.Fatalf("generator made a trivial history: %s", r)
	}
	t.Logf("%s in %v", r, time.Since(start))
}

func serialHistory(n int, rnd *rand.Rand) *History {
	parts := []Partition{pA, pB, {"a", 1}, {"b", 1}}
	h := &History{Final: map[Partition][]Record{}, GroupOffsets: map[string]map[Partition]int64{"g": {}}}
	next := map[Partition]int64{}
	consumed := map[Partition]int{} // records of the final log the group has consumed
	for i := range n {
		t := Txn{ID: fmt.Sprintf("T%d", i), Producer: fmt.Sprintf("p%d", i%4),
			Start: at(10 * i), EndCalled: at(10*i + 5), End: at(10*i + 6), Outcome: Committed}
		aborted := i%5 == 4
		if aborted {
			t.Outcome = Aborted
		}
		if i%3 == 0 { // a group transaction consumes what it has not yet
			t.Group = "g"
			for _, p := range parts[:2] {
				for _, r := range h.Final[p][consumed[p]:] {
					t.Reads = append(t.Reads, Observation{r, at(10*i + 1)})
				}
				if !aborted {
					consumed[p] = len(h.Final[p])
					h.GroupOffsets["g"][p] = next[p]
				}
			}
		}
		for k := range 1 + rnd.IntN(3) {
			p := parts[rnd.IntN(len(parts))]
			v := fmt.Sprintf("%s-%d", t.ID, k)
			t.Writes = append(t.Writes, Write{p, v, next[p]})
			if !aborted {
				h.Final[p] = append(h.Final[p], Record{p, next[p], v})
			}
			next[p]++
		}
		for _, w := range t.Writes { // one control record per partition touched
			next[w.Partition]++
		}
		h.Txns = append(h.Txns, t)
	}
	return h
}
