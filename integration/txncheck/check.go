package txncheck

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Kind is one class of anomaly.
type Kind string

// The classes Kafka's transactions forbid: any of them fails a run.
const (
	// Lost: a write of a committed transaction is missing from the final log.
	Lost Kind = "lost write"
	// Duplicate: one value at more than one offset of the final log.
	Duplicate Kind = "duplicate"
	// InconsistentOffset: one offset read with two values, or one value
	// read at two offsets, by any two reads or produce answers.
	InconsistentOffset Kind = "inconsistent offset"
	// UnknownValue: a record nobody wrote, or in a partition it was not
	// written to.
	UnknownValue Kind = "unknown value"
	// Partial: some but not all of a transaction's writes are in the final log.
	Partial Kind = "partial transaction"
	// AbortedRead (G1a): a read_committed read returned a write of a
	// transaction that did not commit.
	AbortedRead Kind = "G1a aborted read"
	// IntermediateRead (G1b): a read_committed read returned a write before
	// its transaction had asked to commit: a state the transaction was still
	// building.
	IntermediateRead Kind = "G1b intermediate read"
	// CircularFlow (G1c): a cycle of write-read, process and real-time
	// order: transactions that each saw the other's effects.
	CircularFlow Kind = "G1c circular information flow"
	// WriteOrder: a partition holds a write of T before a write of U,
	// though U had finished writing (asked to commit) before T began.
	// Offsets are assigned in the order produces arrive, so that order
	// contradicts real time.
	WriteOrder Kind = "G0 write order against real time"
	// Skip: a plain read_committed reader passed over a committed record.
	Skip Kind = "skipped offset"
	// Backwards: a plain reader's offsets in a partition went down or repeated.
	Backwards Kind = "offset went backwards"
	// DoubleConsume: two committed transactions of one consumer group
	// consumed the same record (exactly-once broken).
	DoubleConsume Kind = "consumed twice"
	// MissedConsume: a record below a group's committed offset that no
	// committed transaction of the group consumed.
	MissedConsume Kind = "consumption skipped"
)

// The classes Kafka's transactions allow, counted and reported.
const (
	// WriteCycle (G0): concurrent transactions whose writes interleave in
	// opposite orders in two partitions. Kafka orders a partition by when
	// each produce arrived, not by commit.
	WriteCycle Kind = "G0 write cycle (allowed)"
	// GSingle: a cycle with exactly one read-write edge: a transaction
	// read a partition's prefix that lacks a write of one that came before
	// it, by real time or through what it read elsewhere. Consumers lag,
	// and a poll reads each partition at its own position, so Kafka allows
	// these stale reads.
	GSingle Kind = "G-single stale read (allowed)"
)

var forbidden = []Kind{Lost, Duplicate, InconsistentOffset, UnknownValue, Partial, AbortedRead, IntermediateRead,
	CircularFlow, WriteOrder, Skip, Backwards, DoubleConsume, MissedConsume}

// maxExamples bounds the examples a report keeps per kind.
const maxExamples = 5

// Report is what Check found.
type Report struct {
	Counts   map[Kind]int
	Examples map[Kind][]string
	Stats    Stats
}

// Stats sizes the history, so a report says how much was checked.
type Stats struct {
	Committed, Aborted, Unknown, UnknownVisible int
	Writes, TxnReads, Observations, Final       int
	WW, WR, RW, PO                              int
}

// Forbidden is the number of anomalies of the classes Kafka forbids.
func (r *Report) Forbidden() int {
	n := 0
	for _, k := range forbidden {
		n += r.Counts[k]
	}
	return n
}

func (r *Report) add(k Kind, format string, args ...any) {
	r.Counts[k]++
	if len(r.Examples[k]) < maxExamples {
		r.Examples[k] = append(r.Examples[k], fmt.Sprintf(format, args...))
	}
}

// String lists the figures and every class found, with examples.
func (r *Report) String() string {
	var b strings.Builder
	s := r.Stats
	fmt.Fprintf(&b, "txns %d committed, %d aborted, %d unknown (%d of them visible); %d writes, %d txn reads, %d reader observations, %d final records; edges ww %d, wr %d, rw %d, po %d",
		s.Committed, s.Aborted, s.Unknown, s.UnknownVisible, s.Writes, s.TxnReads, s.Observations, s.Final, s.WW, s.WR, s.RW, s.PO)
	kinds := append(slices.Clone(forbidden), WriteCycle, GSingle)
	for _, k := range kinds {
		if r.Counts[k] == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s: %d", k, r.Counts[k])
		for _, e := range r.Examples[k] {
			fmt.Fprintf(&b, "\n    %s", e)
		}
	}
	return b.String()
}

