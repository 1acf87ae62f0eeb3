package integration

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/waggle-mq/waggle/payload"
)

// TestSoakAtVolume is issue 33's soak at volume: a 3-node cluster (real
// processes, raft links through the cutting proxies) takes, all at once and
// all the time,
//
//   - Kafka: two franz-go idempotent producers writing random, incompressible
//     records (8 KiB, each carrying its partition, its sequence number and a
//     checksum) to topics soak-a and soak-b (4 partitions each) and soak-g
//     (1 partition), paced so that WAGGLE_SOAK_GB is acknowledged by the end
//     of the run; each partition has one writer, so a record's offset must
//     equal its sequence number; two members of consumer group soak-kg read
//     soak-g and commit;
//   - HTTP: two pushers to queue soak-wide of WAGGLE_SOAK_PARTITIONS
//     partitions, each push 1,000 messages to 1,000 distinct partitions,
//     cycling so that three sweeps reach every partition, each retried under
//     its Idempotency-Key until answered; every fifth push is sent again
//     under a fresh key and must answer duplicate with the original offsets;
//     a consumer group pops and acks;
//
// while a nemesis injects a fault every few seconds, healed before the
// next: kill -9 of the leader, kill -9 of a follower, SIGSTOP of the leader,
// a follower cut off, and twice (at a third and two thirds of the run) a
// follower's data directory wiped, its catch-up timed. Every second it
// samples each node's VmRSS and write_bytes. Then it heals, measures the data
// directories, restarts the whole cluster (timed) and checks: every Kafka
// record read back in full, exactly once and in order; every acknowledged
// HTTP message at its offset, exactly once; the group's committed offset
// never back; memory, disk, write amplification and catch-up within bounds.
//
// A documented long command, not part of CI (docs/RELIABILITY.md):
//
//	WAGGLE_SOAK_SECONDS=1800 go test ./integration -run '^TestSoakAtVolume$' -v -timeout 4h
//
// WAGGLE_SOAK_GB (default 10) and WAGGLE_SOAK_PARTITIONS (default
// 1,000,000, a multiple of 1,000) scale it down.
func TestSoakAtVolume(t *testing.T) {
	seconds := soakEnv(t, "WAGGLE_SOAK_SECONDS", 0)
	if seconds <= 0 {
		t.Skip("a long soak run; run it with WAGGLE_SOAK_SECONDS=1800 go test ./integration -run '^TestSoakAtVolume$' -v -timeout 4h")
	}
	gb := soakEnv(t, "WAGGLE_SOAK_GB", 10.0)
	partitions := soakEnv(t, "WAGGLE_SOAK_PARTITIONS", 1_000_000)
	s := newSoak(t, seconds, gb, partitions)
	s.run()
	s.check()
	s.report()
}

// Bounds the soak's checks hold each node to.
const (
	soakRSSBound     = 1 << 30 // peak resident memory of a node
	soakRSSGrowth    = 1.3     // the second half's peak over the first's (plus soakRSSSlack)
	soakRSSSlack     = 128 << 20
	soakDiskRatio    = 4.0  // data directory (hard links once) over payload acknowledged
	soakWriteAmp     = 12.0 // bytes a node wrote over payload acknowledged
	soakRecordBytes  = 8 << 10
	soakPushItems    = 1000 // partitions one push reaches: the broker's bound
	soakItemBytes    = 64   // a pushed message's payload, a JSON string
	soakSweeps       = 3    // times the pushers reach every partition in a run
	soakAgainEvery   = 5    // every fifth push is sent again: dedup must answer
	soakWideQueue    = "soak-wide"
	soakPopGroup     = "soak-hg"
	soakKafkaGroup   = "soak-kg"
	soakGroupTopic   = "soak-g"
	soakFaultSpacing = 2 * time.Second
)

// soakTopics are the Kafka topics, their partitions and the producer that
// alone writes each.
var soakTopics = []soakTopic{{"soak-a", 4, 0}, {"soak-b", 4, 1}, {soakGroupTopic, 1, 1}}

type soakTopic struct {
	name       string
	partitions int32
	producer   int
}

func soakEnv[T int | float64](t *testing.T, name string, def T) T {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(v, "_", ""), 64)
	if err != nil || f < 0 {
		t.Fatalf("%s=%q: want a number", name, v)
	}
	return T(f)
}

// soak is one run's cluster, workloads and records.
type soak struct {
	t *testing.T
	c *cluster
	// diverged compares the replicas' state digests during the run.
	diverged   *divergenceWatch
	links      *links
	seconds    int
	target     int64 // Kafka payload bytes to acknowledge
	partitions int
	start      time.Time
	stop       chan struct{}
	wg         sync.WaitGroup
	progress   atomic.Int64 // acknowledged writes of any kind

	// Kafka
	kafkaIssued, kafkaAckedBytes   atomic.Int64
	kafkaAcked                     sync.Map // "topic/partition" -> *atomic.Int64 acknowledged records
	kafkaFailed, kafkaWrongOffsets atomic.Int64
	kafkaErrors                    sync.Map // first errors, for the log
	groups                         *groupCheck
	leaderCommits                  []int64 // soak-kg's committed offset as the leader showed it
	leaderCommitsBack              []string
	leaderCommitUnavailable        int

	// HTTP
	requests                        atomic.Int64 // push requests issued (r = 0, 1, …)
	pushMu                          sync.Mutex
	pushed                          map[int64][]uint64 // request -> acknowledged offsets per item
	pushUnknown                     map[int64]bool     // requests left unanswered
	pushHow                         map[int64]soakPushHow
	pushFailed                      []string
	againOK, againWrong, againOpen  atomic.Int64
	pushOpen                        atomic.Int64 // tries whose outcome was open, sent again under their key
	pops, popEmpty, popFail, popBad atomic.Int64
	acked, ackFail                  atomic.Int64
	httpBytes                       atomic.Int64

	// faults and measurements
	faults     map[string]int
	injecting  atomic.Value // string: the fault injected last
	timeline   []soakFaultSpan
	profiles   string // WAGGLE_SOAK_PROFILES: a directory for heap profiles
	catchUps   []soakCatchUp
	procs      map[int]*soakProc // node id -> its processes' samples
	procMu     sync.Mutex
	peakDisk   map[int]float64 // node id -> highest data dir / payload ratio seen
	finalDisk  map[int]dirUsage
	finalUsed  map[int]int64 // diskUsed of each node's data directory
	payloadAt  int64         // payload acknowledged when finalDisk was measured
	written    map[int]int64
	restart    time.Duration
	faultyEnd  time.Time
	checks     []string
	checksDone time.Duration
}

// soakCatchUp is one wiped follower's catch-up.
type soakCatchUp struct {
	node   int
	bytes  int64 // payload stored when it was wiped
	took   time.Duration
	passed bool
}

// soakProc samples one node's processes: resident memory by time, and the
// bytes each process (a kill or restart makes a new one) wrote.
type soakProc struct {
	rss     []soakSample
	written map[int]int64 // pid -> write_bytes last seen
	pprof   string        // the node's --pprof-addr when WAGGLE_SOAK_PROFILES is set
	profAt  int64         // anonymous memory at the last heap profile taken
}

