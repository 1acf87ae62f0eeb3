package node

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/raftnode"
)

type registration struct {
	ID        string `json:"id"`
	HTTPAddr  string `json:"httpAddr"`
	KafkaAddr string `json:"kafkaAddr"`
	// LogFormat is sent only once the cluster is at format 2: leaders
	// older than that refuse the field.
	LogFormat command.LogFormat `json:"logFormat,omitempty"`
}

// registerSelf records this node's advertised addresses in the replicated
// state through its own HTTP API, which forwards to the leader like any
// write. Before a leader exists (or, for a joining node, before it is
// added) the answer is 503 and it tries again. Once registered it checks
// now and then that the registry still holds its addresses (a node removed
// and added back loses them) and registers again if not; once the cluster
// is at log format 2 it registers again with the format it reads. When this node
// wins an election (won receives) it checks at once: followers cannot
// forward writes to it before its address is registered.
func registerSelf(ctx context.Context, base string, client *http.Client, self registration, won <-chan struct{}, log *slog.Logger) {
	wait := 250 * time.Millisecond
	formatSent := false // registered with the log format this binary reads
	for {
		ok, clusterFormat := registered(ctx, client, base, self)
		withFormat := clusterFormat >= command.LogFormat2
		if !ok || withFormat && !formatSent {
			reg := self
			if withFormat {
				reg.LogFormat = command.MaxLogFormat
			}
			body, _ := json.Marshal(reg)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/cluster/register", bytes.NewReader(body))
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					formatSent = withFormat
					log.Info("registered advertised addresses", "http", self.HTTPAddr, "kafka", self.KafkaAddr, "logFormat", reg.LogFormat)
				}
			}
			wait = 250 * time.Millisecond
		} else {
			wait = 5 * time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-won:
		case <-time.After(wait):
		}
	}
}

// wonElection returns a channel that receives each time this node becomes
// the raft leader (a missed wake-up is harmless: registerSelf polls too).
func wonElection(ctx context.Context, wg *sync.WaitGroup, node *raftnode.Node, id string) <-chan struct{} {
	won := make(chan struct{}, 1)
	onLeaderChange(ctx, wg, node, func(l raft.LeaderObservation) {
		if string(l.LeaderID) != id {
			return
		}
		select {
		case won <- struct{}{}:
		default:
		}
	})
	return won
}

// onLeaderChange calls fn, from a goroutine of its own (which wg counts),
// for each leader change raft reports, until ctx ends.
func onLeaderChange(ctx context.Context, wg *sync.WaitGroup, node *raftnode.Node, fn func(raft.LeaderObservation)) {
	obs := make(chan raft.Observation, 16)
	observer := raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	node.Raft.RegisterObserver(observer)
	wg.Go(func() {
		defer node.Raft.DeregisterObserver(observer)
		for {
			select {
			case <-ctx.Done():
				return
			case o := <-obs:
				fn(o.Data.(raft.LeaderObservation))
			}
		}
	})
}

// registered reports whether this node's view of the cluster lists self
// with the addresses it advertises, and the cluster's log format.
func registered(ctx context.Context, client *http.Client, base string, self registration) (bool, command.LogFormat) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/cluster", nil)
	resp, err := client.Do(req)
	if err != nil {
		return false, 0
	}
	defer resp.Body.Close()
	var cl struct {
		LogFormat command.LogFormat `json:"logFormat"`
		Members   []struct {
			ID        json.Number `json:"id"`
			HTTPAddr  string      `json:"httpAddr"`
			KafkaAddr string      `json:"kafkaAddr"`
		} `json:"members"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&cl) != nil {
		return false, 0
	}
	for _, m := range cl.Members {
		if m.ID.String() != self.ID {
			continue
		}
		return m.HTTPAddr == self.HTTPAddr && m.KafkaAddr == self.KafkaAddr, cl.LogFormat
	}
	return false, cl.LogFormat
}