// write is where a value came from.
type write struct {
	txn int // index in History.Txns
	w   Write
}

// checker holds the indexes one Check builds.
type checker struct {
	h       *History
	r       *Report
	writes  map[string]write               // value -> its write
	final   map[string]Record              // value -> where the final log holds it
	at      map[Partition]map[int64]string // offset -> value, from the final log
	visible []bool                         // per txn: its effects are in the final log
}

// Check checks a history and reports every anomaly it finds.
func Check(h *History) *Report {
	c := &checker{h: h, r: &Report{Counts: map[Kind]int{}, Examples: map[Kind][]string{}},
		writes: map[string]write{}, final: map[string]Record{}, at: map[Partition]map[int64]string{}}
	c.indexWrites()
	c.checkFinal()
	c.checkTxns()
	c.checkReads()
	c.checkGroups()
	c.checkWriteOrder()
	c.checkGraph()
	return c.r
}

func (c *checker) indexWrites() {
	for i, t := range c.h.Txns {
		for _, w := range t.Writes {
			if _, dup := c.writes[w.Value]; dup {
				panic("txncheck: value " + w.Value + " written twice by the workload; values must be unique")
			}
			c.writes[w.Value] = write{txn: i, w: w}
		}
		c.r.Stats.Writes += len(t.Writes)
		c.r.Stats.TxnReads += len(t.Reads)
	}
}

// checkFinal checks the final log alone: every value known, each once, no
// offset twice.
func (c *checker) checkFinal() {
	for _, p := range sortedPartitions(c.h.Final) {
		offsets := map[int64]string{}
		c.at[p] = offsets
		for _, rec := range c.h.Final[p] {
			c.r.Stats.Final++
			if v, ok := offsets[rec.Offset]; ok {
				c.r.add(InconsistentOffset, "final log %s offset %d read as %q and %q", p, rec.Offset, v, rec.Value)
				continue
			}
			offsets[rec.Offset] = rec.Value
			if first, ok := c.final[rec.Value]; ok {
				c.r.add(Duplicate, "%q at %s offset %d and %s offset %d", rec.Value, first.Partition, first.Offset, p, rec.Offset)
				continue
			}
			c.final[rec.Value] = rec
			w, ok := c.writes[rec.Value]
			switch {
			case !ok:
				c.r.add(UnknownValue, "%q at %s offset %d was never written", rec.Value, p, rec.Offset)
			case w.w.Partition != p:
				c.r.add(UnknownValue, "%q written to %s found in %s", rec.Value, w.w.Partition, p)
			case w.w.Offset >= 0 && w.w.Offset != rec.Offset:
				c.r.add(InconsistentOffset, "%q acknowledged at %s offset %d, final log has it at %d", rec.Value, p, w.w.Offset, rec.Offset)
			}
		}
	}
}

// checkTxns checks each transaction against the final log: all or nothing,
// all for a commit, nothing for an abort.
func (c *checker) checkTxns() {
	c.visible = make([]bool, len(c.h.Txns))
	for i, t := range c.h.Txns {
		present := 0
		for _, w := range t.Writes {
			if _, ok := c.final[w.Value]; ok {
				present++
			}
		}
		switch t.Outcome {
		case Committed:
			c.r.Stats.Committed++
			c.visible[i] = true
			for _, w := range t.Writes {
				if _, ok := c.final[w.Value]; !ok {
					c.r.add(Lost, "%q of committed %s (%s) missing from the final log", w.Value, t.ID, w.Partition)
				}
			}
		case Aborted:
			c.r.Stats.Aborted++
			if present > 0 {
				c.r.add(AbortedRead, "%d of %d writes of aborted %s are in the final log", present, len(t.Writes), t.ID)
			}
		case Unknown:
			c.r.Stats.Unknown++
			if present > 0 {
				c.r.Stats.UnknownVisible++
				c.visible[i] = true
			}
		}
		if present > 0 && present < len(t.Writes) {
			c.r.add(Partial, "%s (%s): %d of %d writes in the final log", t.ID, t.Outcome, present, len(t.Writes))
		}
	}
}

