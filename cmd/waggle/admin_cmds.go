package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/waggle-mq/waggle/client"
)

// errOnceLost ends `kv once` when the marker is already held: exit status
// exitOnceLost, so a script tells "someone else did it" from a failure (1).
var errOnceLost = errors.New("lost: the once marker is already held")

func newKVCmd(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "kv", Short: "Read and write the replicated KV store"}
	path := func(ns, key string) string { return "/api/v1/kv/" + url.PathEscape(ns) + "/" + url.PathEscape(key) }
	type row struct {
		Found   *bool           `json:"found,omitempty"`
		Applied *bool           `json:"applied,omitempty"`
		Value   json.RawMessage `json:"value"`
		Version int64           `json:"version"`
		Reason  string          `json:"reason,omitempty"`
	}
	show := func(c *cobra.Command, r row) error {
		return o.print(c, r, func(t *tableWriter) {
			t.row("VERSION", "VALUE")
			t.row(r.Version, string(r.Value))
		})
	}
	var ttl int64
	var forever bool
	lifetime := func(body map[string]any) (map[string]any, error) {
		if forever == (ttl > 0) {
			return nil, errors.New("give --ttl SECONDS or --forever")
		}
		if forever {
			body["forever"] = true
		} else {
			body["ttlSeconds"] = ttl
		}
		return body, nil
	}
	get := &cobra.Command{Use: "get NS KEY", Short: "Read a key", Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			var r row
			if _, err := o.client().Call(http.MethodGet, path(args[0], args[1]), nil, &r); err != nil {
				return err
			}
			return show(c, r)
		}}
	put := &cobra.Command{Use: "put NS KEY VALUE", Short: "Write a key (VALUE is JSON, or else a string)", Args: cobra.ExactArgs(3),
		RunE: func(c *cobra.Command, args []string) error {
			body, err := lifetime(map[string]any{"value": asPayload(args[2])})
			if err != nil {
				return err
			}
			var r row
			if _, err := o.client().CallKeyed(http.MethodPut, path(args[0], args[1]), body, &r); err != nil {
				return err
			}
			return show(c, r)
		}}
	del := &cobra.Command{Use: "delete NS KEY", Short: "Delete a key", Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			var r row
			if _, err := o.client().CallKeyed(http.MethodDelete, path(args[0], args[1]), nil, &r); err != nil {
				return err
			}
			if r.Applied == nil || !*r.Applied {
				return fmt.Errorf("not deleted: %s", r.Reason)
			}
			fmt.Fprintln(c.OutOrStdout(), "deleted")
			return nil
		}}
	once := &cobra.Command{Use: "once NS KEY", Short: "Claim a once marker: prints won or lost; exit status 0 won, 3 lost",
		Example: `  if waggle kv once jobs nightly-report --ttl 86400; then run-report; fi`,
		Args:    cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			body, err := lifetime(map[string]any{"ns": args[0], "key": args[1]})
			if err != nil {
				return err
			}
			var r struct {
				Won bool `json:"won"`
			}
			if _, err := o.client().CallKeyed(http.MethodPost, "/api/v1/kv/once", body, &r); err != nil {
				return err
			}
			if err := o.print(c, r, func(t *tableWriter) {
				if r.Won {
					t.row("won")
				} else {
					t.row("lost")
				}
			}); err != nil || r.Won {
				return err
			}
			return errOnceLost
		}}
	for _, w := range []*cobra.Command{put, once} {
		w.Flags().Int64Var(&ttl, "ttl", 0, "lifetime in seconds")
		w.Flags().BoolVar(&forever, "forever", false, "never expires")
	}
	cmd.AddCommand(get, put, del, once)
	return cmd
}

// showKafkaMembers prints a group's Kafka state and members under its
// cursors.
func showKafkaMembers(c *cobra.Command, g client.ConsumerGroup) error {
	k := g.Kafka
	fmt.Fprintf(c.OutOrStdout(), "\nKafka %s group: %s, protocol %s, generation %d, %d members\n", k.Type, k.State, k.Protocol, k.Generation, len(k.Members))
	t := newTable(c.OutOrStdout())
	t.row("MEMBER", "INSTANCE", "CLIENT", "HOST", "ASSIGNMENT")
	for _, m := range k.Members {
		var parts []string
		for _, a := range m.Assignment {
			parts = append(parts, fmt.Sprintf("%s%v", a.Topic, a.Partitions))
		}
		t.row(m.MemberID, cmp.Or(m.InstanceID, "-"), m.ClientID, m.ClientHost, cmp.Or(strings.Join(parts, " "), "-"))
	}
	return t.flush()
}