type soakSample struct {
	at   time.Duration // since the run started
	rss  int64         // VmRSS: anonymous memory and mapped file pages
	anon int64         // RssAnon: the process's own memory, without the page cache it maps
	file int64         // RssFile: the file pages it maps (page cache)
}

func newSoak(t *testing.T, seconds int, gb float64, partitions int) *soak {
	if partitions < soakPushItems || partitions%soakPushItems != 0 {
		t.Fatalf("WAGGLE_SOAK_PARTITIONS=%d: want a multiple of %d", partitions, soakPushItems)
	}
	s := &soak{t: t, seconds: seconds, target: int64(gb * (1 << 30)), partitions: partitions, stop: make(chan struct{}),
		pushed: map[int64][]uint64{}, pushUnknown: map[int64]bool{}, pushHow: map[int64]soakPushHow{}, faults: map[string]int{}, procs: map[int]*soakProc{},
		peakDisk: map[int]float64{}, written: map[int]int64{}}
	s.c, s.links = newPartitionableCluster(t, 3)
	logsOutsideDataDirs(t)(s.c)
	s.profiles = os.Getenv("WAGGLE_SOAK_PROFILES")
	if s.profiles != "" {
		t.Cleanup(s.keepLogs) // before the logs' directory goes
	}
	for _, n := range s.c.nodes {
		p := &soakProc{written: map[int]int64{}}
		if s.profiles != "" {
			p.pprof = freeAddr(t)
			n.ownArgs = append(n.ownArgs, "--pprof-addr", p.pprof)
		}
		s.procs[n.id] = p
	}
	s.c.start()
	return s
}

// payloadBytes is the payload acknowledged so far, Kafka and HTTP.
func (s *soak) payloadBytes() int64 { return s.kafkaAckedBytes.Load() + s.httpBytes.Load() }

// run starts the workloads and the sampler, injects faults until the run's
// time is up and the Kafka target acknowledged, then stops the workloads.
func (s *soak) run() {
	t := s.t
	s.start = time.Now()
	s.startSampler()
	s.startKafka()
	s.startPushers()
	s.startPopper()
	s.startCommitSampler()
	s.diverged = s.c.watchDivergence(&s.wg, s.stop)

	nemesis := s.nemesis()
	wipeAt := []time.Duration{time.Duration(s.seconds) * time.Second / 3, 2 * time.Duration(s.seconds) * time.Second / 3}
	hardEnd := s.start.Add(2*time.Duration(s.seconds)*time.Second + 10*time.Minute)
	for round := 0; ; round++ {
		elapsed := time.Since(s.start)
		if elapsed > time.Duration(s.seconds)*time.Second && s.kafkaAckedBytes.Load() >= s.target && len(wipeAt) == 0 {
			break
		}
		if time.Now().After(hardEnd) {
			t.Errorf("after %v only %s of %s acknowledged over Kafka", elapsed.Round(time.Second), gib(s.kafkaAckedBytes.Load()), gib(s.target))
			break
		}
		time.Sleep(soakFaultSpacing)
		fault := nemesis[round%len(nemesis)]
		if len(wipeAt) > 0 && time.Since(s.start) >= wipeAt[0] {
			fault, wipeAt = soakFault{"wipe follower", s.wipeFollower}, wipeAt[1:]
		}
		began := time.Now()
		before := s.progress.Load()
		s.injecting.Store(fault.name)
		fault.inject()
		s.faults[fault.name]++
		s.timeline = append(s.timeline, soakFaultSpan{fault.name, began.Sub(s.start), time.Since(s.start)})
		if err := s.c.healed(s.links); err != nil {
			t.Errorf("after %q: %v", fault.name, err)
			break
		}
		waitProgress(&s.progress, before, 60*time.Second)
		if d := time.Since(began); d > 30*time.Second && fault.name != "wipe follower" {
			t.Logf("slow recovery: %s at %s took %v\n%s", fault.name, began.Format("15:04:05"), d.Round(time.Millisecond), s.c.diagnose())
		}
		s.sampleDisk()
	}
	s.faultyEnd = time.Now()
	close(s.stop)
	s.wg.Wait()
}

type soakFault struct {
	name   string
	inject func()
}

// nemesis is the cycle of faults; a wipe is put in at set times.
func (s *soak) nemesis() []soakFault {
	c := s.c
	return []soakFault{
		{"kill -9 leader", func() { killUntilWritesFlow(&s.progress, c.leader()) }},
		{"kill -9 follower", func() {
			f := c.followers()[0]
			f.kill9()
			time.Sleep(time.Second)
			f.start()
		}},
		{"SIGSTOP leader 2 s", func() { pauseLeader(c, 2*time.Second) }},
		{"partition follower 3 s", func() {
			s.links.isolate(c, c.followers()[0].id)
			time.Sleep(3 * time.Second)
			s.links.heal()
		}},
	}
}

// wipeFollower deletes a follower's data directory under load and times
// its catch-up from its peers (a snapshot with the segments, then the log)
// until it trails the leader by less than soakCaughtUpLag.
func (s *soak) wipeFollower() {
	f := s.c.followers()[0]
	stored := s.payloadBytes()
	s.c.wipe(f)
	began := time.Now()
	f.start()
	bound := s.catchUpBound(stored)
	err := s.waitWithin(f, bound)
	cu := soakCatchUp{node: f.id, bytes: stored, took: time.Since(began), passed: err == nil}
	s.catchUps = append(s.catchUps, cu)
	if err != nil {
		s.t.Errorf("wiped node %d (%s stored) not caught up within %v: %v\n%s", f.id, gib(stored), bound, err, f.logTail())
	}
}

// soakCaughtUpLag is how far behind the leader a node under load counts as
// caught up: writes never stop, so it applies what the leader had committed
// this long before, not what it has committed now.
const soakCaughtUpLag = 2 * time.Second