// checkRead checks one read_committed read of a record: it must be the
// final log's record at that offset, of a transaction that committed, read
// after that transaction asked to commit.
func (c *checker) checkRead(who string, o Observation) {
	w, written := c.writes[o.Value]
	if !written {
		c.r.add(UnknownValue, "%s read %q at %s offset %d, never written", who, o.Value, o.Partition, o.Offset)
		return
	}
	t := c.h.Txns[w.txn]
	if !c.visible[w.txn] {
		c.r.add(AbortedRead, "%s read %q of %s %s at %s offset %d", who, o.Value, t.Outcome, t.ID, o.Partition, o.Offset)
	} else if !t.EndCalled.IsZero() && o.At.Before(t.EndCalled) {
		c.r.add(IntermediateRead, "%s read %q of %s %v before it asked to commit", who, o.Value, t.ID, t.EndCalled.Sub(o.At).Round(time.Microsecond))
	}
}

// checkOffset checks that an offset always holds the same value, as far as
// the final log and the produce answers know.
func (c *checker) checkOffset(who string, o Observation) {
	if v, ok := c.at[o.Partition][o.Offset]; ok && v != o.Value {
		c.r.add(InconsistentOffset, "%s read %q at %s offset %d, the final log has %q there", who, o.Value, o.Partition, o.Offset, v)
		return
	}
	if w, ok := c.writes[o.Value]; ok && w.w.Offset >= 0 && (w.w.Offset != o.Offset || w.w.Partition != o.Partition) {
		c.r.add(InconsistentOffset, "%s read %q at %s offset %d, acknowledged at %s offset %d", who, o.Value, o.Partition, o.Offset, w.w.Partition, w.w.Offset)
	}
}

// checkReads checks what plain readers and transactions read.
func (c *checker) checkReads() {
	for _, t := range c.h.Txns {
		for _, o := range t.Reads {
			c.checkOffset(t.ID, o)
			c.checkRead(t.ID, o)
		}
	}
	for _, rd := range c.h.Readers {
		c.r.Stats.Observations += len(rd.Seen)
		last := map[Partition]int64{}
		for _, o := range rd.Seen {
			c.checkOffset(rd.Name, o)
			prev, seen := last[o.Partition]
			if seen && o.Offset <= prev {
				c.r.add(Backwards, "%s read %s offset %d after offset %d", rd.Name, o.Partition, o.Offset, prev)
				continue
			}
			last[o.Partition] = o.Offset
			if !rd.ReadCommitted {
				continue // it may read aborted records, which the final log lacks
			}
			c.checkRead(rd.Name, o)
			if next, ok := c.successor(o.Partition, prev, seen); ok && next.Offset < o.Offset {
				c.r.add(Skip, "%s read %s offset %d, passing over %q at offset %d", rd.Name, o.Partition, o.Offset, next.Value, next.Offset)
			}
		}
	}
}

// successor is the final log's first record of p after offset prev (or its
// first record, when nothing was read before), passing over duplicates.
func (c *checker) successor(p Partition, prev int64, seen bool) (Record, bool) {
	log := c.h.Final[p]
	i := 0
	if seen {
		i = sort.Search(len(log), func(i int) bool { return log[i].Offset > prev })
	}
	for ; i < len(log); i++ {
		if c.final[log[i].Value] == log[i] {
			return log[i], true
		}
	}
	return Record{}, false
}

// checkGroups checks consume-transform-produce: each record below a
// group's committed offset was consumed by exactly one committed
// transaction of the group.
func (c *checker) checkGroups() {
	type key struct {
		group string
		value string
	}
	by := map[key]string{}   // consumed record -> the committed txn that consumed it
	unsure := map[key]bool{} // consumed by a transaction whose outcome nobody can know
	for i, t := range c.h.Txns {
		if t.Group == "" {
			continue
		}
		for _, o := range t.Reads {
			k := key{t.Group, o.Value}
			switch {
			case c.visible[i]:
				if first, ok := by[k]; ok && first != t.ID {
					c.r.add(DoubleConsume, "group %s: %q consumed by committed %s and %s", t.Group, o.Value, first, t.ID)
					continue
				}
				by[k] = t.ID
			case t.Outcome == Unknown && len(t.Writes) == 0:
				unsure[k] = true // wrote nothing, so the final log cannot say whether it committed
			}
		}
	}
	for _, group := range sortedKeys(c.h.GroupOffsets) {
		for _, p := range sortedPartitions(c.h.GroupOffsets[group]) {
			next := c.h.GroupOffsets[group][p]
			for _, rec := range c.h.Final[p] {
				if rec.Offset >= next {
					break
				}
				k := key{group, rec.Value}
				if _, ok := by[k]; !ok && !unsure[k] {
					c.r.add(MissedConsume, "group %s committed %s up to %d but no committed txn consumed %q at %d", group, p, next, rec.Value, rec.Offset)
				}
			}
		}
	}
}

