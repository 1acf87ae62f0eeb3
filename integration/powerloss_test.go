package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waggle-mq/waggle/integration/powerloss"
)

// powerGrid keeps each node's data directory on a powerloss file system,
// so a node can lose power: everything it wrote and did not fsync is gone
// when it starts again, as after a machine crash.
type powerGrid struct {
	t          *testing.T
	backing    map[int]string
	mountpoint map[int]string

	mu   sync.Mutex
	fs   map[int]*powerloss.FS
	loss powerloss.Loss // summed over every power loss
	cuts int
}

// newPowerGrid mounts a file system for each node of c (not yet started)
// and points its data directory into it; node logs stay outside.
func newPowerGrid(t *testing.T, c *cluster) *powerGrid {
	g := &powerGrid{t: t, backing: map[int]string{}, mountpoint: map[int]string{}, fs: map[int]*powerloss.FS{}}
	logs := t.TempDir()
	for _, n := range c.nodes {
		g.backing[n.id], g.mountpoint[n.id] = t.TempDir(), t.TempDir()
		g.mount(n.id)
		n.dataDir = filepath.Join(g.mountpoint[n.id], "data")
		if err := os.Mkdir(n.dataDir, 0o755); err != nil {
			t.Fatal(err)
		}
		n.logPath = filepath.Join(logs, fmt.Sprintf("node-%d.log", n.id))
		t.Cleanup(n.afterTest) // after the node's stop, which start registers
	}
	t.Cleanup(func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, f := range g.fs {
			f.Unmount()
		}
	})
	return g
}

func (g *powerGrid) mount(id int) {
	f, err := powerloss.Mount(g.backing[id], g.mountpoint[id])
	if err != nil {
		g.t.Fatal(err)
	}
	g.mu.Lock()
	g.fs[id] = f
	g.mu.Unlock()
}

// cut takes the power from nodes at once: their file systems refuse
// every write, the processes die, and each file is rolled back to its
// last fsync. The file systems are mounted again; the nodes stay down.
func (g *powerGrid) cut(nodes ...*node) {
	g.t.Helper()
	for _, n := range nodes {
		g.fs[n.id].Cut()
	}
	for _, n := range nodes {
		n.kill9()
	}
	for _, n := range nodes {
		loss, err := g.fs[n.id].PowerOff()
		if err != nil {
			g.t.Fatalf("node %d: %v", n.id, err)
		}
		g.mu.Lock()
		g.loss.Files += loss.Files
		g.loss.Changes += loss.Changes
		g.loss.Bytes += loss.Bytes
		g.cuts++
		g.mu.Unlock()
		g.mount(n.id)
	}
}

// faults are the nemesis: power loss of the leader, of a follower, and
// of every node at once.
func (g *powerGrid) faults(c *cluster, _ *links, pushed *atomic.Int64) []chaosFault {
	return []chaosFault{
		{"power loss leader", func() {
			before := pushed.Load()
			l := c.leader()
			g.cut(l)
			waitProgress(pushed, before, 20*time.Second)
			l.start()
		}},
		{"power loss follower", func() {
			f := c.followers()[0]
			g.cut(f)
			time.Sleep(time.Second)
			f.start()
		}},
		{"power loss all nodes", func() {
			g.cut(c.live()...)
			for _, n := range c.nodes {
				n.start()
			}
		}},
	}
}

// TestChaosUnderPowerLoss runs the chaos workload (HTTP pushes, once,
// transactions, KV counter and register, a Kafka idempotent producer and
// consumer group) while nodes lose power: every write they did not fsync
// is undone before they start again. Nothing acknowledged may be lost,
// and retries stay exact.
func TestChaosUnderPowerLoss(t *testing.T) {
	var g *powerGrid
	runChaos(t, 60, func(c *cluster) { g = newPowerGrid(t, c) }, func(c *cluster, l *links, pushed *atomic.Int64) []chaosFault {
		return g.faults(c, l, pushed)
	})
	g.mu.Lock()
	defer g.mu.Unlock()
	t.Logf("power losses: %d nodes; undone: %d changes (%d bytes overwritten) in %d files", g.cuts, g.loss.Changes, g.loss.Bytes, g.loss.Files)
	if g.cuts == 0 || g.loss.Changes == 0 {
		t.Errorf("the power losses undid nothing")
	}
}
