package node

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/command"
)

// peerHealth is what this binary reads of another member's /health.
type peerHealth struct {
	NodeID      json.Number `json:"nodeId"`
	StorageFull *bool       `json:"storageFull"`
	// LogFormat is 0 from binaries older than log formats, which read 1.
	LogFormat command.LogFormat `json:"logFormat"`
	// Groups lists the member's raft groups when it runs several.
	Groups []json.RawMessage `json:"groups"`
	// GroupCount is the cluster's raft group count as the member runs
	// it (0 from binaries that list every group in Groups).
	GroupCount int `json:"groupCount"`
	// Clock is the member's wall clock when it answered (absent from
	// binaries older than the voters' median clock).
	Clock *struct {
		WallMs int64 `json:"wallMs"`
	} `json:"clock"`

	status int // the HTTP status of the answer
}

// fetchPeerHealth asks the member at addr for its /health; ctx ends the
// question (the node shutting down).
func fetchPeerHealth(ctx context.Context, client *http.Client, scheme, addr string) (peerHealth, error) {
	var h peerHealth
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+"/health", nil)
	if err != nil {
		return h, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&h)
	h.LogFormat = max(h.LogFormat, command.LogFormat1)
	h.status = resp.StatusCode
	return h, err
}

// raiseLogFormats runs on every node until ctx ends; while this node leads
// it moves the cluster to the newest log format every member reads,
// checking when it wins an election and every interval after. Each
// member is asked through /health what its running binary reads (a
// registration could be stale: a node may have been started with another
// binary since), so the raise waits for a rolling upgrade to finish and
// never outruns a member that is down or unregistered.
//
// registry is group 0's service, whose replicated state holds the members'
// HTTP addresses; a data group's members are group 0's.
func raiseLogFormats(ctx context.Context, svc, registry *broker.Service, client *http.Client, scheme string, every time.Duration, won <-chan struct{}, log *slog.Logger) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-won: // a new cluster, or a new leader, need not wait a tick
		}
		if !svc.IsLeader() || svc.LogFormat() >= command.MaxLogFormat {
			continue
		}
		members := svc.ConfigurationIndex()
		f, err := formatEveryMemberReads(ctx, registry, client, scheme)
		if err != nil {
			log.Debug("log format stays", "format", svc.LogFormat(), "why", err)
			continue
		}
		// A member added while the others were asked was not asked.
		if f <= svc.LogFormat() || svc.ConfigurationIndex() != members {
			continue
		}
		if err := svc.RaiseLogFormat(f); err != nil {
			log.Warn("raise log format", "to", f, "err", err)
			continue
		}
		log.Info("raised the cluster's log format: every member reads it", "format", f)
	}
}

// formatEveryMemberReads is the newest log format all members of the raft
// configuration (voters and non-voters alike: all apply the log) read.
func formatEveryMemberReads(ctx context.Context, svc *broker.Service, client *http.Client, scheme string) (command.LogFormat, error) {
	members, err := svc.Members()
	if err != nil {
		return 0, err
	}
	f := command.MaxLogFormat
	for _, m := range members {
		if m.ID == svc.NodeID() {
			continue
		}
		if m.HTTPAddr == "" {
			return 0, fmt.Errorf("member %s has not registered its address", m.ID)
		}
		h, err := fetchPeerHealth(ctx, client, scheme, m.HTTPAddr)
		if err != nil {
			return 0, fmt.Errorf("member %s: %w", m.ID, err)
		}
		f = min(f, h.LogFormat)
	}
	return f, nil
}