// Edge kinds, as bits so a search can follow a chosen set.
const (
	ww = 1 << iota
	wr
	rw
	po
	rt
)

type edge struct {
	to   int
	kind int
}

// checkWriteOrder compares each partition's offset order with real time,
// pair by pair: a write at a lower offset must not come from a transaction
// that began after the transaction of a write at a higher offset had asked
// to commit, since EndCalled bounds every write of its transaction. This is
// exact where a cycle of write-write and real-time edges is not: ww orders
// single writes, not transactions, so a long transaction spanning two of
// another producer's legally closes such a cycle.
func (c *checker) checkWriteOrder() {
	for _, p := range sortedPartitions(c.h.Final) {
		log := c.h.Final[p]
		var firstEnd time.Time // earliest EndCalled of the writers above
		var firstValue string
		for k := len(log) - 1; k >= 0; k-- {
			rec := log[k]
			w, ok := c.writes[rec.Value]
			if !ok || c.final[rec.Value] != rec || !c.visible[w.txn] {
				continue // unknown or duplicated, reported already
			}
			t := c.h.Txns[w.txn]
			if !firstEnd.IsZero() && firstEnd.Before(t.Start) {
				u := c.h.Txns[c.writes[firstValue].txn]
				c.r.add(WriteOrder, "%s holds %q of %s at %d before %q of %s, which asked to commit %v before %s began",
					p, rec.Value, t.ID, rec.Offset, firstValue, u.ID, t.Start.Sub(firstEnd).Round(time.Microsecond), t.ID)
			}
			if !t.EndCalled.IsZero() && (firstEnd.IsZero() || t.EndCalled.Before(firstEnd)) {
				firstEnd, firstValue = t.EndCalled, rec.Value
			}
		}
	}
}

// graph is the dependency graph over visible transactions (nodes 0..n-1)
// plus one timeline node per transaction end (n..): real-time order as
// T -> end(T) -> later ends -> every T2 begun after it, linear in size
// where all pairs would be quadratic.
type graph struct {
	n   int // transaction nodes; the rest are timeline nodes
	out [][]edge
	ids []string // node -> transaction id, "" for timeline nodes
}

func (g *graph) add(from, to, kind int) {
	if from != to {
		g.out[from] = append(g.out[from], edge{to, kind})
	}
}