// waitWithin waits until n has applied what the leader had committed
// soakCaughtUpLag earlier.
func (s *soak) waitWithin(n *node, timeout time.Duration) error {
	type mark struct {
		at     time.Time
		commit uint64
	}
	var marks []mark
	deadline := time.Now().Add(timeout)
	for {
		err := func() error {
			var lh, nh healthAnswer
			if l, err := s.c.findLeader(); err == nil && getJSON(s.t, l.url("/health"), &lh) == http.StatusOK {
				marks = append(marks, mark{time.Now(), lh.Raft.Commit})
			}
			i := slices.IndexFunc(marks, func(m mark) bool { return time.Since(m.at) < soakCaughtUpLag }) - 1
			if i < 0 {
				return fmt.Errorf("no commit index of the leader's %v old yet", soakCaughtUpLag)
			}
			if getJSON(s.t, n.url("/health"), &nh) != http.StatusOK {
				return fmt.Errorf("node %d does not answer /health", n.id)
			}
			if nh.Raft.Applied < marks[i].commit {
				return fmt.Errorf("node %d applied %d, the leader had committed %d %v before", n.id, nh.Raft.Applied, marks[i].commit, time.Since(marks[i].at).Round(time.Millisecond))
			}
			return nil
		}()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// catchUpBound is how long a wiped node may take to catch up on stored
// bytes: 2 minutes per GiB and 2 more.
func (s *soak) catchUpBound(stored int64) time.Duration {
	return 2*time.Minute + time.Duration(float64(2*time.Minute)*float64(stored)/(1<<30))
}

// waitCaughtUp is cluster.waitCaughtUp with a deadline of the caller's:
// one at volume takes longer than its 30 s.
func (s *soak) waitCaughtUp(n *node, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := func() error {
			l, err := s.c.findLeader()
			if err != nil {
				return err
			}
			var lh, nh healthAnswer
			getJSON(s.t, l.url("/health"), &lh)
			if getJSON(s.t, n.url("/health"), &nh) != http.StatusOK {
				return fmt.Errorf("node %d does not answer /health", n.id)
			}
			if err := appliedLeadersCommit(n, lh, nh); err != nil {
				return err
			}
			return s.c.groupsCaughtUp(n)
		}()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startKafka creates the topics and starts the producers and the group.
func (s *soak) startKafka() {
	t := s.t
	brokers := s.c.kafkaAddrs()
	admin := kafkaClient(t, brokers)
	for _, tp := range soakTopics {
		createTopic(t, admin, tp.name, tp.partitions, nil)
		for p := range tp.partitions {
			s.kafkaAcked.Store(soakPartKey(tp.name, p), new(atomic.Int64))
		}
	}
	s.groups = &groupCheck{consumed: map[int64]bool{}}
	s.groups.startGroupConsumers(s.c, &s.wg, s.stop, soakKafkaGroup, soakGroupTopic, 2)
	// The pace: the target spread over the run, caught up after a stall.
	rate := float64(s.target) / float64(s.seconds)
	for w := range 2 {
		producer := kafkaClient(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(math.MaxInt32),
			kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedBytes(32<<20), kgo.ProducerBatchMaxBytes(1<<20))
		type part struct {
			topic string
			p     int32
			tag   uint32
			seq   int64
		}
		var mine []*part
		for _, tp := range soakTopics {
			if tp.producer == w {
				for p := range tp.partitions {
					mine = append(mine, &part{topic: tp.name, p: p, tag: soakTag(tp.name, p)})
				}
			}
		}
		src := payload.New(uint64(w)+1, false)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			var inflight sync.WaitGroup
			defer inflight.Wait()
			for i := 0; ; i++ {
				select {
				case <-s.stop:
					return
				default:
				}
				issued := s.kafkaIssued.Load()
				if issued >= s.target || float64(issued) > rate*time.Since(s.start).Seconds() {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				s.kafkaIssued.Add(soakRecordBytes)
				pt := mine[i%len(mine)]
				value := soakRecord(src, pt.tag, uint64(pt.seq))
				seq := pt.seq
				pt.seq++
				inflight.Add(1)
				producer.Produce(context.Background(), &kgo.Record{Topic: pt.topic, Partition: pt.p, Value: value}, func(r *kgo.Record, err error) {
					defer inflight.Done()
					if err != nil {
						s.kafkaFailed.Add(1)
						s.kafkaErrors.LoadOrStore(err.Error(), true)
						return
					}
					if r.Offset != seq {
						s.kafkaWrongOffsets.Add(1)
						s.kafkaErrors.LoadOrStore(fmt.Sprintf("%s acknowledged record %d at offset %d", soakPartKey(r.Topic, r.Partition), seq, r.Offset), true)
					}
					v, _ := s.kafkaAcked.Load(soakPartKey(r.Topic, r.Partition))
					v.(*atomic.Int64).Add(1)
					s.kafkaAckedBytes.Add(int64(len(r.Value)))
					s.progress.Add(1)
				})
			}
		}()
	}
}

func soakPartKey(topic string, p int32) string { return fmt.Sprintf("%s/%d", topic, p) }

// soakTag is what a record of topic's partition p carries to name it.
func soakTag(topic string, p int32) uint32 {
	i := slices.IndexFunc(soakTopics, func(tp soakTopic) bool { return tp.name == topic })
	return uint32(i)<<16 | uint32(p)
}

// soakRecord is a record of soakRecordBytes: its partition's tag, its
// sequence number in the partition, a CRC-32C of the rest, then random
// bytes.
func soakRecord(src *payload.Source, tag uint32, seq uint64) []byte {
	v := src.Bytes(soakRecordBytes)
	binary.BigEndian.PutUint32(v[0:], tag)
	binary.BigEndian.PutUint64(v[4:], seq)
	binary.BigEndian.PutUint32(v[12:], crc32c(v[16:]))
	return v
}

// soakRecordError says what is wrong with a record read back at offset in
// a partition tagged tag, or nil.
func soakRecordError(v []byte, tag uint32, offset int64) error {
	switch {
	case len(v) != soakRecordBytes:
		return fmt.Errorf("offset %d: %d bytes, want %d", offset, len(v), soakRecordBytes)
	case binary.BigEndian.Uint32(v[0:]) != tag:
		return fmt.Errorf("offset %d: a record of partition tag %#x in %#x", offset, binary.BigEndian.Uint32(v[0:]), tag)
	case int64(binary.BigEndian.Uint64(v[4:])) != offset:
		return fmt.Errorf("offset %d holds record %d", offset, binary.BigEndian.Uint64(v[4:]))
	case binary.BigEndian.Uint32(v[12:]) != crc32c(v[16:]):
		return fmt.Errorf("offset %d: checksum mismatch", offset)
	}
	return nil
}

// startCommitSampler samples soak-kg's committed offset on the leader each
// second: it must never move back (a new leader still applying answers 503
// catching_up, and the sample is skipped).
func (s *soak) startCommitSampler() {
	untilStopped(&s.wg, s.stop, func(int) {
		time.Sleep(time.Second)
		l, err := s.c.findLeader()
		if err != nil {
			return
		}
		off, ok := committedOffset(s.c, l, soakKafkaGroup)
		s.procMu.Lock()
		defer s.procMu.Unlock()
		if !ok {
			s.leaderCommitUnavailable++
			return
		}
		if n := len(s.leaderCommits); n > 0 && off < s.leaderCommits[n-1] {
			s.leaderCommitsBack = append(s.leaderCommitsBack, fmt.Sprintf("from %d to %d on leader node %d", s.leaderCommits[n-1], off, l.id))
		}
		s.leaderCommits = append(s.leaderCommits, off)
	})
}

// startPushers starts two HTTP pushers. Push r carries message j to
// partition (r mod blocks)*1000 + j of soak-wide, transactionId h<r>-<j>:
// consecutive pushes reach consecutive blocks of 1,000 partitions, so the
// pushers sweep the queue, paced to sweep it soakSweeps times in the run.
func (s *soak) startPushers() {
	rate := float64(soakSweeps*s.partitions) / float64(s.seconds) / soakPushItems // pushes a second
	for w := range 2 {
		src := payload.New(uint64(100+w), false)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for {
				select {
				case <-s.stop:
					return
				default:
				}
				if float64(s.requests.Load()) > rate*time.Since(s.start).Seconds() {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				s.pushOnce(s.requests.Add(1)-1, src)
			}
		}()
	}
}

// soakItems are push r's messages.
func (s *soak) soakItems(r int64, src *payload.Source) []pushItem {
	block := int(r % int64(s.partitions/soakPushItems))
	items := make([]pushItem, soakPushItems)
	for j := range items {
		items[j] = pushItem{Queue: soakWideQueue, Partition: soakPartition(block*soakPushItems + j), TransactionID: soakTxn(r, j),
			Payload: string(src.JSON(soakItemBytes)[1 : soakItemBytes-1])}
	}
	return items
}

func soakPartition(p int) string    { return "p" + strconv.Itoa(p) }
func soakTxn(r int64, j int) string { return fmt.Sprintf("h%d-%d", r, j) }

// pushOnce sends push r until answered, records its offsets and, for every
// fifth, sends it again under a fresh key: each message must answer
// duplicate with its first offset.
func (s *soak) pushOnce(r int64, src *payload.Source) {
	items := s.soakItems(r, src)
	var out []pushAnswer
	status, open := untilAnswered(s.c, "/api/v1/push", fmt.Sprint("soak-push-", r), map[string]any{"items": items}, &out)
	s.pushOpen.Add(int64(open))
	offsets, err := pushedOffsets(items, status, out, "queued", "duplicate")
	s.pushMu.Lock()
	switch {
	case status == 0:
		s.pushUnknown[r] = true
	case err != nil:
		s.pushFailed = append(s.pushFailed, fmt.Sprintf("push %d: %v", r, err))
	default:
		s.pushed[r] = offsets
		how := soakPushHow{at: time.Since(s.start), open: open, fault: s.lastFault()}
		for _, a := range out {
			if a.Status == "duplicate" {
				how.duplicate++
			}
		}
		s.pushHow[r] = how
		s.httpBytes.Add(int64(len(items) * soakItemBytes))
		s.progress.Add(1)
	}
	s.pushMu.Unlock()
	if err != nil || r%soakAgainEvery != 0 {
		return
	}
	var again []pushAnswer
	status, _ = untilAnswered(s.c, "/api/v1/push", fmt.Sprint("soak-again-", r), map[string]any{"items": items}, &again)
	if status == 0 {
		s.againOpen.Add(1)
		return
	}
	if err := sameOffsets(items, status, again, offsets); err != nil {
		s.againWrong.Add(1)
		s.pushMu.Lock()
		s.pushFailed = append(s.pushFailed, fmt.Sprintf("push %d sent again: %v", r, err))
		s.pushMu.Unlock()
		return
	}
	s.againOK.Add(1)
}

// pushedOffsets checks a push's answer, one per item in order with one of
// the statuses, and returns the items' offsets.
func pushedOffsets(items []pushItem, status int, out []pushAnswer, statuses ...string) ([]uint64, error) {
	if status != http.StatusCreated || len(out) != len(items) {
		return nil, fmt.Errorf("status %d, %d answers to %d items", status, len(out), len(items))
	}
	offsets := make([]uint64, len(items))
	for j, a := range out {
		if !slices.Contains(statuses, a.Status) || a.Offset == nil || a.TransactionID != items[j].TransactionID {
			return nil, fmt.Errorf("item %d (%s): %+v", j, items[j].TransactionID, a)
		}
		offsets[j] = *a.Offset
	}
	return offsets, nil
}

// sameOffsets checks that a push sent again answered duplicate, each item
// with the offset it was first acknowledged at.
func sameOffsets(items []pushItem, status int, out []pushAnswer, first []uint64) error {
	offsets, err := pushedOffsets(items, status, out, "duplicate")
	if err != nil {
		return err
	}
	for j := range offsets {
		if offsets[j] != first[j] {
			return fmt.Errorf("item %d (%s): duplicate at %d, first acknowledged at %d", j, items[j].TransactionID, offsets[j], first[j])
		}
	}
	return nil
}

// startPopper pops batches of soak-wide as group soak-hg from a random live
// node and acks them; a popped message must come from the partition its
// transactionId names.
func (s *soak) startPopper() {
	untilStopped(&s.wg, s.stop, func(int) {
		live := s.c.live()
		if len(live) == 0 {
			time.Sleep(100 * time.Millisecond)
			return
		}
		n := live[rand.IntN(len(live))]
		resp, err := chaosHTTP.Get(n.url("/api/v1/pop/queue/" + soakWideQueue + "?consumerGroup=" + soakPopGroup + "&batch=100"))
		if err != nil {
			s.popFail.Add(1)
			time.Sleep(100 * time.Millisecond)
			return
		}
		var got popAnswer
		func() {
			defer resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				err = json.NewDecoder(resp.Body).Decode(&got)
			}
		}()
		switch {
		case resp.StatusCode == http.StatusNoContent:
			s.popEmpty.Add(1)
			time.Sleep(200 * time.Millisecond)
			return
		case resp.StatusCode != http.StatusOK || err != nil:
			s.popFail.Add(1)
			time.Sleep(100 * time.Millisecond)
			return
		}
		s.pops.Add(1)
		var acks []map[string]string
		for _, m := range got.Messages {
			var r int64
			var j int
			if _, err := fmt.Sscanf(m.TransactionID, "h%d-%d", &r, &j); err != nil ||
				m.Partition != soakPartition(int(r%int64(s.partitions/soakPushItems))*soakPushItems+j) {
				s.popBad.Add(1)
			}
			acks = append(acks, map[string]string{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "completed"})
		}
		var results []ackResult
		if _, err := chaosPost(s.c, "/api/v1/ack/batch", map[string]any{"consumerGroup": soakPopGroup, "acknowledgments": acks}, &results); err != nil {
			s.ackFail.Add(int64(len(acks)))
			return
		}
		for _, r := range results {
			if r.Success {
				s.acked.Add(1)
			} else {
				s.ackFail.Add(1)
			}
		}
	})
}

// startSampler samples every node's VmRSS and write_bytes each second,
// finding the node's serve process by its data directory (a restart is a
// new process).
func (s *soak) startSampler() {
	untilStopped(&s.wg, s.stop, func(int) {
		s.sampleProcs()
		time.Sleep(time.Second)
	})
}

func (s *soak) sampleProcs() {
	pids := servePIDs()
	at := time.Since(s.start)
	s.procMu.Lock()
	defer s.procMu.Unlock()
	for _, n := range s.c.nodes {
		pid, ok := pids[n.dataDir]
		if !ok {
			continue
		}
		status, err1 := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		io, err2 := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
		if err1 != nil || err2 != nil {
			continue // it ended meanwhile
		}
		p := s.procs[n.id]
		if kb := procField(status, "VmRSS:"); kb > 0 {
			anon, file := procField(status, "RssAnon:")<<10, procField(status, "RssFile:")<<10
			p.rss = append(p.rss, soakSample{at: at, rss: kb << 10, anon: anon, file: file})
			if p.pprof != "" && anon >= soakProfileFrom && anon >= p.profAt+soakProfileStep {
				p.profAt = anon
				go s.saveHeapProfile(n.id, p.pprof, at, anon)
			}
		}
		if w := procField(io, "write_bytes:"); w > 0 {
			p.written[pid] = w
		}
	}
}

// Heap profiles under WAGGLE_SOAK_PROFILES: one each time a node's
// anonymous memory passes a new high, from soakProfileFrom on, in steps of
// soakProfileStep.
const (
	soakProfileFrom = 512 << 20
	soakProfileStep = 64 << 20
)

// saveHeapProfile writes node id's heap profile into the WAGGLE_SOAK_PROFILES
// directory, named by the time into the run and the anonymous memory that
// prompted it, with the fault last injected.
func (s *soak) saveHeapProfile(id int, addr string, at time.Duration, anon int64) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap")
	if err != nil {
		s.t.Logf("node %d: heap profile: %v", id, err)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return
	}
	name := fmt.Sprintf("node%d-%04ds-%dMiB-%s.heap", id, int(at.Seconds()), anon>>20, strings.ReplaceAll(s.lastFault(), " ", "-"))
	if err := os.WriteFile(filepath.Join(s.profiles, name), body, 0o644); err != nil {
		s.t.Logf("node %d: heap profile: %v", id, err)
	}
}

// soakPushHow is how a push was acknowledged, for explaining a loss.
type soakPushHow struct {
	at        time.Duration // into the run
	open      int           // tries with an open outcome before the answer
	duplicate int           // items answered duplicate (an earlier try applied)
	fault     string        // the fault injected last by then
}

// soakFaultSpan is one fault's injection, from its start to its heal.
type soakFaultSpan struct {
	name       string
	start, end time.Duration
}

// explainLoss reports push r, acknowledged and missing from partitions:
// how and when it was acknowledged, the faults around then, and how far
// each node's own state holds the first such partition (every node
// answers fetch from what it applied).
func (s *soak) explainLoss(r int64, partitions []string) {
	how := s.pushHow[r]
	var around []string
	for _, f := range s.timeline {
		if f.end >= how.at-30*time.Second && f.start <= how.at+30*time.Second {
			around = append(around, fmt.Sprintf("%s %v–%v", f.name, f.start.Round(100*time.Millisecond), f.end.Round(100*time.Millisecond)))
		}
	}
	var nodes []string
	for _, n := range s.c.nodes {
		var f fetchAnswer
		status := postJSON(s.t, n.url("/api/v1/fetch"), map[string]any{"entries": []map[string]any{{"queue": soakWideQueue, "partition": partitions[0], "offset": 0}}}, &f)
		if status != http.StatusOK || len(f.Entries) != 1 {
			nodes = append(nodes, fmt.Sprintf("node %d: status %d", n.id, status))
			continue
		}
		var held []string
		for _, rec := range f.Entries[0].Records {
			held = append(held, fmt.Sprintf("%d=%s", rec.Offset, rec.TransactionID))
		}
		nodes = append(nodes, fmt.Sprintf("node %d: high watermark %d, records [%s]", n.id, f.Entries[0].HighWatermark, strings.Join(held, " ")))
	}
	s.t.Errorf("push %d: %d of %d messages missing (%s, …); acknowledged %v into the run after %d open tries, %d items answered duplicate, last fault %q; faults within 30 s: %s; %s on each node: %s; %s",
		r, len(partitions), soakPushItems, partitions[0], how.at.Round(100*time.Millisecond), how.open, how.duplicate, how.fault,
		strings.Join(around, "; "), partitions[0], strings.Join(nodes, ", "), s.dedupProbe(r, partitions[0]))
}

// dedupProbe sends the item of push r for partition once more, under a
// fresh key, and says what the replicated dedup state answers: duplicate
// (the id is recorded though its message is missing) or queued (the entry
// left no trace at all).
func (s *soak) dedupProbe(r int64, partition string) string {
	p, err := strconv.Atoi(strings.TrimPrefix(partition, "p"))
	if err != nil {
		return "no dedup probe: " + err.Error()
	}
	item := pushItem{Queue: soakWideQueue, Partition: partition, TransactionID: soakTxn(r, p%soakPushItems), Payload: "probe"}
	var out []pushAnswer
	status, _ := untilAnswered(s.c, "/api/v1/push", fmt.Sprint("soak-probe-", r), map[string]any{"items": []pushItem{item}}, &out)
	if status != http.StatusCreated || len(out) != 1 || out[0].Offset == nil {
		return fmt.Sprintf("%s sent again: status %d, %+v", item.TransactionID, status, out)
	}
	return fmt.Sprintf("%s sent again: %s at offset %d", item.TransactionID, out[0].Status, *out[0].Offset)
}

// keepLogs copies the nodes' logs and the fault timeline into the
// WAGGLE_SOAK_PROFILES directory when the run failed, and hard-links each
// node's data directory there (nodeN-data), so that a loss can be traced
// in the raft log and the store after the test's directories are gone.
func (s *soak) keepLogs() {
	logs := map[int][]byte{}
	failed := s.t.Failed()
	for _, n := range s.c.nodes {
		if raw, err := os.ReadFile(n.logPath); err == nil {
			logs[n.id] = raw
			failed = failed || len(stateAnomalies(raw)) > 0 // the nodes' own check comes later
		}
	}
	if !failed {
		return
	}
	for id, raw := range logs {
		os.WriteFile(filepath.Join(s.profiles, fmt.Sprintf("node%d.log", id)), raw, 0o644)
	}
	var b strings.Builder
	for _, f := range s.timeline {
		fmt.Fprintf(&b, "%v\t%v\t%s\n", f.start.Round(time.Millisecond), f.end.Round(time.Millisecond), f.name)
	}
	os.WriteFile(filepath.Join(s.profiles, "faults.tsv"), []byte(b.String()), 0o644)
	for _, n := range s.c.nodes {
		dst := filepath.Join(s.profiles, fmt.Sprintf("node%d-data", n.id))
		if out, err := exec.Command("cp", "-al", n.dataDir, dst).CombinedOutput(); err != nil {
			s.t.Logf("node %d's data directory not kept: %v %s", n.id, err, out)
		}
	}
}

// lastFault names the fault injected last, or "none".
func (s *soak) lastFault() string {
	name, _ := s.injecting.Load().(string)
	return cmp.Or(name, "none")
}

// servePIDs maps the data directory of each running `waggle serve` to its
// process id.
func servePIDs() map[string]int {
	out := map[string]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		if len(args) < 2 || args[0] != waggleBinary || args[1] != "serve" {
			continue
		}
		if i := slices.Index(args, "--data-dir"); i > 0 && i+1 < len(args) {
			out[args[i+1]] = pid
		}
	}
	return out
}

