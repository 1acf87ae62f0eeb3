package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/spf13/cobra"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/broker/httpapi"
	"github.com/waggle-mq/waggle/command"
	"github.com/waggle-mq/waggle/kafka"
	"github.com/waggle-mq/waggle/metrics"
	"github.com/waggle-mq/waggle/raftgroups"
	"github.com/waggle-mq/waggle/raftnode"
	"github.com/waggle-mq/waggle/store"
	"github.com/waggle-mq/waggle/tlsconf"
)

type serveOptions struct {
	dataDir       string
	nodeID        uint32
	httpAddr      string
	kafkaAddr     string
	raftAddr      string
	advertiseRaft string
	peers         string
	join          bool
	logLevel      string
	logFormat     string
	pprofAddr     string

	advertiseHTTP  string
	advertiseKafka string

	snapshotThreshold uint64
	trailingLogs      uint64
	dataGroups        int // raft groups, the metadata group included
	minFreeDiskMiB    uint64
	storageMinFreeMiB uint64
	kafkaRetention    time.Duration
	memoryLimitMiB    int64

	tls tlsconf.Files

	// listening, when set, is told the bound HTTP, Kafka and raft
	// addresses once the node serves (a port 0 is then the one the system
	// picked): in-process tests bind :0 instead of guessing a free port.
	listening func(httpAddr, kafkaAddr, raftAddr string)

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
	f.Uint64Var(&o.snapshotThreshold, "raft-snapshot-threshold", 0, "log entries between snapshots (0: the built-in default)")
	f.Uint64Var(&o.trailingLogs, "raft-trailing-logs", 0, "log entries kept behind a snapshot (0: the built-in default)")
	f.Uint64Var(&o.minFreeDiskMiB, "min-free-disk-mib", 64, "stop (and refuse to start) when the data directory's disk has less free space (0: never)")
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
	f.Int64Var(&o.memoryLimitMiB, "memory-limit-mib", 448, "soft limit of the Go heap: the garbage collector works harder near it (0: none; GOMEMLIMIT wins)")
	f.DurationVar(&o.kafkaRetention, "kafka-retention", command.DefaultKafkaRetentionMs*time.Millisecond, "how long topics created over Kafka without retention.ms keep records (0: for ever)")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.logFormat, "log-format", "text", "text or json")
	f.StringVar(&o.pprofAddr, "pprof-addr", "", "serve Go's /debug/pprof on this address (empty: off)")
	return cmd
}