func newGroupCmd(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "group", Short: "Consumer groups (Kafka and HTTP share them)"}
	show := func(c *cobra.Command, gs []client.ConsumerGroup) error {
		return o.print(c, gs, func(t *tableWriter) {
			// A partition the group has not read yet shows "-" as its
			// offset; its lag counts from the partition's start.
			t.row("GROUP", "QUEUE", "PARTITION", "OFFSET", "HIGH WATERMARK", "LAG", "IN FLIGHT")
			for _, g := range gs {
				for _, cur := range g.Cursors {
					offset := strconv.FormatInt(cur.Offset, 10)
					if !cur.Positioned {
						offset = "-"
					}
					t.row(g.Name, cur.Queue, cur.Partition, offset, cur.HighWatermark, cur.Lag, cur.InFlight)
				}
			}
		})
	}
	list := &cobra.Command{Use: "list", Short: "List groups with their positions", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var out struct{ Groups []client.ConsumerGroup }
			if _, err := o.client().Call(http.MethodGet, "/api/v1/consumer-groups", nil, &out); err != nil {
				return err
			}
			return show(c, out.Groups)
		}}
	describe := &cobra.Command{Use: "describe GROUP", Short: "A group's cursor and lag per partition", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var g client.ConsumerGroup
			if _, err := o.client().Call(http.MethodGet, "/api/v1/consumer-groups/"+url.PathEscape(args[0]), nil, &g); err != nil {
				return err
			}
			if err := show(c, []client.ConsumerGroup{g}); err != nil || g.Kafka == nil || o.output == "json" {
				return err
			}
			return showKafkaMembers(c, g)
		}}
	var toEnd bool
	var offset, timestamp int64
	seek := &cobra.Command{Use: "seek GROUP QUEUE", Short: "Move a group's cursors on a queue", Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			body := map[string]any{}
			if toEnd {
				body["toEnd"] = true
			}
			if c.Flags().Changed("offset") {
				body["offset"] = offset
			}
			if c.Flags().Changed("timestamp") {
				body["timestamp"] = timestamp
			}
			var g client.ConsumerGroup
			if _, err := o.client().Call(http.MethodPost, "/api/v1/consumer-groups/"+url.PathEscape(args[0])+"/queues/"+url.PathEscape(args[1])+"/seek", body, &g); err != nil {
				return err
			}
			return show(c, []client.ConsumerGroup{g})
		}}
	seek.Flags().BoolVar(&toEnd, "to-end", false, "skip everything stored now")
	seek.Flags().Int64Var(&offset, "offset", 0, "move to this offset on every partition")
	seek.Flags().Int64Var(&timestamp, "timestamp", 0, "move to the first message at or after this time (Unix ms)")
	del := &cobra.Command{Use: "delete GROUP", Short: "Forget a group", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if _, err := o.client().Call(http.MethodDelete, "/api/v1/consumer-groups/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "deleted %s\n", args[0])
			return nil
		}}
	cmd.AddCommand(list, describe, seek, del)
	return cmd
}

// showRaftGroups prints, when the cluster runs more than one raft group,
// each group's leader and every reachable member's role in it.
func showRaftGroups(c *cobra.Command, cl client.Cluster) {
	type row struct {
		leader, chosen, replicas string
		roles                    []string
	}
	var groups []row
	for _, m := range cl.Members {
		for _, g := range m.Groups {
			for len(groups) <= g.ID {
				groups = append(groups, row{leader: "-", chosen: "-", replicas: "-"})
			}
			if g.PreferredLeader != nil {
				groups[g.ID].chosen = strconv.Itoa(*g.PreferredLeader)
			}
			groups[g.ID].roles = append(groups[g.ID].roles, fmt.Sprintf("%d:%s", m.ID, g.Role))
			if g.Role == "leader" {
				groups[g.ID].leader = strconv.Itoa(m.ID)
				if g.Moving {
					groups[g.ID].leader += " (moving)"
				}
			}
			if len(g.Replicas) > 0 {
				groups[g.ID].replicas = joinInts(g.Replicas)
			}
		}
	}
	if len(groups) == 0 {
		return
	}
	fmt.Fprintln(c.OutOrStdout())
	t := newTable(c.OutOrStdout())
	t.row("GROUP", "LEADER", "CHOSEN LEADER", "REPLICAS", "MEMBERS")
	for id, g := range groups {
		t.row(id, g.leader, g.chosen, g.replicas, strings.Join(g.roles, " "))
	}
	t.flush()
}