// procField is the number after name in a /proc file (kB for status).
func procField(b []byte, name string) int64 {
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

// sampleDisk keeps each node's highest ratio of data directory to payload
// acknowledged, once a tenth of the target (at least 256 MiB) is: below,
// fixed costs and the raft log not yet snapshotted dominate.
func (s *soak) sampleDisk() {
	payloadNow := s.payloadBytes()
	if payloadNow < max(256<<20, s.target/10) {
		return
	}
	for _, n := range s.c.nodes {
		s.peakDisk[n.id] = max(s.peakDisk[n.id], float64(diskUsed(n.dataDir))/float64(payloadNow))
	}
}

// diskUsed is the blocks the files under dir take, a file with several
// links (a snapshot's segments are hard links to the store's) once: what
// the node really uses of the disk. A file that vanishes meanwhile is
// skipped.
func diskUsed(dir string) int64 {
	seen := map[uint64]bool{}
	var used int64
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && !seen[st.Ino] {
			seen[st.Ino] = true
			used += st.Blocks * 512
		}
		return nil
	})
	return used
}

// check heals, measures, restarts the cluster and checks everything.
func (s *soak) check() {
	t := s.t
	began := time.Now()
	for _, n := range s.c.nodes {
		if err := s.waitCaughtUp(n, 5*time.Minute); err != nil {
			t.Fatalf("node %d did not catch up after the run: %v", n.id, err)
		}
	}
	found, summary := s.diverged.result()
	if found != "" {
		t.Errorf("replicas diverged during the run, which began at %s: %s (%s)", s.start.Format("15:04:05.000"), found, summary)
	} else if s.diverged.compared == 0 {
		t.Errorf("replicas were never compared during the run: %s", summary)
	}
	s.logf("replicas during the run: %s; %s", cmp.Or(found, "no divergence"), summary)
	s.c.replicasAgree()
	s.sampleProcs()
	s.finalDisk, s.finalUsed = map[int]dirUsage{}, map[int]int64{}
	s.payloadAt = s.payloadBytes()
	s.procMu.Lock()
	for _, n := range s.c.nodes {
		s.finalDisk[n.id] = measureDataDir(t, n.dataDir)
		s.finalUsed[n.id] = diskUsed(n.dataDir)
		for _, w := range s.procs[n.id].written {
			s.written[n.id] += w
		}
	}
	s.procMu.Unlock()

	// The whole cluster stopped and started again: until a leader serves and
	// every node has applied its commit.
	restartBegan := time.Now()
	for _, n := range s.c.nodes {
		n.stop()
	}
	for _, n := range s.c.nodes {
		n.start()
	}
	for _, n := range s.c.nodes {
		if err := s.waitCaughtUp(n, 5*time.Minute); err != nil {
			t.Fatalf("node %d after the whole-cluster restart: %v\n%s", n.id, err, n.logTail())
		}
	}
	s.restart = time.Since(restartBegan)
	s.c.replicasAgree()

	s.checkKafka()
	s.checkHTTP()
	s.checkBounds()
	s.checksDone = time.Since(began)
}

