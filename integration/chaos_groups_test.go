package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupCheck follows franz-go group consumers through the chaos run:
// within one assignment a consumer's offsets go up by exactly one (no skip,
// no step back without a seek), the group's committed offset as one
// replica sees it never moves back, and every offset below the final
// committed one was consumed by some member.
type groupCheck struct {
	mu          sync.Mutex
	consumed    map[int64]bool
	violations  []string
	assignments int
	commits     []int64 // committed offsets in the order one replica showed them
	// viewsRestarted counts the times that replica's data directory was
	// wiped between two samples, so its view started over.
	viewsRestarted int
	commitsOK      int            // partitions committed, as the members' commits answered
	commitErrs     map[string]int // failed commits by error
	lastAdvance    time.Time      // when the sampled committed offset last went up
	lastConsumed   time.Time      // when a member last consumed a record
}

// startGroupConsumers starts members consumers of topic in group; they
// stop with stop.
func (g *groupCheck) startGroupConsumers(c *cluster, wg *sync.WaitGroup, stop <-chan struct{}, group, topic string, members int) {
	brokers := c.kafkaAddrs()
	for m := range members {
		last := int64(-1) // the last offset consumed in this assignment
		reset := func(context.Context, *kgo.Client, map[string][]int32) {
			g.mu.Lock()
			last = -1
			g.assignments++
			g.mu.Unlock()
		}
		committed := func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			g.mu.Lock()
			defer g.mu.Unlock()
			if err != nil {
				g.commitFailed(err.Error())
				return
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode != 0 {
						g.commitFailed(kerr.ErrorForCode(rp.ErrorCode).Error())
					} else {
						g.commitsOK++
					}
				}
			}
		}
		cl := kafkaClient(c.t, brokers, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(500*time.Millisecond), kgo.AutoCommitCallback(committed),
			kgo.OnPartitionsAssigned(reset), kgo.OnPartitionsRevoked(reset), kgo.OnPartitionsLost(reset))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					if err := cl.CommitUncommittedOffsets(ctx); err != nil {
						g.mu.Lock()
						g.commitFailed("final commit: " + err.Error())
						g.mu.Unlock()
					}
					cancel()
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				fetches := cl.PollFetches(ctx)
				cancel()
				g.mu.Lock()
				for _, r := range fetches.Records() {
					if last >= 0 && r.Offset != last+1 {
						g.violations = append(g.violations, fmt.Sprintf("member %d read offset %d after %d in one assignment", m, r.Offset, last))
					}
					last = r.Offset
					g.consumed[r.Offset] = true
					g.lastConsumed = time.Now()
				}
				g.mu.Unlock()
			}
		}()
	}
	// One replica's view of the committed offset, sampled while it runs.
	// A wiped replica starts its view over (it has no history to keep):
	// samples are compared within one life of its data directory only, and
	// a sample whose answer may have straddled a wipe is dropped.
	watched := c.nodes[0]
	lastLife := 0
	untilStopped(wg, stop, func(int) {
		time.Sleep(100 * time.Millisecond)
		life := c.wipesOf(watched.id)
		off, ok := committedOffset(c, watched, group)
		if !ok || c.wipesOf(watched.id) != life {
			return
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if n := len(g.commits); n > 0 && life == lastLife && off < g.commits[n-1] {
			g.violations = append(g.violations, fmt.Sprintf("committed offset moved back from %d to %d on node %d", g.commits[n-1], off, watched.id))
		}
		if life != lastLife {
			g.viewsRestarted++
		}
		if n := len(g.commits); n == 0 || off > g.commits[n-1] {
			g.lastAdvance = time.Now()
		}
		lastLife = life
		g.commits = append(g.commits, off)
	})
}

// commitFailed counts a failed commit by its error; g.mu is held.
func (g *groupCheck) commitFailed(why string) {
	if g.commitErrs == nil {
		g.commitErrs = map[string]int{}
	}
	g.commitErrs[why]++
}

// commitSummary says how the members' commits went.
func (g *groupCheck) commitSummary() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return fmt.Sprintf("last record consumed at %s, partition commits ok %d, failed %v", g.lastConsumed.Format("15:04:05.000"), g.commitsOK, g.commitErrs)
}

// committedOffset is group's committed offset of partition 0 as n has
// applied it; ok is false when n does not answer (it may be down).
func committedOffset(c *cluster, n *node, group string) (int64, bool) {
	var g struct {
		Cursors []struct {
			Partition  string `json:"partition"`
			Offset     int64  `json:"offset"`
			Positioned bool   `json:"positioned"`
		} `json:"cursors"`
	}
	select {
	case <-n.done():
		return 0, false
	default:
	}
	resp, err := chaosHTTP.Get(n.url("/api/v1/consumer-groups/" + group))
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&g) != nil {
		return 0, false
	}
	for _, cur := range g.Cursors {
		if cur.Partition == "0" && cur.Positioned {
			return cur.Offset, true
		}
	}
	return 0, false
}

// chaosGroupCatchUp is how long a healed cluster's group may take to
// commit to the end of its topic: a member dropped during the faults
// rejoins (franz-go backs off up to its session timeout) and the group
// rebalances first.
const chaosGroupCatchUp = 60 * time.Second

// waitCommitted waits until group's committed offset on n reaches end and
// returns how long that took, or an error saying where it stopped.
func (g *groupCheck) waitCommitted(c *cluster, n *node, group string, end int64, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		off, ok := committedOffset(c, n, group)
		if ok && off >= end {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			g.mu.Lock()
			defer g.mu.Unlock()
			return 0, fmt.Errorf("committed offset %d (answered: %v) of %d after %v; %d records consumed, last at %s",
				off, ok, end, timeout, len(g.consumed), g.lastConsumed.Format("15:04:05.000"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// check reports violations and offsets below the final committed one that
// nobody consumed.
func (g *groupCheck) check(final int64) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.violations
	missing := 0
	for off := range final {
		if !g.consumed[off] {
			missing++
		}
	}
	if missing > 0 {
		out = append(out, fmt.Sprintf("%d offsets below the committed %d were never consumed", missing, final))
	}
	return out
}