// showReplicas says, per raft group, whether the members that answered
// hold the same state.
func showReplicas(c *cobra.Command, cl client.Cluster) {
	for _, r := range cl.Replicas {
		at := "-"
		if r.Index != nil {
			at = strconv.FormatInt(*r.Index, 10)
		}
		nodes := make([]string, len(r.Members))
		for i, m := range r.Members {
			nodes[i] = strconv.Itoa(m)
		}
		switch r.State {
		case "same":
			fmt.Fprintf(c.OutOrStdout(), "replicas of raft group %d: the same state at index %s (nodes %s)\n", r.Group, at, strings.Join(nodes, ", "))
		case "diverged":
			fmt.Fprintf(c.OutOrStdout(), "replicas of raft group %d: DIVERGED at index %s: nodes %s hold different states (a bug: please report it)\n", r.Group, at, strings.Join(nodes, " and "))
		default:
			fmt.Fprintf(c.OutOrStdout(), "replicas of raft group %d: not compared yet (fewer than two members answered, or no index all of them report)\n", r.Group)
		}
	}
}

func newClusterCmd(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Cluster members and membership"}
	show := func(c *cobra.Command, cl client.Cluster) error {
		return o.print(c, cl, func(t *tableWriter) {
			// Raised by the leader once every member reads the next format
			// (READS FORMAT); printed ahead of the table.
			if cl.NotAMember != "" {
				fmt.Fprintln(c.OutOrStdout(), cl.NotAMember)
			}
			fmt.Fprintf(c.OutOrStdout(), "raft log format written: %d\n", max(cl.LogFormat, 1)) // 0: a node older than formats
			t.row("NODE", "STATE", "ROLE", "VOTER", "TERM", "APPLIED", "LAG", "VERSION", "UPTIME", "DISK", "MEM", "CLOCK", "HTTP", "KAFKA", "RAFT", "READS FORMAT")
			var unreachable []string
			for _, m := range cl.Members {
				state, uptime := cmp.Or(m.State, "-"), "-"
				if m.UptimeSeconds != nil {
					uptime = (time.Duration(*m.UptimeSeconds) * time.Second).String()
				}
				if m.Error != "" {
					unreachable = append(unreachable, fmt.Sprintf("node %d: %s", m.ID, m.Error))
				}
				voter := "no"
				switch {
				case m.Voter && m.VotesWithheld:
					voter = "withheld" // a voter that grants no vote until it has caught up
				case m.Voter:
					voter = "yes"
				}
				t.row(m.ID, state, cmp.Or(m.Role, "-"), voter, orDash(m.Term), orDash(m.Applied), orDash(m.Lag), cmp.Or(m.Version, "-"), uptime,
					diskShare(m.DiskUsedBytes, m.DiskTotalBytes), bytesOrDash(m.MemoryBytes), clockOffset(m.ClockOffsetMs), m.HTTPAddr, m.KafkaAddr, m.RaftAddr, orDash(m.LogFormat))
			}
			// Below the members table: which members could not be asked,
			// then the raft groups.
			t.flush()
			for _, u := range unreachable {
				fmt.Fprintln(c.OutOrStdout(), "unreachable:", u)
			}
			showReplicas(c, cl)
			showRaftGroups(c, cl)
		})
	}
	status := &cobra.Command{Use: "status", Short: "Members, leader, applied indexes and raft log formats",
		Long: "Members, leader, applied indexes and raft log formats, as the node --server names sees them, and whether\n" +
			"the members hold the same state (their state digests compared at an index all of them report).\n" +
			"Exits 4 when that node knows no leader (the cluster has lost its quorum, or the node is cut off or not a member),\n" +
			"5 when two members hold different states.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var cl client.Cluster
			if _, err := o.client().Call(http.MethodGet, "/api/v1/cluster", nil, &cl); err != nil {
				return err
			}
			if err := show(c, cl); err != nil {
				return err
			}
			if cl.Leader == nil {
				return errNoLeader
			}
			if slices.ContainsFunc(cl.Replicas, func(r client.ReplicaComparison) bool { return r.State == "diverged" }) {
				return errReplicasDiverged
			}
			return nil
		}}
	add := &cobra.Command{Use: "add ID RAFT_ADDR", Short: "Add a voter (start it with --join first)", Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			var cl client.Cluster
			if _, err := o.client().Call(http.MethodPost, "/api/v1/cluster/nodes", map[string]string{"id": args[0], "raftAddr": args[1]}, &cl); err != nil {
				return err
			}
			return show(c, cl)
		}}
	remove := &cobra.Command{Use: "remove ID", Short: "Remove a member", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var cl client.Cluster
			if _, err := o.client().Call(http.MethodDelete, "/api/v1/cluster/nodes/"+url.PathEscape(args[0]), nil, &cl); err != nil {
				return err
			}
			return show(c, cl)
		}}
	var clear bool
	lead := &cobra.Command{Use: "lead GROUP [NODE]", Short: "Choose the node that leads a raft group (--clear: back to the default)",
		Long: "Choose the voter that leads raft group GROUP (clusters with --data-groups): the group's leader hands leadership\n" +
			"over within seconds, whenever the node can lead. --clear forgets the choice.",
		Example: "  waggle cluster lead 1 3        # raft group 1 led by node 3\n  waggle cluster lead 1 --clear  # back to the default spread",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			path := "/api/v1/cluster/groups/" + url.PathEscape(args[0]) + "/leader"
			var out struct {
				Group           int     `json:"group"`
				PreferredLeader *string `json:"preferredLeader"`
			}
			var err error
			switch {
			case clear && len(args) == 1:
				_, err = o.client().Call(http.MethodDelete, path, nil, &out)
			case !clear && len(args) == 2:
				_, err = o.client().Call(http.MethodPut, path, map[string]string{"node": args[1]}, &out)
			default:
				return errors.New("give GROUP NODE, or GROUP --clear")
			}
			if err != nil {
				return err
			}
			return o.print(c, out, func(*tableWriter) {
				if out.PreferredLeader == nil {
					fmt.Fprintf(c.OutOrStdout(), "raft group %d: no chosen leader (the voter its id picks leads it)\n", out.Group)
					return
				}
				fmt.Fprintf(c.OutOrStdout(), "raft group %d: node %s leads it once it takes over\n", out.Group, *out.PreferredLeader)
			})
		}}
	lead.Flags().BoolVar(&clear, "clear", false, "forget the chosen leader")
	cmd.AddCommand(status, add, remove, lead, newClusterCheckCmd(o))
	cmd.AddCommand(newReplicaCmds(o)...)
	return cmd
}

