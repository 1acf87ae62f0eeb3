package node

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/waggle-mq/waggle/broker"
)

// groupCountPoll is how often watchGroupCount asks the other members
// until enough of them answered.
const groupCountPoll = 2 * time.Second

// watchGroupCount checks that the other members of the cluster run as
// many raft groups as this node (count). Nodes running different counts
// place a queue in different groups, so one of them could store a
// retried push a second time. A static peer started without the
// cluster's --data-groups, say, is therefore stopped: once most of
// the other voters have answered (their /health lists their groups) and
// more than half of all the other voters run another count, this node is
// the odd one, and the returned channel receives the error that says so.
// A node that agrees with most of them goes on and logs the odd ones; the
// odd node stops itself. In a cluster of two nothing is stopped, since
// neither side can tell which is wrong. The check ends once decided. (A
// node added with `waggle cluster add` is checked before that, by the
// leader that adds it: httpapi's addNode.) wg counts its goroutine.
func watchGroupCount(ctx context.Context, wg *sync.WaitGroup, svc *broker.Service, client *http.Client, scheme, self string, count int, log *slog.Logger) <-chan error {
	out := make(chan error, 1)
	wg.Go(func() {
		for {
			done, err := compareGroupCounts(ctx, svc, client, scheme, self, count, log)
			if err != nil {
				out <- err
				return
			}
			if done {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(groupCountPoll):
			}
		}
	})
	return out
}

// compareGroupCounts asks each other voter's /health once. done is true
// once more than half of them answered; err is set when more than half of
// them run another count than this node.
func compareGroupCounts(ctx context.Context, svc *broker.Service, client *http.Client, scheme, self string, count int, log *slog.Logger) (done bool, err error) {
	members, err := svc.Members()
	if err != nil || !slices.ContainsFunc(members, func(m broker.Member) bool { return m.ID == self }) {
		return false, nil // not a member yet (a joining node): ask again later
	}
	var others []broker.Member
	for _, m := range members {
		if m.ID != self && m.Voter {
			others = append(others, m)
		}
	}
	if len(others) == 0 {
		return true, nil
	}
	counts := map[string]int{} // node id → its group count
	for _, m := range others {
		if c, ok := groupCountOf(ctx, client, scheme, m); ok {
			counts[m.ID] = c
		}
	}
	done, other, ids := judgeGroupCounts(count, len(others), counts)
	switch {
	case !done:
		return false, nil
	case ids != nil:
		return true, fmt.Errorf("this node runs %d raft groups but nodes %s run %d: every node of a cluster must run the same count (--data-groups), "+
			"or they place queues and topics in different groups. This node's count was fixed when its data directory was made: "+
			"if it was added with `waggle cluster add`, remove it (`waggle cluster remove %s`), then empty its data directory and start it with --data-groups %d",
			count, strings.Join(ids, ", "), other, self, other)
	}
	var odd []string
	for _, id := range slices.Sorted(maps.Keys(counts)) {
		if counts[id] != count {
			odd = append(odd, fmt.Sprintf("node %s runs %d", id, counts[id]))
		}
	}
	if len(odd) > 0 {
		log.Error("raft group counts differ in the cluster: a node whose count differs from most of the others' stops itself", "thisNode", count, "others", strings.Join(odd, "; "))
	} else {
		log.Info("the other members run as many raft groups", "groups", count, "answered", len(counts))
	}
	return true, nil
}

// judgeGroupCounts decides from the group counts of the other voters that
// answered (by node id; there are others in all) whether this node, which
// runs count, is the odd one. done is false until more than half of the
// others answered. When more than half of all the others run one other
// count, ids lists them (sorted) and other is their count; with a single
// other voter nothing is judged odd.
func judgeGroupCounts(count, others int, answered map[string]int) (done bool, other int, ids []string) {
	if 2*len(answered) <= others {
		return false, 0, nil
	}
	by := map[int][]string{}
	for id, c := range answered {
		if c != count {
			by[c] = append(by[c], id)
		}
	}
	for c, nodes := range by {
		if others >= 2 && 2*len(nodes) > others {
			slices.Sort(nodes)
			return true, c, nodes
		}
	}
	return true, 0, nil
}

// groupCountOf is how many raft groups member m runs, from its /health
// (which lists them when there are several). An answer from another node
// than m (a stale address) is no answer.
func groupCountOf(ctx context.Context, client *http.Client, scheme string, m broker.Member) (int, bool) {
	if m.HTTPAddr == "" {
		return 0, false
	}
	h, err := fetchPeerHealth(ctx, client, scheme, m.HTTPAddr)
	if err != nil || h.status != http.StatusOK || h.NodeID.String() != m.ID {
		return 0, false
	}
	if h.GroupCount > 0 {
		return h.GroupCount, true
	}
	return max(len(h.Groups), 1), true
}
