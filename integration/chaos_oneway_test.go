package integration

import (
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestChaosUnderOneWayPartitions runs the chaos workload and every checker
// of TestChaos under partitions that cut raft links one way only: a
// leader that hears no one (its heartbeats still arrive, so the followers
// see no reason to elect), a leader no one hears, and a follower cut off
// either way. Raft's rules are usually argued with links that fail both
// ways; these leave a node acting on messages whose senders never hear
// back. Each lasts 3 s and is healed before the next.
func TestChaosUnderOneWayPartitions(t *testing.T) {
	runChaosOn(t, chaosRun{
		nodes:   3,
		seconds: 60,
		nemesis: func(c *cluster, links *links, _ *atomic.Int64) []chaosFault {
			return oneWayFaults(t, c, links)
		},
		// A majority can always talk both ways: writes stall only while the
		// cluster notices and elects.
		maxUnavailable: 20 * time.Second,
	})
}

// oneWayFaults is the nemesis of TestChaosUnderOneWayPartitions.
func oneWayFaults(t *testing.T, c *cluster, links *links) []chaosFault {
	hold := func(what string, pairs [][2]int) {
		t.Logf("%s %s for 3 s", time.Now().Format("15:04:05.000"), what)
		links.cutOneWay(pairs...)
		time.Sleep(3 * time.Second)
		links.heal()
	}
	// into lists the links into node id, out of the links out of it.
	into := func(id int) (pairs [][2]int) {
		for _, other := range nodeIDs(c) {
			if other != id {
				pairs = append(pairs, [2]int{other, id})
			}
		}
		return pairs
	}
	out := func(id int) (pairs [][2]int) {
		for _, p := range into(id) {
			pairs = append(pairs, [2]int{p[1], p[0]})
		}
		return pairs
	}
	return []chaosFault{
		{"leader hears no one 3 s", func() {
			l := c.leader()
			hold(fmt.Sprintf("leader %d hears no one", l.id), into(l.id))
		}},
		{"no one hears the leader 3 s", func() {
			l := c.leader()
			hold(fmt.Sprintf("no one hears leader %d", l.id), out(l.id))
		}},
		{"follower hears no one 3 s", func() {
			f := c.followers()[0]
			hold(fmt.Sprintf("follower %d hears no one", f.id), into(f.id))
		}},
		{"no one hears a follower 3 s", func() {
			f := c.followers()[0]
			hold(fmt.Sprintf("no one hears follower %d", f.id), out(f.id))
		}},
	}
}

// A link cut one way drops what one node sends the other and carries the
// other way: node 1's bytes never reach node 2; node 2's reach node 1,
// and node 1's answers to them never come back. heal restores both.
func TestOneWayCut(t *testing.T) {
	l := newLinks(t)
	// The server plays the node behind each proxy: it reports every byte
	// it receives and answers with it.
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	received := make(chan byte, 16)
	go func() {
		for {
			conn, err := srv.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				b := make([]byte, 1)
				for {
					if _, err := io.ReadFull(conn, b); err != nil {
						return
					}
					received <- b[0]
					conn.Write(b)
				}
			}()
		}
	}()
	proxies := map[int]string{1: l.proxy(1, srv.Addr().String()), 2: l.proxy(2, srv.Addr().String())}
	var next byte
	// send sends a new byte from node from to node to, and says whether it
	// arrived and whether its answer came back.
	send := func(from, to int) (arrived, answered bool) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(nodeIP(from))}, Timeout: 5 * time.Second}
		conn, err := d.Dial("tcp", proxies[to])
		if err != nil {
			t.Fatalf("dial %d → %d: %v", from, to, err)
		}
		defer conn.Close()
		next++
		conn.Write([]byte{next})
		select {
		case b := <-received:
			arrived = b == next
		case <-time.After(time.Second):
		}
		conn.SetReadDeadline(time.Now().Add(time.Second))
		b := make([]byte, 1)
		_, err = io.ReadFull(conn, b)
		return arrived, err == nil && b[0] == next
	}
	expect := func(from, to int, arrived, answered bool) {
		t.Helper()
		if a, b := send(from, to); a != arrived || b != answered {
			t.Errorf("%d → %d: arrived %v, answered %v; want %v, %v", from, to, a, b, arrived, answered)
		}
	}
	expect(1, 2, true, true)
	l.cutOneWay([2]int{1, 2})
	expect(1, 2, false, false)
	expect(2, 1, true, false)
	l.heal()
	expect(1, 2, true, true)
	expect(2, 1, true, true)
}
