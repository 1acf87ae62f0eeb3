package clock

import (
	"testing"
	"time"
)

// shifted is a wall clock off by offset.
func shifted(offset time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(offset) }
}

// answer records that peer's clock, off by offset, was read halfway
// through a 2 ms round trip that ended age ago.
func answer(c *Cluster, peer string, offset, age time.Duration) {
	received := time.Now().Add(-age)
	sent := received.Add(-2 * time.Millisecond)
	c.Observe(peer, sent, received, sent.Add(time.Millisecond).Add(offset).Round(0))
}

// near fails unless got is within 50 ms of the true time shifted by want.
func near(t *testing.T, what string, got time.Time, want time.Duration) {
	t.Helper()
	if d := got.Sub(time.Now().Add(want)); d < -50*time.Millisecond || d > 50*time.Millisecond {
		t.Errorf("%s: %v off the expected time", what, d)
	}
}

func TestNowIsTheLowerMedianOfTheVotersClocks(t *testing.T) {
	ahead := 10 * time.Minute
	cases := []struct {
		name  string
		own   time.Duration
		peers []time.Duration
		want  time.Duration
	}{
		{"alone", ahead, nil, ahead},
		{"ahead, two peers right", ahead, []time.Duration{0, 0}, 0},
		{"ahead, one peer right", ahead, []time.Duration{0}, 0},
		{"behind, one peer right: the earlier", -ahead, []time.Duration{0}, -ahead},
		{"right, one of four peers ahead", 0, []time.Duration{ahead, 0, 0, -time.Second}, 0},
		{"right, two of four peers ahead: the earlier middle", 0, []time.Duration{ahead, ahead, 0, time.Second}, time.Second},
	}
	for _, tc := range cases {
		c := New(shifted(tc.own))
		for i, p := range tc.peers {
			answer(c, string(rune('a'+i)), p, 0)
		}
		near(t, tc.name, c.Now(), tc.want)
	}
}

func TestStaleAnswersAreNotUsed(t *testing.T) {
	c := New(shifted(time.Hour))
	answer(c, "a", 0, MaxAge+time.Second)
	near(t, "stale answer", c.Now(), time.Hour)
	if _, peers := c.Offset(); peers != 0 {
		t.Errorf("Offset counted %d peers, want 0", peers)
	}
	answer(c, "a", 0, time.Second) // an estimate a second old has moved on
	near(t, "answer a second old", c.Now(), 0)
	if off, peers := c.Offset(); peers != 1 || off < 59*time.Minute {
		t.Errorf("Offset = %v over %d peers, want about an hour over 1", off, peers)
	}
	c.Forget("a")
	near(t, "forgotten peer", c.Now(), time.Hour)
}

func TestAWallClockStepDoesNotMoveThePeersEstimates(t *testing.T) {
	step := time.Duration(0)
	c := New(func() time.Time { return time.Now().Add(step) })
	answer(c, "a", 0, 0)
	answer(c, "b", 0, 0)
	step = 5 * time.Minute // the node's clock jumps on a running leader
	near(t, "after a step ahead", c.Now(), 0)
	step = -5 * time.Minute
	near(t, "after a step behind", c.Now(), 0)
}
