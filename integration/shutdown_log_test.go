package integration

import (
	"os"
	"strings"
	"testing"
)

// A clean shutdown logs no ERROR: a follower and then the leader of a
// healthy cluster stopped with SIGTERM (the leader hands leadership over
// first) write no error line of their own.
func TestCleanShutdownLogsNoError(t *testing.T) {
	c := startCluster(t, 3)
	c.waitRegistered(3)
	for _, n := range []*node{c.followers()[0], c.leader()} {
		n.stop()
		log, err := os.ReadFile(n.logPath)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(log), "level=INFO") {
			t.Fatalf("node %d's log has no INFO line: is it the right file?\n%s", n.id, log)
		}
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, "level=ERROR") || strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, "[ERROR]") {
				t.Errorf("node %d logged an error on a clean shutdown: %s", n.id, line)
			}
		}
	}
}