// newReplicaCmds are the replica moves of a cluster with a replication
// factor: groups, move, decommission.
func newReplicaCmds(o *clientOptions) []*cobra.Command {
	show := func(c *cobra.Command, groups []client.GroupReplicas, v any) error {
		return o.print(c, v, func(t *tableWriter) {
			t.row("GROUP", "REPLICAS", "LEADER", "MEMBERS", "MOVING")
			for _, g := range groups {
				leader := "-"
				if g.Leader != nil {
					leader = strconv.Itoa(*g.Leader)
				}
				t.row(g.Group, joinInts(g.Replicas), leader, joinInts(g.Members), map[bool]string{true: "yes", false: "no"}[g.Moving])
			}
		})
	}
	groups := &cobra.Command{Use: "groups", Short: "Each data group's replicas, leader and members, and whether it is moving",
		Example: "  waggle cluster groups          # MOVING no everywhere: every move is done",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var out struct {
				Groups []client.GroupReplicas `json:"groups"`
			}
			if _, err := o.client().Call(http.MethodGet, "/api/v1/cluster/groups", nil, &out); err != nil {
				return err
			}
			return show(c, out.Groups, out)
		}}
	move := &cobra.Command{Use: "move GROUP NODE,NODE,…", Short: "Move a data group's replicas to the nodes listed, the preferred leader first",
		Long: "Record where data group GROUP should be replicated. Its leader adds each new node as a non-voter, promotes it\n" +
			"once it has caught up, then removes the nodes left out. The move runs in the background: `waggle cluster groups`\n" +
			"shows it done when MOVING is no.",
		Example: "  waggle cluster move 3 4,2,5   # group 3 onto nodes 4, 2 and 5, led by 4",
		Args:    cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			var nodes []int
			for _, f := range strings.Split(args[1], ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil {
					return fmt.Errorf("node %q: not a node id", f)
				}
				nodes = append(nodes, n)
			}
			var out client.GroupReplicas
			if _, err := o.client().Call(http.MethodPut, "/api/v1/cluster/groups/"+url.PathEscape(args[0])+"/replicas", map[string]any{"replicas": nodes}, &out); err != nil {
				return err
			}
			return show(c, []client.GroupReplicas{out}, out)
		}}
	decommission := &cobra.Command{Use: "decommission NODE", Short: "Move every replica off a node, before removing it",
		Long: "In each data group NODE replicates, replace it by the voter with the fewest replicas that the group lacks. The\n" +
			"moves run in the background; once `waggle cluster groups` lists NODE nowhere, `waggle cluster remove NODE`.",
		Example: "  waggle cluster decommission 3  # then: waggle cluster groups; waggle cluster remove 3",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			node, err := strconv.Atoi(args[0])
			if err != nil {
				return fmt.Errorf("node %q: not a node id", args[0])
			}
			var out struct {
				Node   int                    `json:"node"`
				Groups []client.GroupReplicas `json:"groups"`
			}
			if _, err := o.client().Call(http.MethodPost, "/api/v1/cluster/decommission", map[string]int{"node": node}, &out); err != nil {
				return err
			}
			return show(c, out.Groups, out)
		}}
	rebalance := &cobra.Command{Use: "rebalance", Short: "Even out the replicas the voters hold (a node just added holds none)",
		Long: "While one voter holds two replicas more than another, move one of its replicas there, in the same position. The\n" +
			"moves run in the background: `waggle cluster groups` shows them.",
		Example: "  waggle cluster add 7 10.0.0.7:7400 && waggle cluster rebalance",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var out struct {
				Groups []client.GroupReplicas `json:"groups"`
			}
			if _, err := o.client().Call(http.MethodPost, "/api/v1/cluster/rebalance", map[string]any{}, &out); err != nil {
				return err
			}
			return show(c, out.Groups, out)
		}}
	return []*cobra.Command{groups, move, decommission, rebalance}
}

