package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// staticMember is a franz-go group consumer with a group.instance.id that
// counts the assignments and revocations it is told of.
type staticMember struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu                sync.Mutex
	assigned, revoked int
	partitions        []int32
}

func startStaticMember(t *testing.T, brokers []string, group, topic, instance string, opts ...kgo.Opt) *staticMember {
	t.Helper()
	m := &staticMember{done: make(chan struct{})}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.InstanceID(instance), kgo.SessionTimeout(20 * time.Second), kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.RebalanceTimeout(10 * time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.assigned++
			m.partitions = append(m.partitions, a[topic]...)
			slices.Sort(m.partitions)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.revoked++
			m.partitions = slices.DeleteFunc(m.partitions, func(p int32) bool { return slices.Contains(r[topic], p) })
		}),
		kgo.OnPartitionsLost(func(context.Context, *kgo.Client, map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.revoked++
			m.partitions = nil
		})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cl, m.cancel = cl, cancel
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	t.Cleanup(m.close)
	return m
}

// close stops the member as a process exit would: a static member does
// not leave the group (kgo sends no LeaveGroup for it).
func (m *staticMember) close() {
	select {
	case <-m.done:
		return
	default:
	}
	m.cancel()
	<-m.done
	m.cl.Close()
}

func (m *staticMember) state() (assigned, revoked int, partitions []int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.assigned, m.revoked, slices.Clone(m.partitions)
}

// KIP-345: a consumer restarted with the same group.instance.id takes its
// previous incarnation's place at once, with the same partitions, and the
// other members are not rebalanced. Before, the restart was answered
// MEMBER_ID_REQUIRED, waited a whole session timeout for the old
// incarnation to expire and then got UNKNOWN_MEMBER_ID from SyncGroup.
func TestStaticMemberRestartKeepsItsPartitionsWithoutRebalance(t *testing.T) {
	n := startSingle(t)
	brokers := []string{n.kafkaAddr}
	createTopic(t, kafkaClient(t, brokers), "static", 4, nil)

	a := startStaticMember(t, brokers, "static-g", "static", "a")
	b := startStaticMember(t, brokers, "static-g", "static", "b")
	var bParts []int32
	waitFor(t, 30*time.Second, func() error {
		_, _, ap := a.state()
		_, _, bp := b.state()
		if len(ap)+len(bp) != 4 || len(ap) == 0 || len(bp) == 0 {
			return fmt.Errorf("assignment not settled: a %v, b %v", ap, bp)
		}
		bParts = bp
		return nil
	})
	unmoved := a.settled(t)

	start := time.Now()
	b.close()
	b2 := startStaticMember(t, brokers, "static-g", "static", "b")
	waitFor(t, 15*time.Second, func() error {
		if _, _, p := b2.state(); !slices.Equal(p, bParts) {
			return fmt.Errorf("restarted b holds %v, b held %v", p, bParts)
		}
		return nil
	})
	took := checkRestartWithoutRebalance(t, start, unmoved)
	t.Logf("b restarted and held %v again after %v; a kept %v without a rebalance", bParts, took.Round(time.Millisecond), unmoved.partitions)
}

// memberState is what a staticMember was told, at one moment.
type memberState struct {
	member            *staticMember
	assigned, revoked int
	partitions        []int32
}

func (m *staticMember) snapshot() memberState {
	s := memberState{member: m}
	s.assigned, s.revoked, s.partitions = m.state()
	return s
}

// settled is the member's state once it has not changed for 1 s (the
// second member's join may still be finishing on a loaded machine): the
// state a restart is then checked not to change.
func (m *staticMember) settled(t *testing.T) memberState {
	t.Helper()
	var last memberState
	waitFor(t, 20*time.Second, func() error {
		before := m.snapshot()
		time.Sleep(time.Second)
		last = m.snapshot()
		if last.assigned != before.assigned || last.revoked != before.revoked || !slices.Equal(last.partitions, before.partitions) {
			return fmt.Errorf("still rebalancing: assigned %d→%d, revoked %d→%d", before.assigned, last.assigned, before.revoked, last.revoked)
		}
		return nil
	})
	return last
}

// checkRestartWithoutRebalance requires a static member's restart begun
// at start to have ended well inside its 20 s session timeout (nothing
// waited for the old incarnation to expire), and the other member, as
// before, not to have been rebalanced. It returns how long the restart took.
func checkRestartWithoutRebalance(t *testing.T, start time.Time, before memberState) time.Duration {
	t.Helper()
	took := time.Since(start)
	if took > 10*time.Second {
		t.Errorf("the restarted static member got its partitions after %v", took)
	}
	// An absence is checked: give a rebalance, had one started, the time
	// to reach the other member (it heartbeats every 300 ms).
	time.Sleep(2 * time.Second)
	if now := before.member.snapshot(); now.assigned != before.assigned || now.revoked != before.revoked || !slices.Equal(now.partitions, before.partitions) {
		t.Errorf("the other member was rebalanced by the restart: assigned %d→%d, revoked %d→%d, partitions %v→%v",
			before.assigned, now.assigned, before.revoked, now.revoked, before.partitions, now.partitions)
	}
	return took
}

// The same with librdkafka: kcat with group.instance.id, stopped (it does
// not leave the group as a static member) and started again, gets its
// partitions back and the franz-go member beside it is not rebalanced.
func TestStaticMemberRestartWithLibrdkafka(t *testing.T) {
	kcat := requireKcat(t)
	n := startSingle(t)
	brokers := []string{n.kafkaAddr}
	createTopic(t, kafkaClient(t, brokers), "static-rd", 4, nil)
	a := startStaticMember(t, brokers, "static-rd-g", "static-rd", "a", kgo.Balancers(kgo.RangeBalancer()))

	// assignedRe matches kcat's report of its assignment on stderr.
	assignedRe := regexp.MustCompile(`assigned: ([^\n]*)`)
	start := func() (*exec.Cmd, *syncBuffer) {
		var stderr syncBuffer
		cmd := exec.Command(kcat, "-b", n.kafkaAddr, "-G", "static-rd-g", "-X", "group.instance.id=kb",
			"-X", "session.timeout.ms=20000", "-X", "partition.assignment.strategy=range", "-o", "end", "static-rd")
		cmd.Stdout, cmd.Stderr = io.Discard, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd, &stderr
	}
	assigned := func(out *syncBuffer) (string, error) {
		m := assignedRe.FindStringSubmatch(out.String())
		if m == nil || strings.TrimSpace(m[1]) == "" {
			return "", fmt.Errorf("kcat has no assignment yet: %q", out.String())
		}
		return strings.TrimSpace(m[1]), nil
	}
	first, out := start()
	var kcatParts string
	waitFor(t, 30*time.Second, func() error {
		var err error
		if kcatParts, err = assigned(out); err != nil {
			return err
		}
		if _, _, p := a.state(); len(p) != 2 {
			return fmt.Errorf("franz-go member holds %v", p)
		}
		return nil
	})
	unmoved := a.settled(t)

	began := time.Now()
	first.Process.Signal(syscall.SIGTERM)
	first.Wait()
	_, out2 := start()
	waitFor(t, 15*time.Second, func() error {
		p, err := assigned(out2)
		if err == nil && p != kcatParts {
			return fmt.Errorf("restarted kcat holds %q, it held %q", p, kcatParts)
		}
		return err
	})
	took := checkRestartWithoutRebalance(t, began, unmoved)
	t.Logf("kcat restarted and held %s again after %v; franz-go kept %v", kcatParts, took.Round(time.Millisecond), unmoved.partitions)
}

// syncBuffer is a bytes.Buffer a process writes to while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
