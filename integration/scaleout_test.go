package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/waggle-mq/waggle/router"
)

// scaleOut is a static cluster whose data groups have fewer replicas
// than it has nodes (--replication-factor), as the test computes them:
// data group g is on the factor nodes from position g-1 on, the first of
// them its preferred leader, and group 0 holds no queue.
type scaleOut struct {
	*cluster
	groups, factor int
}

func startScaleOut(t testing.TB, nodes, groups, factor int, extra ...string) *scaleOut {
	t.Helper()
	c := startCluster(t, nodes, append([]string{"--data-groups", fmt.Sprint(groups), "--replication-factor", fmt.Sprint(factor)}, extra...)...)
	return &scaleOut{cluster: c, groups: groups, factor: factor}
}

// replicas lists the node ids of data group g, its preferred leader first.
func (s *scaleOut) replicas(g uint32) []int {
	var out []int
	for i := range s.factor {
		out = append(out, (int(g)-1+i)%len(s.nodes)+1)
	}
	return out
}

// groupOf is the data group a queue or topic name is placed in.
func (s *scaleOut) groupOf(name string) uint32 { return 1 + router.Group(name, s.groups-1) }

// nameIn is a name with prefix placed in data group g.
func (s *scaleOut) nameIn(t testing.TB, prefix string, g uint32) string {
	for i := range 10000 {
		if name := fmt.Sprintf("%s%d", prefix, i); s.groupOf(name) == g {
			return name
		}
	}
	t.Fatalf("no name %s… in group %d", prefix, g)
	return ""
}

// outsider is a live node that does not replicate group g, other than
// the nodes in not.
func (s *scaleOut) outsider(g uint32, not ...*node) *node {
	for _, n := range s.live() {
		if !slices.Contains(s.replicas(g), n.id) && !slices.Contains(not, n) {
			return n
		}
	}
	s.t.Fatalf("every live node replicates group %d", g)
	return nil
}

// waitPlaced waits until every live node runs group 0 and exactly the data
// groups it replicates, each led by leader(g): a node id, or 0 for any
// live node.
func (s *scaleOut) waitPlaced(t testing.TB, leader func(g uint32) int) {
	t.Helper()
	waitFor(t, 60*time.Second, func() error {
		for _, n := range s.live() {
			var h struct {
				groupsAnswer
				GroupCount int `json:"groupCount"`
			}
			if status := getJSON(t, n.url("/health"), &h); status != http.StatusOK {
				return fmt.Errorf("node %d: health %d", n.id, status)
			}
			if h.GroupCount != s.groups {
				return fmt.Errorf("node %d says the cluster runs %d groups, want %d", n.id, h.GroupCount, s.groups)
			}
			var runs []uint32
			for _, g := range h.Groups {
				runs = append(runs, g.ID)
				want := leader(g.ID)
				switch {
				case g.ID == 0:
				case g.Leader == nil:
					return fmt.Errorf("node %d: group %d has no leader", n.id, g.ID)
				case want != 0 && *g.Leader != want:
					return fmt.Errorf("node %d: group %d led by %d, want %d", n.id, g.ID, *g.Leader, want)
				case want == 0 && s.nodes[*g.Leader-1].hasExited():
					return fmt.Errorf("node %d: group %d led by node %d, which is down", n.id, g.ID, *g.Leader)
				}
			}
			want := []uint32{0}
			for g := uint32(1); g < uint32(s.groups); g++ {
				if slices.Contains(s.replicas(g), n.id) {
					want = append(want, g)
				}
			}
			if !slices.Equal(runs, want) {
				return fmt.Errorf("node %d runs groups %v, want %v", n.id, runs, want)
			}
		}
		return nil
	})
}