// checkKafka: every partition's end offset is its acknowledged records on
// every node; read in full from the leader, offset i holds the partition's
// record i, intact; the group's committed offset never moved back.
func (s *soak) checkKafka() {
	t := s.t
	if n := s.kafkaFailed.Load() + s.kafkaWrongOffsets.Load(); n > 0 {
		var errs []string
		s.kafkaErrors.Range(func(k, _ any) bool { errs = append(errs, k.(string)); return len(errs) < 10 })
		t.Errorf("Kafka: %d records failed, %d acknowledged at an offset other than their number: %s", s.kafkaFailed.Load(), s.kafkaWrongOffsets.Load(), strings.Join(errs, "; "))
	}
	l := s.c.leader()
	acked := map[string]int64{}
	for _, tp := range soakTopics {
		for p := range tp.partitions {
			v, _ := s.kafkaAcked.Load(soakPartKey(tp.name, p))
			acked[soakPartKey(tp.name, p)] = v.(*atomic.Int64).Load()
		}
	}
	// Every node's end offsets, from its own state (HTTP fetch).
	var entries []map[string]any
	for _, tp := range soakTopics {
		for p := range tp.partitions {
			entries = append(entries, map[string]any{"queue": tp.name, "partition": strconv.Itoa(int(p)), "offset": 0, "maxBytes": 1})
		}
	}
	for _, n := range s.c.nodes {
		var f fetchAnswer
		if status := postJSON(t, n.url("/api/v1/fetch"), map[string]any{"entries": entries}, &f); status != http.StatusOK || len(f.Entries) != len(entries) {
			t.Errorf("node %d: fetch of the topics' ends: status %d, %d entries", n.id, status, len(f.Entries))
			continue
		}
		for _, e := range f.Entries {
			p, _ := strconv.Atoi(e.Partition)
			if want := acked[soakPartKey(e.Queue, int32(p))]; int64(e.HighWatermark) != want {
				t.Errorf("node %d: %s ends at %d, %d records acknowledged", n.id, soakPartKey(e.Queue, int32(p)), e.HighWatermark, want)
			}
		}
	}

	// Read every partition in full from the leader.
	readBegan := time.Now()
	offsets := map[string]map[int32]kgo.Offset{}
	for _, tp := range soakTopics {
		offsets[tp.name] = map[int32]kgo.Offset{}
		for p := range tp.partitions {
			offsets[tp.name][p] = kgo.NewOffset().AtStart()
		}
	}
	reader := kafkaClient(t, []string{l.kafkaAddr}, kgo.ConsumePartitions(offsets), kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(16<<20))
	next := map[string]int64{}
	var total int64
	want := int64(0)
	for _, n := range acked {
		want += n
	}
	bad := 0
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+time.Duration(float64(time.Minute)*float64(s.kafkaAckedBytes.Load())/(1<<30)))
	defer cancel()
	for total < want && ctx.Err() == nil {
		fs := reader.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("fetch %s: %v", soakPartKey(topic, p), err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			key := soakPartKey(r.Topic, r.Partition)
			total++
			if r.Offset != next[key] {
				bad++
				if bad < 10 {
					t.Errorf("%s: offset %d read after %d", key, r.Offset, next[key]-1)
				}
			}
			next[key] = r.Offset + 1
			if err := soakRecordError(r.Value, soakTag(r.Topic, r.Partition), r.Offset); err != nil {
				bad++
				if bad < 10 {
					t.Errorf("%s: %v", key, err)
				}
			}
		})
	}
	for key, n := range acked {
		if next[key] != n {
			bad++
			t.Errorf("%s: read up to offset %d, %d records acknowledged", key, next[key], n)
		}
	}
	if total != want || bad > 0 {
		t.Errorf("Kafka read back: %d records (%d acknowledged), %d wrong, in %v", total, want, bad, time.Since(readBegan).Round(time.Second))
	}
	s.logf("Kafka read back in full from leader node %d: %d records, %s, in %v", l.id, total, gib(total*soakRecordBytes), time.Since(readBegan).Round(time.Second))

	// The group.
	var final int64
	waitFor(t, 60*time.Second, func() error {
		var ok bool
		if final, ok = committedOffset(s.c, s.c.leader(), soakKafkaGroup); !ok {
			return errors.New("the leader does not answer soak-kg's committed offset")
		}
		return nil
	})
	for _, v := range s.groups.check(final) {
		t.Errorf("Kafka group: %s", v)
	}
	s.procMu.Lock()
	defer s.procMu.Unlock()
	for _, v := range s.leaderCommitsBack {
		t.Errorf("Kafka group: committed offset moved back %s", v)
	}
	if len(s.leaderCommits) == 0 || s.leaderCommits[len(s.leaderCommits)-1] == 0 || final < s.leaderCommits[len(s.leaderCommits)-1] {
		t.Errorf("Kafka group: final committed offset %d; the leader showed %d samples, last %v", final, len(s.leaderCommits), s.leaderCommits[max(0, len(s.leaderCommits)-1):])
	}
	s.logf("Kafka group %s: final committed offset %d of %d, %d offsets consumed; %d samples on the leader (%d unanswered: down, or catching up), %d on node 1; %d assignments",
		soakKafkaGroup, final, acked[soakPartKey(soakGroupTopic, 0)], len(s.groups.consumed), len(s.leaderCommits), s.leaderCommitUnavailable, len(s.groups.commits), s.groups.assignments)
}