func (c *checker) checkGraph() {
	var nodes []int // node -> txn index
	node := make([]int, len(c.h.Txns))
	for i := range c.h.Txns {
		node[i] = -1
		if c.visible[i] {
			node[i] = len(nodes)
			nodes = append(nodes, i)
		}
	}
	n := len(nodes)
	// Timeline: ends of transactions with a known end, in order.
	var ended []int // nodes with a known end, by end time
	for v, i := range nodes {
		if c.h.Txns[i].Outcome == Committed && !c.h.Txns[i].End.IsZero() {
			ended = append(ended, v)
		}
	}
	endOf := func(v int) time.Time { return c.h.Txns[nodes[v]].End }
	slices.SortStableFunc(ended, func(a, b int) int { return endOf(a).Compare(endOf(b)) })
	g := &graph{n: n, out: make([][]edge, n+len(ended)), ids: make([]string, n+len(ended))}
	for v, i := range nodes {
		g.ids[v] = c.h.Txns[i].ID
	}
	for k, v := range ended {
		g.add(v, n+k, rt)
		if k+1 < len(ended) {
			g.add(n+k, n+k+1, rt)
		}
	}
	for v, i := range nodes {
		start := c.h.Txns[i].Start
		// The last end strictly before this transaction began.
		k := sort.Search(len(ended), func(k int) bool { return !endOf(ended[k]).Before(start) }) - 1
		if k >= 0 {
			g.add(n+k, v, rt)
		}
	}
	// Process order: a transactional id's visible transactions by start.
	byProducer := map[string][]int{}
	for v, i := range nodes {
		byProducer[c.h.Txns[i].Producer] = append(byProducer[c.h.Txns[i].Producer], v)
	}
	for _, p := range sortedKeys(byProducer) {
		vs := byProducer[p]
		slices.SortStableFunc(vs, func(a, b int) int { return c.h.Txns[nodes[a]].Start.Compare(c.h.Txns[nodes[b]].Start) })
		for k := 1; k < len(vs); k++ {
			g.add(vs[k-1], vs[k], po)
			c.r.Stats.PO++
		}
	}
	writer := func(value string) int {
		if w, ok := c.writes[value]; ok {
			return node[w.txn]
		}
		return -1
	}
	// Write-write: offset order of the final log.
	for _, p := range sortedPartitions(c.h.Final) {
		log := c.h.Final[p]
		prev := -1
		for _, rec := range log {
			if c.final[rec.Value] != rec {
				continue // a duplicate, reported already: only its first offset orders it
			}
			w := writer(rec.Value)
			if prev >= 0 && w >= 0 && prev != w {
				g.add(prev, w, ww)
				c.r.Stats.WW++
			}
			if w >= 0 {
				prev = w
			}
		}
	}
	// Write-read and read-write from what each transaction read.
	for v, i := range nodes {
		upTo := map[Partition]int64{}
		for _, o := range c.h.Txns[i].Reads {
			if w := writer(o.Value); w >= 0 && w != v {
				g.add(w, v, wr)
				c.r.Stats.WR++
			}
			upTo[o.Partition] = max(upTo[o.Partition], o.Offset)
		}
		for _, p := range sortedPartitions(upTo) {
			if next, ok := c.successor(p, upTo[p], true); ok {
				if w := writer(next.Value); w >= 0 && w != v {
					g.add(v, w, rw)
					c.r.Stats.RW++
				}
			}
		}
	}

	for _, scc := range g.components(wr | po | rt) {
		c.r.add(CircularFlow, "cycle through %s", g.describe(scc))
	}
	for _, scc := range g.components(ww) {
		c.r.add(WriteCycle, "cycle through %s", g.describe(scc))
	}
	for a := range n {
		for _, e := range g.out[a] {
			if e.kind == rw && g.reaches(e.to, a, ww|wr|po|rt) {
				c.r.add(GSingle, "%s did not see %s's write, yet depends on it", g.ids[a], g.ids[e.to])
			}
		}
	}
}

// components returns the strongly connected components of more than one
// node over edges of the given kinds (Tarjan's algorithm), each holding at
// least one transaction node.
func (g *graph) components(kinds int) [][]int {
	index := make([]int, len(g.out))
	low := make([]int, len(g.out))
	onStack := make([]bool, len(g.out))
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var out [][]int
	next := 0
	var visit func(v int)
	visit = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, e := range g.out[v] {
			if e.kind&kinds == 0 {
				continue
			}
			if index[e.to] < 0 {
				visit(e.to)
				low[v] = min(low[v], low[e.to])
			} else if onStack[e.to] {
				low[v] = min(low[v], index[e.to])
			}
		}
		if low[v] != index[v] {
			return
		}
		var scc []int
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			scc = append(scc, w)
			if w == v {
				break
			}
		}
		if len(scc) > 1 && slices.ContainsFunc(scc, func(w int) bool { return w < g.n }) {
			out = append(out, scc)
		}
	}
	for v := range g.out {
		if index[v] < 0 {
			visit(v)
		}
	}
	return out
}

// reaches reports whether to is reachable from from over edges of kinds.
func (g *graph) reaches(from, to, kinds int) bool {
	seen := map[int]bool{from: true}
	queue := []int{from}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		if v == to {
			return true
		}
		for _, e := range g.out[v] {
			if e.kind&kinds != 0 && !seen[e.to] {
				seen[e.to] = true
				queue = append(queue, e.to)
			}
		}
	}
	return false
}

// describe names the transactions of a component, a few of them.
func (g *graph) describe(scc []int) string {
	var ids []string
	for _, v := range scc {
		if v < g.n {
			ids = append(ids, g.ids[v])
		}
	}
	slices.Sort(ids)
	if len(ids) > 6 {
		return fmt.Sprintf("%s and %d more", strings.Join(ids[:6], ", "), len(ids)-6)
	}
	return strings.Join(ids, ", ")
}

func (p Partition) String() string { return fmt.Sprintf("%s[%d]", p.Topic, p.Partition) }

func sortedPartitions[V any](m map[Partition]V) []Partition {
	var ps []Partition
	for p := range m {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b Partition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return ps
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