// On 6 nodes with 12 data groups of 3 replicas each node runs 6 of the
// groups, stores only their data and leads 2. Any node answers anything:
// an HTTP push, retry, pop and ack sent to a node outside the queue's
// group reach its leader (the retry answers duplicate with the first
// push's id and offset), lists gather every group, Kafka Metadata on
// every node names each partition's leader and its 3 replicas, and
// franz-go and kcat produce and consume through any broker. After kill -9
// of a node, its groups fail over to their other replicas: retried pushes
// still answer duplicate, and nothing acknowledged is lost or doubled.
func TestReplicaSetsSmallerThanTheCluster(t *testing.T) {
	s := startScaleOut(t, 6, 13, 3)
	s.waitPlaced(t, func(g uint32) int { return s.replicas(g)[0] })
	for _, n := range s.nodes {
		for g := uint32(1); g < 13; g++ {
			_, err := os.Stat(groupDir(n, int(g)))
			if has := err == nil; has != slices.Contains(s.replicas(g), n.id) {
				t.Fatalf("node %d has the directory of group %d: %v; it replicates it: %v", n.id, g, has, !has)
			}
		}
	}

	// HTTP: one queue per data group, each push sent to a node outside
	// the group and retried through another.
	first := map[string]pushAnswer{}
	var queues []string
	for g := uint32(1); g < 13; g++ {
		q := s.nameIn(t, "so-q", g)
		queues = append(queues, q)
		a := s.outsider(g).push(pushItem{Queue: q, TransactionID: "tx-" + q, Payload: map[string]any{"g": g}})[0]
		requireStatus(t, a, "queued", 0)
		first[q] = a
		again := s.outsider(g, s.outsider(g)).push(pushItem{Queue: q, TransactionID: "tx-" + q, Payload: map[string]any{"g": g}})[0]
		if again.Status != "duplicate" || *again.MessageID != *a.MessageID || *again.Offset != *a.Offset {
			t.Fatalf("retry of %s through another node: %+v, want duplicate of %+v", q, again, a)
		}
	}
	// Node 1 lists every group's queues: those of the groups it does not
	// replicate from a replica that has caught up with its leader, its own
	// from its copy, which as a follower's may lag a moment.
	waitFor(t, 10*time.Second, func() error {
		var listed struct {
			Queues []queueAnswer `json:"queues"`
		}
		if status := getJSON(t, s.nodes[0].url("/api/v1/resources/queues"), &listed); status != http.StatusOK || len(listed.Queues) != len(queues) {
			return fmt.Errorf("node 1 lists %d queues (status %d), want %d", len(listed.Queues), status, len(queues))
		}
		return nil
	})
	for _, q := range queues[:4] {
		g := s.groupOf(q)
		status, popped := s.outsider(g).pop(t, q, map[string]string{"consumerGroup": "so-workers", "batch": "10"})
		if status != http.StatusOK || len(popped.Messages) != 1 || popped.Messages[0].ID != *first[q].MessageID {
			t.Fatalf("pop of %s through a node outside group %d: %d %+v", q, g, status, popped)
		}
		code, results := s.outsider(g, s.outsider(g)).ackAll(t, "so-workers", popped.Messages, "completed")
		if code != http.StatusOK {
			t.Fatalf("ack of %s: status %d", q, code)
		}
		requireAcked(t, results, 1)
	}
	if f := s.outsider(s.groupOf(queues[5])).fetchAll(queues[5], "Default"); len(f.Entries) != 1 || len(f.Entries[0].Records) != 1 {
		t.Fatalf("fetch through a node outside the group: %+v", f)
	}
	// A consumer group with positions only in groups 3 and 4, which node
	// 1 does not replicate. Deleting it through node 1 reaches them under
	// the request's Idempotency-Key: a retry is answered as the first
	// attempt was, not 404.
	for _, q := range queues[2:4] {
		if slices.Contains(s.replicas(s.groupOf(q)), 1) {
			t.Fatalf("node 1 replicates group %d", s.groupOf(q))
		}
		if status, popped := s.nodes[0].pop(t, q, map[string]string{"consumerGroup": "so-elsewhere"}); status != http.StatusOK || len(popped.Messages) != 1 {
			t.Fatalf("pop of %s for so-elsewhere: %d %+v", q, status, popped)
		}
	}
	for attempt := range 2 {
		req, _ := http.NewRequest(http.MethodDelete, s.nodes[0].url("/api/v1/consumer-groups/so-elsewhere"), nil)
		req.Header.Set("Idempotency-Key", "delete-so-workers")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("delete of the consumer group, attempt %d: status %d", attempt+1, resp.StatusCode)
		}
	}
	// What cannot change yet is refused: a leader outside the group's
	// replicas, removing a node.
	if status := do(t, http.MethodPut, s.nodes[0].url("/api/v1/cluster/groups/1/leader"), []byte(`{"node":5}`), nil); status != http.StatusBadRequest {
		t.Fatalf("node 5, not a replica of group 1, chosen to lead it: status %d, want 400", status)
	}
	if status := do(t, http.MethodDelete, s.nodes[0].url("/api/v1/cluster/nodes/6"), nil, nil); status != http.StatusConflict {
		t.Fatalf("removing a node: status %d, want 409", status)
	}

	// Kafka: a client seeded with node 1 alone finds every leader.
	var topics []string
	for g := uint32(1); g < 13; g++ {
		topics = append(topics, s.nameIn(t, "so-t", g))
	}
	cl := kafkaClient(t, []string{s.nodes[0].kafkaAddr}, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgoLogger(t, "producer"))
	for _, topic := range topics {
		createTopic(t, cl, topic, 2, nil)
	}
	for _, n := range s.nodes {
		s.requireMetadata(t, n, topics, func(g uint32) int { return s.replicas(g)[0] })
	}
	const perPartition = 40
	acked := map[string]int{} // records acknowledged, by topic
	produceAll := func(cl *kgo.Client, tag string) {
		var recs []*kgo.Record
		for _, topic := range topics {
			for p := range int32(2) {
				for i := range perPartition {
					recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%s/%s/%d/%d", tag, topic, p, i)})
				}
			}
			acked[topic] += 2 * perPartition
		}
		produceSync(t, cl, recs...)
	}
	produceAll(cl, "before")

	// kcat through a broker outside the topic's group, both ways.
	kcat := requireKcat(t)
	kt := topics[2]
	via := s.outsider(s.groupOf(kt))
	produce := exec.Command(kcat, "-b", via.kafkaAddr, "-P", "-t", kt, "-p", "1")
	produce.Stdin = strings.NewReader("kcat-1\nkcat-2\n")
	if out, err := runWithTimeout(t, produce, 30*time.Second); err != nil {
		t.Fatalf("kcat -P through node %d: %v\n%s", via.id, err, out)
	}
	acked[kt] += 2
	out, err := runWithTimeout(t, exec.Command(kcat, "-b", via.kafkaAddr, "-C", "-t", kt, "-p", "1", "-o", "beginning", "-e", "-q"), 30*time.Second)
	if err != nil || strings.Count(string(out), "\n") != perPartition+2 || !strings.HasSuffix(string(out), "kcat-1\nkcat-2\n") {
		t.Fatalf("kcat -C through node %d read %d lines (%v), want %d ending with kcat's", via.id, strings.Count(string(out), "\n"), err, perPartition+2)
	}

	// A consumer group reads every topic and commits; its offsets live in
	// each topic's group, written from the coordinator wherever it is.
	readGroup := func(brokers []string, want int) int {
		return len(readGroupOnce(t, brokers, "so-readers", topics, want))
	}
	total := 0
	for _, n := range acked {
		total += n
	}
	readGroup([]string{s.nodes[5].kafkaAddr}, total)
	// Each broker describes the log dirs of the partitions it hosts.
	dirs, err := kadm.NewClient(cl).DescribeAllLogDirs(context.Background(), nil)
	if err != nil {
		t.Fatalf("DescribeLogDirs: %v", err)
	}
	for _, n := range s.nodes {
		hosted := 0
		dirs.Each(func(d kadm.DescribedLogDir) {
			if d.Err != nil {
				t.Fatalf("DescribeLogDirs of broker %d: %v", d.Broker, d.Err)
			}
			if d.Broker == int32(n.id) {
				d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
					if p.Topic != "__consumer_offsets" && !slices.Contains(s.replicas(s.groupOf(p.Topic)), n.id) {
						t.Fatalf("broker %d describes %s[%d], of a group it does not replicate", n.id, p.Topic, p.Partition)
					}
					hosted++
				})
			}
		})
		if hosted == 0 {
			t.Fatalf("broker %d describes no partition", n.id)
		}
	}

	// kill -9 of node 2: the groups it replicates fail over.
	dead := s.nodes[1]
	dead.kill9()
	s.waitPlaced(t, func(g uint32) int { return 0 })
	for _, q := range queues {
		g := s.groupOf(q)
		if !slices.Contains(s.replicas(g), dead.id) {
			continue
		}
		again := s.outsider(g).push(pushItem{Queue: q, TransactionID: "tx-" + q, Payload: map[string]any{"g": g}})[0]
		if again.Status != "duplicate" || *again.MessageID != *first[q].MessageID || *again.Offset != *first[q].Offset {
			t.Fatalf("retry of %s after node %d's kill: %+v, want duplicate of %+v", q, dead.id, again, first[q])
		}
	}
	survivors := []string{s.nodes[0].kafkaAddr, s.nodes[3].kafkaAddr}
	after := kafkaClient(t, survivors, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgoLogger(t, "after-kill"))
	start := time.Now()
	produceAll(after, "after")
	t.Logf("%d records to 12 topics acknowledged %v after node %d's kill", 24*perPartition, time.Since(start).Round(time.Millisecond), dead.id)
	for _, n := range s.live() {
		s.requireMetadata(t, n, topics, func(g uint32) int {
			if rs := s.replicas(g); rs[0] != dead.id {
				return rs[0] // a group whose preferred leader lives keeps it
			}
			return 0
		})
	}
	for _, topic := range topics {
		got := consumeN(t, survivors, topic, acked[topic])
		seen := map[string]bool{}
		for _, r := range got {
			if seen[string(r.Value)] {
				t.Fatalf("%s holds %s twice", topic, r.Value)
			}
			seen[string(r.Value)] = true
		}
		for p := range 2 {
			for _, tag := range []string{"before", "after"} {
				if v := fmt.Sprintf("%s/%s/%d/%d", tag, topic, p, perPartition-1); !seen[v] {
					t.Fatalf("%s lost %s, acknowledged", topic, v)
				}
			}
		}
	}
	// The group resumes from its commits: only the records produced since.
	if got, want := readGroup(survivors, 24*perPartition), 24*perPartition; got != want {
		t.Fatalf("after its commits the group read %d records, want %d", got, want)
	}
}