// checkHTTP reads every partition of soak-wide from the leader: each
// acknowledged message at its offset, no transactionId twice, no message
// that was not pushed; every partition reached. A sample of pushes sent
// again after the restart answers duplicate with the first offsets.
func (s *soak) checkHTTP() {
	t := s.t
	s.pushMu.Lock()
	defer s.pushMu.Unlock()
	for i, f := range s.pushFailed {
		if i == 10 {
			t.Errorf("… %d more", len(s.pushFailed)-10)
			break
		}
		t.Error(f)
	}
	if n := len(s.pushUnknown); n > 0 {
		t.Errorf("%d pushes left unanswered after retrying under their key", n)
	}
	l := s.c.leader()
	blocks := s.partitions / soakPushItems
	requests := s.requests.Load()
	began := time.Now()
	var stored, missing, wrong, reached int
	lacking := map[int64][]string{} // push -> partitions lacking its message
	for b := range blocks {
		for first := 0; first < soakPushItems; first += 100 {
			var entries []map[string]any
			for j := first; j < first+100; j++ {
				entries = append(entries, map[string]any{"queue": soakWideQueue, "partition": soakPartition(b*soakPushItems + j), "offset": 0, "maxBytes": 16 << 20})
			}
			var f fetchAnswer
			waitFor(t, 60*time.Second, func() error {
				if status := postJSON(t, l.url("/api/v1/fetch"), map[string]any{"entries": entries}, &f); status != http.StatusOK || len(f.Entries) != len(entries) {
					return fmt.Errorf("fetch of soak-wide block %d: status %d, %d entries", b, status, len(f.Entries))
				}
				return nil
			})
			for k, e := range f.Entries {
				j := first + k
				at := map[string]uint64{}
				for _, r := range e.Records {
					if _, dup := at[r.TransactionID]; dup {
						wrong++
						t.Errorf("%s: %s stored twice", e.Partition, r.TransactionID)
					}
					at[r.TransactionID] = r.Offset
				}
				if uint64(len(e.Records)) != e.HighWatermark {
					wrong++
					t.Errorf("%s: %d records below high watermark %d (one page holds them all)", e.Partition, len(e.Records), e.HighWatermark)
				}
				if len(e.Records) > 0 {
					reached++
				}
				stored += len(e.Records)
				expected := 0
				for r := int64(b); r < requests; r += int64(blocks) {
					offsets, ok := s.pushed[r]
					if !ok {
						if !s.pushUnknown[r] {
							if _, there := at[soakTxn(r, j)]; there {
								wrong++
								t.Errorf("%s holds %s of push %d, which failed", e.Partition, soakTxn(r, j), r)
							}
						}
						continue
					}
					expected++
					if off, ok := at[soakTxn(r, j)]; !ok {
						missing++
						lacking[r] = append(lacking[r], e.Partition)
						if missing < 10 {
							t.Errorf("%s lacks acknowledged %s (offset %d)", e.Partition, soakTxn(r, j), offsets[j])
						}
					} else if off != offsets[j] {
						wrong++
						t.Errorf("%s holds %s at %d, acknowledged at %d", e.Partition, soakTxn(r, j), off, offsets[j])
					}
				}
				if len(e.Records) > expected+len(s.pushUnknown) {
					wrong++
					t.Errorf("%s holds %d messages, %d acknowledged", e.Partition, len(e.Records), expected)
				}
			}
		}
	}
	if reached != s.partitions {
		t.Errorf("the pushes reached %d of %d partitions", reached, s.partitions)
	}
	for _, r := range slices.Sorted(maps.Keys(lacking)) {
		s.explainLoss(r, lacking[r])
	}
	acked := 0
	for range s.pushed {
		acked += soakPushItems
	}
	s.logf("HTTP read back from leader node %d: %d messages in %d partitions (%d reached) in %v; %d acknowledged, %d missing, %d wrong",
		l.id, stored, s.partitions, reached, time.Since(began).Round(time.Second), acked, missing, wrong)

	// Dedup after the restart: ten acknowledged pushes sent again.
	src := payload.New(7, false)
	var sample []int64
	for r := range s.pushed {
		sample = append(sample, r)
		if len(sample) == 10 {
			break
		}
	}
	for _, r := range sample {
		items := s.soakItems(r, src)
		var out []pushAnswer
		status, _ := untilAnswered(s.c, "/api/v1/push", fmt.Sprint("soak-after-", r), map[string]any{"items": items}, &out)
		if err := sameOffsets(items, status, out, s.pushed[r]); err != nil {
			t.Errorf("push %d sent again after the restart: %v", r, err)
		}
	}
}

