package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/kafka"
	"github.com/waggle-mq/waggle/node"
	"github.com/waggle-mq/waggle/raftgroups"
	"github.com/waggle-mq/waggle/raftnode"
	"github.com/waggle-mq/waggle/tlsconf"
)

type serveOptions struct {
	dataDir          string
	nodeID           uint32
	httpAddr         string
	kafkaAddr        string
	raftAddr         string
	advertiseRaft    string
	peers            string
	join             bool
	replaceDeadAfter time.Duration
	snapshotSendMiB  int
	logLevel         string
	logFormat        string
	pprofAddr        string

	advertiseHTTP  string
	advertiseKafka string

	snapshotThreshold uint64
	trailingLogs      uint64
	logHoldMiB        int64
	dataGroups        int    // raft groups, the metadata group included
	replicationFactor int    // replicas per data group; 0: every node
	racks             string // "1=a,2=b": the nodes' racks
	minFreeDiskMiB    uint64
	storageMinFreeMiB uint64
	replicaWatch      time.Duration
	kafkaRetention    time.Duration
	memoryLimitMiB    int64

	tls tlsconf.Files

	authOn             bool
	bootstrapTokenFile string
	jwtHS256KeyFile    string
	jwtPublicKeyFile   string
	jwtAudience        string
	insecure           bool

	kafka kafka.Config
}

