package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A voter whose data directory is wiped and that is started again with
// its old flags, while another voter is down, must not help that other
// voter lead: the other lacks writes the cluster committed with the wiped
// node's acknowledgement. The writes are acknowledged by the leader and
// node F; B is down. Then F is wiped, the leader is killed, and B and F
// start: without a guard F votes for B, B leads without the writes, and
// when the old leader returns its log is cut back to B's (the writes are
// lost). With the guard F withholds its vote, no leader is elected until
// the old leader is back, and every write is kept.
func TestWipedVoterDoesNotElectALeaderThatLacksItsWrites(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader()
	followers := c.followers()
	b, f := followers[0], followers[1]
	b.stop()
	var items []pushItem
	for i := range 50 {
		items = append(items, pushItem{Queue: "amnesia", TransactionID: fmt.Sprint("w-", i), Payload: "x"})
	}
	for _, a := range l.push(items...) {
		if a.Status != "queued" {
			t.Fatalf("push with node %d down: %+v", b.id, a)
		}
	}
	c.waitCaughtUp(f)
	f.wipe()
	l.kill9()
	b.start()
	f.start()

	// F says it withholds its vote, and no leader is elected without the
	// writes: poll for a while (elections take about a second).
	waitFor(t, 20*time.Second, func() error {
		var h healthAnswer
		getJSON(t, f.url("/health"), &h)
		if !h.Raft.VotesWithheld {
			return fmt.Errorf("node %d does not report withheld votes", f.id)
		}
		if !strings.Contains(f.logTail(), "this data directory is new, but the cluster has elected leaders before") {
			return fmt.Errorf("node %d's log does not say why it withholds its vote", f.id)
		}
		return nil
	}, f.logTail)
	for deadline := time.Now().Add(6 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		for _, n := range []*node{b, f} {
			var h healthAnswer
			getJSON(t, n.url("/health"), &h)
			if h.Raft.Role == "leader" {
				t.Fatalf("node %d leads without the writes the cluster committed (term %d)\n%s", n.id, h.Raft.Term, c.diagnose())
			}
		}
	}

	l.start()
	for _, n := range c.nodes {
		c.waitCaughtUp(n)
		got := idSet(n.fetchAll("amnesia", "Default"))
		for _, it := range items {
			if !got[it.TransactionID] {
				t.Fatalf("node %d lost %s, acknowledged before the wipe (holds %d of %d)\n%s", n.id, it.TransactionID, len(got), len(items), c.diagnose())
			}
		}
	}
	waitFor(t, 20*time.Second, func() error {
		var h healthAnswer
		getJSON(t, f.url("/health"), &h)
		if h.Raft.VotesWithheld {
			return fmt.Errorf("node %d still withholds its vote after catching up", f.id)
		}
		return nil
	}, f.logTail)
}