// checkBounds holds each node's memory, disk, write amplification and the
// wiped followers' catch-up to their bounds.
func (s *soak) checkBounds() {
	t := s.t
	s.procMu.Lock()
	defer s.procMu.Unlock()
	half := s.faultyEnd.Sub(s.start) / 2
	for _, n := range s.c.nodes {
		if peak := s.peak(n.id, 0, forever, rssOf); peak > soakRSSBound {
			t.Errorf("node %d: peak RSS %s over the bound %s", n.id, mib(peak), mib(soakRSSBound))
		}
		// Growth is judged on the process's own memory: the file pages it
		// maps (badger's tables and value log) are page cache, which the
		// kernel takes back under pressure, and they grow with what was
		// read, not with what the process holds.
		first, second := s.peak(n.id, 0, half, anonOf), s.peak(n.id, half, forever, anonOf)
		if float64(second) > soakRSSGrowth*float64(first)+soakRSSSlack {
			t.Errorf("node %d: peak anonymous memory grew with the data: %s in the first half, %s in the second", n.id, mib(first), mib(second))
		}
		if r := s.diskRatio(n.id); r > soakDiskRatio || s.peakDisk[n.id] > soakDiskRatio {
			t.Errorf("node %d: data directory %.2f× the payload at the end, %.2f× at most during the run (bound %.1f×)", n.id, r, s.peakDisk[n.id], soakDiskRatio)
		}
		if w := s.writeAmp(n.id); w > soakWriteAmp {
			t.Errorf("node %d: wrote %.2f× the payload (bound %.1f×)", n.id, w, soakWriteAmp)
		}
	}
	if len(s.catchUps) == 0 {
		t.Errorf("no follower was wiped")
	}
}

// leaseLost is the line hashicorp/raft logs when a leader has not heard
// from a quorum within its lease and steps down.
const leaseLost = "failed to contact quorum of nodes, stepping down"