func newServeCmd() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a waggle node (a single-node cluster unless --peers is given)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd.Flags()); err != nil {
				return err
			}
			return serve(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dataDir, "data-dir", "./waggle-data", "directory for the store and the raft log")
	f.Uint32Var(&o.nodeID, "node-id", 1, "this node's id in the cluster (a positive number)")
	f.StringVar(&o.httpAddr, "http-addr", "127.0.0.1:6632", "listen address of the HTTP API")
	f.StringVar(&o.kafkaAddr, "kafka-addr", "127.0.0.1:9092", "listen address of the Kafka protocol")
	f.StringVar(&o.raftAddr, "raft-addr", "127.0.0.1:7400", "listen address of raft")
	f.StringVar(&o.advertiseRaft, "advertise-raft", "", "raft address peers dial (default: --raft-addr)")
	f.StringVar(&o.peers, "peers", "", `static cluster, "1=host:port,2=host:port,3=host:port" (raft addresses); empty: a single node`)
	f.BoolVar(&o.join, "join", false, "start empty and wait to be added to a running cluster (POST /api/v1/cluster/nodes)")
	f.StringVar(&o.advertiseHTTP, "advertise-http", "", "HTTP address other nodes and clients use for this node (default: --http-addr)")
	f.StringVar(&o.advertiseKafka, "advertise-kafka", "", "Kafka address clients use for this node (default: --kafka-addr)")
	f.IntVar(&o.dataGroups, "data-groups", 1, "raft groups in the cluster, the metadata group included, each with its own leader; queues and topics are placed on them by name (every node the same; fixed when the data directory is created)")
	f.IntVar(&o.replicationFactor, "replication-factor", 0, "nodes that replicate each data group, from 1 to 5, so a cluster of more nodes stores each record on that many only (needs --peers and --data-groups 2 or more; fixed when the data directory is created); 0: every node replicates every group")
	f.StringVar(&o.racks, "racks", "", `the nodes' racks, "1=rack-a,2=rack-b,3=rack-c" (every node the same; Kafka's broker.rack): a data group's replicas go to different racks (with --replication-factor)`)
	f.Uint64Var(&o.snapshotThreshold, "raft-snapshot-threshold", 0, "log entries between snapshots (0: the built-in default)")
	f.Uint64Var(&o.trailingLogs, "raft-trailing-logs", 0, "log entries kept behind a snapshot (0: the built-in default)")
	f.Int64Var(&o.logHoldMiB, "raft-log-hold-mib", 0, "how much the raft log may hold beyond twice the Kafka batches it keeps before old batches are copied out (0: 1024)")
	f.Uint64Var(&o.minFreeDiskMiB, "min-free-disk-mib", 64, "stop (and refuse to start) when the data directory's disk has less free space (0: never)")
	f.IntVar(&o.snapshotSendMiB, "snapshot-send-mib", 100, "pace of the raft snapshots this node sends a peer that catches up (a replica added by a move, a follower far behind), in MiB a second across its groups: they take at most that much of the disk and network from the writes (0: as fast as they go)")
	f.DurationVar(&o.replaceDeadAfter, "replace-dead-after", 0, "with --replication-factor: how long a node may stay unreachable before its data groups' replicas move to the live nodes (0: never; move them with `waggle cluster decommission`)")
	f.DurationVar(&o.replicaWatch, "replica-watch-interval", node.DefaultReplicaWatch, "how often the leader compares the members' state digests, logging an error and setting waggle_replicas_diverged when two differ (0: never)")
	f.Uint64Var(&o.storageMinFreeMiB, "storage-min-free-mib", 1024, "refuse writes that add data (HTTP 507 storage_full, Kafka KAFKA_STORAGE_ERROR) while the data directory's disk has less free space; reads, acks, deletes and retention go on (0: never)")
	f.StringVar(&o.tls.Cert, "tls-cert", "", "PEM certificate of this node: TLS on the HTTP, Kafka and raft listeners")
	f.StringVar(&o.tls.Key, "tls-key", "", "PEM key of --tls-cert")
	f.StringVar(&o.tls.CA, "tls-ca", "", "PEM CA that signed every node's certificate (raft is mutual TLS)")
	f.BoolVar(&o.authOn, "auth", false, "require authentication: HTTP bearer tokens or JWTs, Kafka SASL (SCRAM-SHA-256/512, PLAIN)")
	f.StringVar(&o.bootstrapTokenFile, "bootstrap-token-file", "", "file holding an admin bearer token (to create the first users and tokens; give every node the same)")
	f.StringVar(&o.jwtHS256KeyFile, "jwt-hs256-key-file", "", "accept HS256 JWTs signed with the secret in this file")
	f.StringVar(&o.jwtPublicKeyFile, "jwt-public-key-file", "", "accept RS256 or EdDSA JWTs signed by the PEM public key in this file")
	f.StringVar(&o.jwtAudience, "jwt-audience", "", "the aud claim a JWT must carry (empty: not checked)")
	f.BoolVar(&o.insecure, "insecure", false, "allow a non-loopback listener without auth or TLS, and SASL PLAIN without TLS")
	o.kafka = defaultKafkaConfig()
	f.Int32Var(&o.kafka.MaxFrameBytes, "kafka-max-frame-bytes", o.kafka.MaxFrameBytes, "largest Kafka request accepted; a larger one closes the connection")
	f.BoolVar(&o.kafka.AutoCreateTopics, "kafka-auto-create-topics", o.kafka.AutoCreateTopics, "create unknown topics on Metadata and Produce")
	f.Int32Var(&o.kafka.DefaultPartitions, "kafka-default-partitions", o.kafka.DefaultPartitions, "partitions of an auto-created topic")
	f.DurationVar(&o.kafka.ConsumerGroups.SessionTimeout, "kafka-consumer-session-timeout", o.kafka.ConsumerGroups.SessionTimeout, "KIP-848 consumer groups: a member not heard from for this long is removed (Kafka's group.consumer.session.timeout.ms)")
	f.DurationVar(&o.kafka.ConsumerGroups.HeartbeatInterval, "kafka-consumer-heartbeat-interval", o.kafka.ConsumerGroups.HeartbeatInterval, "KIP-848 consumer groups: how often members are told to heartbeat (group.consumer.heartbeat.interval.ms)")
	f.DurationVar(&o.kafka.ConsumerGroups.FailoverGrace, "kafka-consumer-failover-grace", 0, "after a leader change, how long groups re-formed on the new leader get no partitions (KIP-848) or wait for their first generation (classic), so members of the old leader's generation have stopped (0: the heartbeat interval plus 15 s, at most the session timeout)")
	f.Int64Var(&o.memoryLimitMiB, "memory-limit-mib", 448, "soft limit of the Go heap for a node of one raft group, 48 MiB more for each further group it runs: the garbage collector works harder near it (0: none; GOMEMLIMIT wins)")
	f.DurationVar(&o.kafkaRetention, "kafka-retention", command.DefaultKafkaRetentionMs*time.Millisecond, "how long topics created over Kafka without retention.ms keep records (0: for ever)")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.logFormat, "log-format", "text", "text or json")
	f.StringVar(&o.pprofAddr, "pprof-addr", "", "serve Go's /debug/pprof on this address (empty: off)")
	return cmd
}