// requireMetadata checks that Metadata from n names, for each topic's
// partitions, a leader among the topic's group's replicas (leader(g) when
// not 0), exactly those replicas, and as in-sync replicas those of them
// that are up (raft voters the leader is in touch with).
func (s *scaleOut) requireMetadata(t *testing.T, n *node, topics []string, leader func(g uint32) int) {
	t.Helper()
	cl := kafkaClient(t, []string{n.kafkaAddr})
	defer cl.Close()
	waitFor(t, 30*time.Second, func() error {
		req := kmsg.NewPtrMetadataRequest()
		for _, topic := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
		}
		raw, err := cl.Broker(n.id).Request(context.Background(), req)
		if err != nil {
			return err
		}
		resp := raw.(*kmsg.MetadataResponse)
		for _, mt := range resp.Topics {
			g := s.groupOf(*mt.Topic)
			replicas := s.replicas(g)
			if len(mt.Partitions) == 0 {
				return fmt.Errorf("node %d: %s has no partitions (error %d)", n.id, *mt.Topic, mt.ErrorCode)
			}
			for _, p := range mt.Partitions {
				var got []int
				for _, r := range p.Replicas {
					got = append(got, int(r))
				}
				slices.Sort(got)
				want := slices.Sorted(slices.Values(replicas))
				var isr, wantISR []int
				for _, r := range p.ISR {
					isr = append(isr, int(r))
				}
				slices.Sort(isr)
				for _, id := range want {
					if !s.nodes[id-1].hasExited() {
						wantISR = append(wantISR, id)
					}
				}
				switch {
				case p.ErrorCode != 0:
					return fmt.Errorf("node %d: %s[%d] error %d", n.id, *mt.Topic, p.Partition, p.ErrorCode)
				case !slices.Contains(replicas, int(p.Leader)):
					return fmt.Errorf("node %d: %s[%d] led by %d, not one of its replicas %v", n.id, *mt.Topic, p.Partition, p.Leader, replicas)
				case leader(g) != 0 && int(p.Leader) != leader(g):
					return fmt.Errorf("node %d: %s[%d] led by %d, want %d", n.id, *mt.Topic, p.Partition, p.Leader, leader(g))
				case !slices.Equal(got, want):
					return fmt.Errorf("node %d: %s[%d] replicas %v, want %v", n.id, *mt.Topic, p.Partition, got, want)
				case !slices.Equal(isr, wantISR):
					return fmt.Errorf("node %d: %s[%d] in-sync replicas %v, want %v", n.id, *mt.Topic, p.Partition, isr, wantISR)
				}
			}
		}
		return nil
	})
}

