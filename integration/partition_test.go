package integration

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// A leader cut off from both followers loses its majority: the other two
// elect a new leader and take writes, the old one stops accepting them,
// and after the partition heals it follows and holds every write.
func TestPartitionedLeaderIsReplacedAndCatchesUp(t *testing.T) {
	c, links := startPartitionableCluster(t, 3)
	old := c.leader()
	c.pushUntilAccepted(10*time.Second, pushItem{Queue: "part", TransactionID: "before", Payload: "x"})

	links.isolate(c, old.id)
	var newLeader *node
	waitFor(t, 15*time.Second, func() error {
		l, err := c.findLeader()
		if err != nil || l == old {
			return fmt.Errorf("no new leader yet (%v)", err)
		}
		newLeader = l
		return nil
	})
	for i := range 20 {
		var out []pushAnswer
		if status := postJSON(t, newLeader.url("/api/v1/push"), map[string]any{"items": []pushItem{{Queue: "part", TransactionID: fmt.Sprint("during-", i), Payload: "x"}}}, &out); status != http.StatusCreated {
			t.Fatalf("push to the majority's leader: status %d", status)
		}
	}
	// The isolated node steps down once its leader lease runs out and can
	// take no write: it has no leader to forward to.
	waitFor(t, 10*time.Second, func() error {
		var h healthAnswer
		getJSON(t, old.url("/health"), &h)
		if h.Raft.Role == "leader" {
			return fmt.Errorf("isolated node %d still leads", old.id)
		}
		return nil
	})
	if status := postJSON(t, old.url("/api/v1/push"), map[string]any{"items": []pushItem{{Queue: "part", TransactionID: "minority", Payload: "x"}}}, nil); status == http.StatusCreated {
		t.Fatalf("the isolated minority accepted a write")
	}

	links.heal()
	c.waitCaughtUp(old)
	got := idSet(old.fetchAll("part", "Default"))
	if len(got) != 21 || !got["before"] || !got["during-19"] || got["minority"] {
		t.Fatalf("after healing, node %d holds %d ids: %v", old.id, len(got), got)
	}
}