// joinInts is ids as "4,2,3" ("-" for none).
func joinInts(ids []int) string {
	if len(ids) == 0 {
		return "-"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(id)
	}
	return strings.Join(s, ",")
}

// version is set at build time with -ldflags "-X main.version=...".
// version is set at release builds (-ldflags "-X main.version=v0.2.0");
// other builds name the commit they were built from, when Go recorded it.
var version = func() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) < 12 {
		return "dev"
	}
	if dirty {
		return "dev-" + rev[:12] + "-dirty"
	}
	return "dev-" + rev[:12]
}()

func newVersionCmd() *cobra.Command {
	return &cobra.Command{Use: "version", Short: "Print the version", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintf(c.OutOrStdout(), "waggle %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		}}
}

// orDash prints *v, or "-" when nil.
// diskShare shows disk use as "12.0 GiB/50.0 GiB (24%)", or "-".
func diskShare(used, total *uint64) string {
	if used == nil || total == nil || *total == 0 {
		return "-"
	}
	return fmt.Sprintf("%s/%s (%d%%)", humanBytes(*used), humanBytes(*total), *used*100 / *total)
}

// bytesOrDash shows a byte count in binary units, or "-".
func bytesOrDash(b *uint64) string {
	if b == nil {
		return "-"
	}
	return humanBytes(*b)
}

// humanBytes shows b in the largest binary unit that keeps it at least 1.
func humanBytes(b uint64) string {
	if b < 1024 {
		return fmt.Sprintf("%d B", b)
	}
	v, unit := float64(b)/1024, 0
	for v >= 1024 && unit < 4 {
		v, unit = v/1024, unit+1
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[unit])
}

// clockOffset shows a member's clock offset from the voters' median in
// seconds, signed ("+600.0s"), or "-" when unknown.
func clockOffset(ms *int64) string {
	if ms == nil {
		return "-"
	}
	return fmt.Sprintf("%+.1fs", float64(*ms)/1000)
}

func orDash[T any](v *T) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}