// leaseLosses counts the step-downs in every node's log over the run,
// and of them those that came while a leader was stopped by SIGSTOP or
// within soakWakeGrace after: such a leader steps down once it runs again.
// The others happened to a running leader, from a stall long enough to let
// its lease run out.
func (s *soak) leaseLosses() (total, afterSIGSTOP int) {
	var paused []soakFaultSpan
	for _, f := range s.timeline {
		if strings.HasPrefix(f.name, "SIGSTOP") {
			paused = append(paused, f)
		}
	}
	for _, n := range s.c.nodes {
		raw, err := os.ReadFile(n.logPath)
		if err != nil {
			s.t.Logf("node %d: %v", n.id, err)
			continue
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if !strings.Contains(line, leaseLost) {
				continue
			}
			total++
			at, ok := logLineTime(line)
			if !ok {
				continue
			}
			rel := at.Sub(s.start)
			if slices.ContainsFunc(paused, func(f soakFaultSpan) bool { return rel >= f.start && rel <= f.end+soakWakeGrace }) {
				afterSIGSTOP++
			}
		}
	}
	return total, afterSIGSTOP
}

// soakWakeGrace is how long after a SIGSTOP ends a step-down still counts
// as the woken leader's.
const soakWakeGrace = 5 * time.Second

// logLineTime is the time of a node's log line (slog's text format:
// time=2026-12-06T14:33:48.390Z ...).
func logLineTime(line string) (time.Time, bool) {
	v, ok := strings.CutPrefix(line, "time=")
	if !ok {
		return time.Time{}, false
	}
	v, _, _ = strings.Cut(v, " ")
	at, err := time.Parse(time.RFC3339Nano, v)
	return at, err == nil
}

// forever ends a sample window that takes every sample to the end.
const forever = 1000 * time.Hour

// peak is node id's highest sampled value of a field in [from, to).
func (s *soak) peak(id int, from, to time.Duration, field func(soakSample) int64) int64 {
	var peak int64
	for _, sm := range s.procs[id].rss {
		if sm.at >= from && sm.at < to {
			peak = max(peak, field(sm))
		}
	}
	return peak
}

func rssOf(sm soakSample) int64  { return sm.rss }
func anonOf(sm soakSample) int64 { return sm.anon }
func fileOf(sm soakSample) int64 { return sm.file }

func (s *soak) diskRatio(id int) float64 {
	return float64(s.finalUsed[id]) / float64(s.payloadAt)
}

func (s *soak) writeAmp(id int) float64 { return float64(s.written[id]) / float64(s.payloadAt) }

// logf logs a line of the report and keeps it for the summary.
func (s *soak) logf(format string, args ...any) {
	s.t.Logf(format, args...)
	s.checks = append(s.checks, fmt.Sprintf(format, args...))
}

// report logs the summary table.
func (s *soak) report() {
	var b strings.Builder
	row := func(k, v string) { fmt.Fprintf(&b, "| %s | %s |\n", k, v) }
	fmt.Fprintf(&b, "\nsoak at volume: %d s asked, faulty part %v, checks %v\n| what | figure |\n|---|---|\n",
		s.seconds, s.faultyEnd.Sub(s.start).Round(time.Second), s.checksDone.Round(time.Second))
	var faults []string
	for _, k := range slices.Sorted(maps.Keys(s.faults)) {
		faults = append(faults, fmt.Sprintf("%s ×%d", k, s.faults[k]))
	}
	row("faults", strings.Join(faults, ", "))
	row("Kafka produce ok / fail / wrong offset", fmt.Sprintf("%d / %d / %d records (%s acknowledged, target %s)",
		s.kafkaAckedBytes.Load()/soakRecordBytes, s.kafkaFailed.Load(), s.kafkaWrongOffsets.Load(), gib(s.kafkaAckedBytes.Load()), gib(s.target)))
	row("HTTP push ok / fail / info", fmt.Sprintf("%d / %d / %d requests of %d messages; %d tries with an open outcome, sent again under their key",
		len(s.pushed), len(s.pushFailed), len(s.pushUnknown), soakPushItems, s.pushOpen.Load()))
	row("HTTP dedup (push sent again) ok / wrong / unanswered", fmt.Sprintf("%d / %d / %d", s.againOK.Load(), s.againWrong.Load(), s.againOpen.Load()))
	row("HTTP pop ok / empty / fail / wrong partition", fmt.Sprintf("%d / %d / %d / %d; acks ok / fail %d / %d", s.pops.Load(), s.popEmpty.Load(), s.popFail.Load(), s.popBad.Load(), s.acked.Load(), s.ackFail.Load()))
	row("partitions of soak-wide", fmt.Sprintf("%d (%d sweeps asked)", s.partitions, soakSweeps))
	row("payload acknowledged", fmt.Sprintf("%s (Kafka %s, HTTP %s)", gib(s.payloadAt), gib(s.kafkaAckedBytes.Load()), gib(s.httpBytes.Load())))
	for _, n := range s.c.nodes {
		half := s.faultyEnd.Sub(s.start) / 2
		u := s.finalDisk[n.id]
		row(fmt.Sprintf("node %d", n.id), fmt.Sprintf("peak RSS %s (first half %s, second %s); anonymous at most %s (first half %s, second %s); mapped file pages at most %s; data dir %s = %.2f× payload (peak during run %.2f×; by part, hard links in each: state %s, raft log %s, snapshots %s); wrote %s = %.2f× payload",
			mib(s.peak(n.id, 0, forever, rssOf)), mib(s.peak(n.id, 0, half, rssOf)), mib(s.peak(n.id, half, forever, rssOf)),
			mib(s.peak(n.id, 0, forever, anonOf)), mib(s.peak(n.id, 0, half, anonOf)), mib(s.peak(n.id, half, forever, anonOf)), mib(s.peak(n.id, 0, forever, fileOf)),
			gib(s.finalUsed[n.id]), s.diskRatio(n.id), s.peakDisk[n.id], gib(u.allocated["state"]), gib(u.allocated["raft log"]), gib(u.allocated["raft snapshots"]),
			gib(s.written[n.id]), s.writeAmp(n.id)))
	}
	row("whole-cluster restart (stop, start, all caught up)", s.restart.Round(time.Millisecond).String())
	losses, woken := s.leaseLosses()
	row("leader lost its lease", fmt.Sprintf("%d times (raft logs \"%s\"): %d by a leader stopped by SIGSTOP (%d such faults), %d by a running leader",
		losses, leaseLost, woken, s.faults["SIGSTOP leader 2 s"], losses-woken))
	for _, cu := range s.catchUps {
		row(fmt.Sprintf("wiped node %d caught up", cu.node), fmt.Sprintf("%v for %s stored (%.0f MB/s; bound %v)",
			cu.took.Round(time.Millisecond), gib(cu.bytes), float64(cu.bytes)/1e6/cu.took.Seconds(), s.catchUpBound(cu.bytes)))
	}
	for _, c := range s.checks {
		row("check", c)
	}
	s.t.Log(b.String())
}

func gib(n int64) string { return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30)) }