// serve wires one node: open the store, start raft, start the listeners,
// wait for a signal, then close in reverse order.
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
	if o.memoryLimitMiB > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(o.memoryLimitMiB << 20)
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
	log := slog.New(handler)
	peers, err := raftnode.ParsePeers(o.peers)
	if err != nil {
		return fmt.Errorf("--peers: %w", err)
	}
	id := strconv.FormatUint(uint64(o.nodeID), 10)
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

	if err := os.MkdirAll(o.dataDir, 0o755); err != nil {
		return err
	}
	minFree := o.minFreeDiskMiB << 20
	if err := checkFreeSpace(o.dataDir, minFree); err != nil {
		return err
	}
	if err := raftgroups.CheckCount(o.dataDir, o.dataGroups); err != nil {
		return err
	}
	// Each raft group's directory is checked, and repaired from the peers,
	// on its own: damage in one group's files costs only that group's copy.
	for id := range uint32(max(o.dataGroups, 1)) {
		dir := raftgroups.Dir(o.dataDir, id)
		err := verifyDataDir(dir)
		if err == nil {
			continue
		}
		if !errors.As(err, new(*damageError)) {
			return err
		}
		if len(peers) == 0 && !o.join {
			return fmt.Errorf("the data directory is damaged and a single node has no peers to repair it from (restore a backup): %w", err)
		}
		glog := log
		if o.dataGroups > 1 {
			glog = log.With("group", id)
		}
		glog.Error("the data directory is damaged: moving it aside and repairing this node from its peers", "err", err)
		aside, err := raftnode.PrepareRepair(dir)
		if err != nil {
			return err
		}
		glog.Warn("damaged files moved aside", "to", aside)
	}
	st, err := store.Open(filepath.Join(o.dataDir, "state"), newBadgerLogger(log))
	if err != nil {
		return err
	}
	defer st.Close()

	raftLog := newRaftLogger(log, hclog.LevelFromString(raftLogLevel(level)))
	// One raft listener carries every raft group of the node.
	mux, err := raftnode.Listen(o.raftAddr, orDefault(o.advertiseRaft, o.raftAddr), tlsConf, raftLog)
	if err != nil {
		return err
	}
	defer mux.Close()
	nodeConfig := raftnode.NodeConfig{
		ID:                id,
		Mux:               mux,
		TLS:               tlsConf,
		Dir:               o.dataDir,
		Peers:             peers,
		Join:              o.join,
		Logger:            raftLog,
		SnapshotThreshold: o.snapshotThreshold,
		TrailingLogs:      o.trailingLogs,
	}
	node, err := raftnode.StartNode(nodeConfig, st)
	if err != nil {
		return err
	}
	defer func() {
		if err := node.Shutdown(); err != nil {
			log.Error("raft shutdown", "err", err)
		}
	}()

	if o.pprofAddr != "" {
		go func() {
			// http.DefaultServeMux carries net/http/pprof's handlers.
			log.Error("pprof server", "err", http.ListenAndServe(o.pprofAddr, nil))
		}()
	}

	m := metrics.New()
	newService := func(node *raftnode.Node, st *store.Store) *broker.Service {
		svc := broker.New(id, node, st)
		svc.Metrics = m
		svc.KafkaRetentionMs = o.kafkaRetention.Milliseconds()
		return svc
	}
	svc := newService(node, st)
	scheme, peerTLS := "http", (*tls.Config)(nil) // how this node reaches the others' HTTP
	if tlsConf != nil {
		scheme, peerTLS = "https", tlsConf.Client
	}
	peerClient := nodeClient(peerTLS, authConf.BootstrapToken) // this node's requests to the others
	set, err := raftgroups.Start(&raftgroups.Group{Store: st, Node: node, Svc: svc}, raftgroups.Config{
		Count: o.dataGroups, DataDir: o.dataDir, Node: nodeConfig, NewService: newService,
		OpenStore: func(dir string) (*store.Store, error) { return store.Open(dir, newBadgerLogger(log)) },
		CanLead:   canLead(svc, peerClient, scheme),
		Preference: func(g uint32) string {
			node, _ := svc.LeaderPreference(g) // unreadable: no choice, the default placement
			return node
		},
	}, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := set.Close(); err != nil {
			log.Error("raft groups shutdown", "err", err)
		}
	}()
	groups, forwarding := joinGroups(set, peerClient, scheme)
	observe(ctx, m, node, st, svc, mapAll(set.All(), func(g *raftgroups.Group) *broker.Service { return g.Svc }))
	for _, g := range set.All() {
		go g.Svc.RunMaintenance(ctx, time.Second, groupLog(log, set, g))
	}
	go set.Run(ctx)
	ln, err := net.Listen("tcp", o.httpAddr)
	if err != nil {
		return fmt.Errorf("http listener: %w", err)
	}
	kln, err := net.Listen("tcp", o.kafkaAddr)
	if err != nil {
		return fmt.Errorf("kafka listener: %w", err)
	}
	if tlsConf != nil {
		ln, kln = tls.NewListener(ln, tlsConf.Server), tls.NewListener(kln, tlsConf.Server)
	}
	o.kafka.AdvertisedAddr = orDefault(o.advertiseKafka, kln.Addr().String())
	o.kafka.Metrics = m
	o.kafka.DataDir = o.dataDir
	o.kafka.Auth = kafka.AuthConfig{Enabled: o.authOn, AllowPlain: tlsConf != nil || o.insecure}
	o.kafka.Groups = mapAll(groups, func(s *broker.Service) kafka.Broker { return s })
	o.kafka.Forwarding = mapAll(forwarding, func(s *broker.Service) kafka.Broker { return s })
	ks := kafka.New(svc, o.kafka, log)
	defer ks.Close()
	markFull := storageFull(svc, peerClient, scheme, log)
	diskLow := watchFreeSpace(ctx, o.dataDir, minFree, o.storageMinFreeMiB<<20, 250*time.Millisecond, func(full bool) {
		for _, g := range set.Data() {
			g.Svc.SetStorageFull(full)
		}
		markFull(full)
	}, log)
	srv := &http.Server{Handler: httpapi.New(svc, log, httpapi.Options{Metrics: m, PeerTLS: peerTLS, Auth: authConf, Version: version,
		KafkaGroups: ks.DescribeGroup, DiskUsage: func() (uint64, uint64, error) { return diskUsage(o.dataDir) },
		RaftGroups: groupHealth(set), Groups: mapAll(groups, func(s *broker.Service) httpapi.Broker { return s }),
		Forwarding: mapAll(forwarding, func(s *broker.Service) httpapi.Broker { return s })}), ReadHeaderTimeout: 10 * time.Second}
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(ln) }()
	go func() {
		if err := ks.Serve(kln); err != nil {
			httpDone <- fmt.Errorf("kafka listener: %w", err)
		}
	}()
	log.Info("waggle serving", "node", id, "http", ln.Addr().String(), "kafka", kln.Addr().String(),
		"raft", node.RaftAddr(), "data", o.dataDir, "peers", len(peers))
	if o.listening != nil {
		o.listening(ln.Addr().String(), kln.Addr().String(), node.RaftAddr())
	}

	self := registration{ID: id, HTTPAddr: orDefault(o.advertiseHTTP, ln.Addr().String()), KafkaAddr: o.kafka.AdvertisedAddr}
	go registerSelf(ctx, scheme+"://"+ln.Addr().String(), peerClient, self, wonElection(ctx, node, id), log)
	oddGroupCount := watchGroupCount(ctx, svc, peerClient, scheme, id, max(o.dataGroups, 1), log)
	for _, g := range set.All() {
		go raiseLogFormats(ctx, g.Svc, svc, peerClient, scheme, 2*time.Second, wonElection(ctx, g.Node, id), groupLog(log, set, g))
	}

	var stopErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-httpDone:
		return fmt.Errorf("http server: %w", err)
	case stopErr = <-diskLow:
		log.Error("stopping", "err", stopErr)
	case stopErr = <-oddGroupCount:
		log.Error("stopping", "err", stopErr)
	}
	// Hand leadership over while this node still forwards writes, so
	// clients see a short stall instead of an election timeout.
	for _, g := range set.All() {
		if !g.Svc.IsLeader() {
			continue // a follower has nothing to hand off
		}
		start := time.Now()
		if err := g.Svc.HandOff(); err != nil {
			groupLog(log, set, g).Warn("leadership hand-off failed", "err", err)
		} else if !g.Svc.IsLeader() {
			groupLog(log, set, g).Info("leadership handed off", "took", time.Since(start))
		}
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return errors.Join(stopErr, srv.Shutdown(shutCtx))
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

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
func wonElection(ctx context.Context, node *raftnode.Node, id string) <-chan struct{} {
	won := make(chan struct{}, 1)
	onLeaderChange(ctx, node, func(l raft.LeaderObservation) {
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

// onLeaderChange calls fn, from a goroutine of its own, for each leader
// change raft reports, until ctx ends.
func onLeaderChange(ctx context.Context, node *raftnode.Node, fn func(raft.LeaderObservation)) {
	obs := make(chan raft.Observation, 16)
	observer := raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	node.Raft.RegisterObserver(observer)
	go func() {
		defer node.Raft.DeregisterObserver(observer)
		for {
			select {
			case <-ctx.Done():
				return
			case o := <-obs:
				fn(o.Data.(raft.LeaderObservation))
			}
		}
	}()
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

func raftLogLevel(l slog.Level) string {
	if l <= slog.LevelDebug {
		return "debug"
	}
	return "info" // leadership changes, snapshots, peers; repeats are held back (logbridge.go)
}

func defaultKafkaConfig() kafka.Config { return kafka.DefaultConfig() }

// storageFull marks the service full or not, and has a leader whose disk
// is full hand leadership (at most every 5 s) to a voter whose /health
// says its storage is not full: that node can take the writes this one
// refuses. With no such voter it keeps leading: moving leadership round
// nodes that are all full would only interrupt the reads, acks and
// retention that still work.
func storageFull(svc *broker.Service, client *http.Client, scheme string, log *slog.Logger) func(bool) {
	var lastHandOff time.Time
	return func(full bool) {
		svc.SetStorageFull(full)
		if !full || !svc.IsLeader() || time.Since(lastHandOff) < 5*time.Second {
			return
		}
		lastHandOff = time.Now()
		to, ok := voterWithRoom(svc, client, scheme)
		if !ok {
			log.Warn("storage full, and no other voter reports room: keeping leadership")
			return
		}
		if err := svc.HandOffTo(to); err != nil {
			log.Warn("storage full: leadership hand-off failed", "to", to.ID, "err", err)
		} else {
			log.Warn("storage full: handed leadership to a voter with room", "to", to.ID)
		}
	}
}

// voterWithRoom returns another voter whose /health answers that its
// storage is not full.
func voterWithRoom(svc *broker.Service, client *http.Client, scheme string) (broker.Member, bool) {
	members, err := svc.Members()
	if err != nil {
		return broker.Member{}, false
	}
	for _, m := range members {
		if !m.Voter || m.ID == svc.NodeID() || m.HTTPAddr == "" {
			continue
		}
		h, err := fetchPeerHealth(client, scheme, m.HTTPAddr)
		if err == nil && h.StorageFull != nil && !*h.StorageFull {
			return m, true
		}
	}
	return broker.Member{}, false
}

// joinGroups tells each group's service which group it serves and how to
// reach its leader, and lists the groups' services, as they are and
// forwarding their writes to the group's leader (one of each with one
// group: a follower forwards what it cannot refuse, a Kafka topic created
// through it, say).
func joinGroups(set *raftgroups.Set, client *http.Client, scheme string) (groups, forwarding []*broker.Service) {
	all := set.All()
	for _, g := range all {
		g.Svc.JoinGroup(g.ID, all[0].Svc, client, scheme)
		groups, forwarding = append(groups, g.Svc), append(forwarding, g.Svc.Forwarding())
	}
	return groups, forwarding
}

// mapAll converts each of in: services to the interface a listener
// takes, groups to their services.
func mapAll[T, U any](in []T, as func(T) U) []U {
	var out []U
	for _, v := range in {
		out = append(out, as(v))
	}
	return out
}

// groupHealth reports each raft group's state on this node for /health;
// nil when the cluster has only group 0.
func groupHealth(set *raftgroups.Set) func() []broker.Health {
	if len(set.All()) == 1 {
		return nil
	}
	return func() []broker.Health {
		out := make([]broker.Health, 0, len(set.All()))
		for _, g := range set.All() {
			out = append(out, g.Svc.Health())
		}
		return out
	}
}

// canLead reports whether a member may be handed a raft group's
// leadership: its /health answers (a node shutting down has closed its
// HTTP listener) and its storage is not full.
func canLead(meta *broker.Service, client *http.Client, scheme string) func(id string) bool {
	return func(id string) bool {
		members, err := meta.Members()
		if err != nil {
			return false
		}
		for _, m := range members {
			if m.ID != id || m.HTTPAddr == "" {
				continue
			}
			h, err := fetchPeerHealth(client, scheme, m.HTTPAddr)
			return err == nil && (h.StorageFull == nil || !*h.StorageFull)
		}
		return false
	}
}

// groupLog is log naming raft group g, when the node runs more than one:
// a single-group node's lines stay as they were.
func groupLog(log *slog.Logger, set *raftgroups.Set, g *raftgroups.Group) *slog.Logger {
	if len(set.All()) == 1 {
		return log
	}
	return log.With("group", g.ID)
}