// serve checks the flags, turns them into a node.Config and runs the node
// until ctx ends (a signal) or it stops by itself.
func serve(ctx context.Context, o serveOptions) error {
	if o.nodeID == 0 {
		return errors.New("--node-id must be a positive number")
	}
	if cg := o.kafka.ConsumerGroups; cg.HeartbeatInterval <= 0 || cg.SessionTimeout <= cg.HeartbeatInterval {
		return errors.New("--kafka-consumer-heartbeat-interval must be positive and below --kafka-consumer-session-timeout")
	}
	if o.kafka.ConsumerGroups.FailoverGrace < 0 {
		return errors.New("--kafka-consumer-failover-grace must not be negative")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	var handler slog.Handler
	switch o.logFormat {
	case "text":
		handler = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	case "json":
		handler = slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	default:
		return fmt.Errorf("--log-format must be text or json, not %q", o.logFormat)
	}
	peers, err := raftnode.ParsePeers(o.peers)
	if err != nil {
		return fmt.Errorf("--peers: %w", err)
	}
	racks, err := parseRacks(o.racks)
	if err != nil {
		return fmt.Errorf("--racks: %w", err)
	}
	if o.memoryLimitMiB > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit(o, peers, racks))
	}
	// Settings are checked before the data directory is: a wrong flag
	// should not wait for the start-up check.
	var tlsConf *tlsconf.Config
	if o.tls.Enabled() {
		if tlsConf, err = tlsconf.Load(o.tls); err != nil {
			return err
		}
	}
	if err := checkExposure(o, tlsConf != nil); err != nil {
		return err
	}
	authConf, err := loadAuth(o)
	if err != nil {
		return err
	}
	return node.Run(ctx, node.Config{
		DataDir:  o.dataDir,
		NodeID:   o.nodeID,
		HTTPAddr: o.httpAddr, KafkaAddr: o.kafkaAddr, RaftAddr: o.raftAddr,
		AdvertiseRaft: o.advertiseRaft, AdvertiseHTTP: o.advertiseHTTP, AdvertiseKafka: o.advertiseKafka,
		Peers:             peers,
		Join:              o.join,
		DataGroups:        o.dataGroups,
		ReplicationFactor: o.replicationFactor,
		Racks:             racks,
		SnapshotThreshold: o.snapshotThreshold, TrailingLogs: o.trailingLogs, LogHoldMiB: o.logHoldMiB,
		SnapshotSendMiB: o.snapshotSendMiB,
		MinFreeDiskMiB:  o.minFreeDiskMiB, StorageMinFreeMiB: o.storageMinFreeMiB, ReplicaWatch: o.replicaWatch,
		ReplaceDeadAfter: o.replaceDeadAfter,
		KafkaRetention:   o.kafkaRetention,
		TLS:              tlsConf,
		Auth:             authConf,
		Insecure:         o.insecure,
		Kafka:            o.kafka,
		PprofAddr:        o.pprofAddr,
		Version:          version,
		Logger:           slog.New(handler),
		VerifyDataDir:    verifyDataDir,
		WallClock:        faultyWallClock(),
	})
}

// memoryPerGroupMiB is what each raft group past the first adds to the
// Go heap's soft limit: its store's badger memtable (32 MiB) and caches.
// Without it a node of 13 groups sat at the limit while idle, and spent
// two thirds of a core collecting garbage.
const memoryPerGroupMiB = 48

// memoryLimit is the Go heap's soft limit in bytes: --memory-limit-mib for
// a node of one raft group, and memoryPerGroupMiB more for each further
// group it runs.
func memoryLimit(o serveOptions, peers []raftnode.Peer, racks map[string]string) int64 {
	ids := make([]string, len(peers))
	for i, p := range peers {
		ids[i] = p.ID
	}
	placement, err := raftgroups.NewPlacement(o.replicationFactor, ids, racks)
	if err != nil {
		placement = raftgroups.Placement{} // the node refuses the factor once it starts
	}
	groups := placement.GroupsOn(strconv.FormatUint(uint64(o.nodeID), 10), max(o.dataGroups, 1))
	return (o.memoryLimitMiB + int64(groups-1)*memoryPerGroupMiB) << 20
}

// parseRacks reads "1=rack-a,2=rack-b"; "" is no racks.
func parseRacks(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		id, rack, ok := strings.Cut(kv, "=")
		if n, err := strconv.ParseUint(id, 10, 32); !ok || err != nil || n == 0 || rack == "" {
			return nil, fmt.Errorf("%q: want node-id=rack", kv)
		}
		if _, dup := out[id]; dup {
			return nil, fmt.Errorf("node %s has two racks", id)
		}
		out[id] = rack
	}
	return out, nil
}

func defaultKafkaConfig() kafka.Config { return kafka.DefaultConfig() }