// On 5 nodes (no racks) and on 9 nodes in three racks, 3 replicas per
// group: each node runs its share of the groups, Metadata names every
// partition's replicas and racks from every broker, and after kill -9 of
// a node retried pushes answer duplicate and no acknowledged record is
// lost or doubled; then the dead node is decommissioned, its groups get
// new replicas, and the records written since are kept too.
func TestReplicaSetsOnFiveAndNineNodes(t *testing.T) {
	for _, size := range []int{5, 9} {
		t.Run(fmt.Sprintf("nodes=%d", size), func(t *testing.T) {
			groups := size + 1 // a data group per node, and group 0
			var extra []string
			racks := map[int]string{}
			if size == 9 {
				// Racks alternate with the ids, so consecutive nodes are in
				// different racks and the test's placement is the rack-aware
				// one.
				var spec []string
				for id := 1; id <= size; id++ {
					racks[id] = string(rune('a' + (id-1)%3))
					spec = append(spec, fmt.Sprintf("%d=rack-%s", id, racks[id]))
				}
				extra = []string{"--racks", strings.Join(spec, ",")}
			}
			s := startScaleOut(t, size, groups, 3, extra...)
			s.waitPlaced(t, func(g uint32) int { return s.replicas(g)[0] })

			first := map[string]pushAnswer{}
			var queues, topics []string
			for g := uint32(1); g < uint32(groups); g++ {
				q := s.nameIn(t, "five-nine-q", g)
				queues = append(queues, q)
				first[q] = s.outsider(g).push(pushItem{Queue: q, TransactionID: "tx-" + q, Payload: g})[0]
				requireStatus(t, first[q], "queued", 0)
				topics = append(topics, s.nameIn(t, "five-nine-t", g))
			}
			cl := kafkaClient(t, []string{s.nodes[size-1].kafkaAddr}, kgoLogger(t, "producer"))
			for _, topic := range topics {
				createTopic(t, cl, topic, 1, nil)
			}
			for _, n := range s.nodes {
				s.requireMetadata(t, n, topics, func(g uint32) int { return s.replicas(g)[0] })
			}
			if size == 9 {
				s.requireRacks(t, racks)
			}
			produce := func(cl *kgo.Client, tag string) {
				var recs []*kgo.Record
				for _, topic := range topics {
					for i := range 20 {
						recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s/%d", tag, i)})
					}
				}
				produceSync(t, cl, recs...)
			}
			produce(cl, "before")

			dead := s.nodes[2]
			dead.kill9()
			s.waitPlaced(t, func(g uint32) int { return 0 })
			var survivors []string
			for _, n := range s.live() {
				survivors = append(survivors, n.kafkaAddr)
			}
			produce(kafkaClient(t, survivors[:1], kgoLogger(t, "after-kill")), "after")
			for _, q := range queues {
				g := s.groupOf(q)
				again := s.outsider(g).push(pushItem{Queue: q, TransactionID: "tx-" + q, Payload: g})[0]
				if again.Status != "duplicate" || *again.MessageID != *first[q].MessageID {
					t.Fatalf("retry of %s after node %d's kill: %+v, want duplicate of %+v", q, dead.id, again, first[q])
				}
			}

			// The dead node is decommissioned: its groups get a new replica
			// each, which catches up from the live ones.
			var plan struct {
				Groups []groupReplicas `json:"groups"`
			}
			if status := postJSON(t, s.nodes[0].url("/api/v1/cluster/decommission"), map[string]any{"node": dead.id}, &plan); status != http.StatusOK || len(plan.Groups) != 3 {
				t.Fatalf("decommission of dead node %d: status %d, %+v (it replicates 3 groups)", dead.id, status, plan)
			}
			for _, g := range plan.Groups {
				s.waitMoved(t, g.Group, g.Replicas)
			}
			produce(kafkaClient(t, survivors[1:2], kgoLogger(t, "after-move")), "moved")
			for _, topic := range topics {
				got := consumeN(t, survivors, topic, 60)
				seen := map[string]bool{}
				for _, r := range got {
					if seen[string(r.Value)] {
						t.Fatalf("%s holds %s twice", topic, r.Value)
					}
					seen[string(r.Value)] = true
				}
				if !seen["before/19"] || !seen["after/19"] || !seen["moved/19"] {
					t.Fatalf("%s lost an acknowledged record: %v", topic, seen)
				}
			}
		})
	}
}

// requireRacks checks that Metadata reports each broker's rack, and that
// every data group's replicas are in different racks.
func (s *scaleOut) requireRacks(t *testing.T, racks map[int]string) {
	t.Helper()
	cl := kafkaClient(t, []string{s.nodes[0].kafkaAddr})
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range resp.Brokers {
		if b.Rack == nil || *b.Rack != "rack-"+racks[int(b.NodeID)] {
			t.Fatalf("broker %d reports rack %v, want rack-%s", b.NodeID, b.Rack, racks[int(b.NodeID)])
		}
	}
	for g := uint32(1); g < uint32(s.groups); g++ {
		seen := map[string]bool{}
		for _, id := range s.replicas(g) {
			seen[racks[id]] = true
		}
		if len(seen) != 3 {
			t.Fatalf("group %d's replicas %v are in %d racks", g, s.replicas(g), len(seen))
		}
	}
}
