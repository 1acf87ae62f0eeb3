package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/time/rate"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/broker/httpapi"
	"github.com/waggle-mq/waggle/clock"
	"github.com/waggle-mq/waggle/kafka"
	"github.com/waggle-mq/waggle/metrics"
	"github.com/waggle-mq/waggle/raftgroups"
	"github.com/waggle-mq/waggle/raftmux"
	"github.com/waggle-mq/waggle/raftnode"
	"github.com/waggle-mq/waggle/store"
	"github.com/waggle-mq/waggle/tlsconf"
)

// DefaultReplicaWatch is how often a leader compares its members' state
// digests unless told otherwise (Config.ReplicaWatch).
const DefaultReplicaWatch = 30 * time.Second

// Config is what a node starts with: what waggle serve's flags say, parsed
// and checked by the caller. Each field names the flag it comes from.
type Config struct {
	// DataDir holds every raft group's store and raft log (--data-dir);
	// made when missing.
	DataDir string
	// NodeID is this node's id in the cluster, a positive number
	// (--node-id).
	NodeID uint32
	// HTTPAddr, KafkaAddr and RaftAddr are where the node listens
	// (--http-addr, --kafka-addr, --raft-addr). With port 0 the system
	// picks one; the Node's accessors tell which.
	HTTPAddr, KafkaAddr, RaftAddr string
	// AdvertiseRaft, AdvertiseHTTP and AdvertiseKafka are the addresses
	// peers and clients reach the node at (--advertise-raft,
	// --advertise-http, --advertise-kafka); empty: the bound ones.
	AdvertiseRaft, AdvertiseHTTP, AdvertiseKafka string
	// Peers are a static cluster's voters, this node among them
	// (--peers); none: a single node, or one that joins.
	Peers []raftnode.Peer
	// Join starts the node empty, waiting to be added to a running
	// cluster (--join).
	Join bool
	// DataGroups is how many raft groups the cluster runs, the metadata
	// group included (--data-groups); 0 is 1.
	DataGroups int
	// ReplicationFactor is how many nodes replicate each data group
	// (--replication-factor); 0: every node replicates every group.
	ReplicationFactor int
	// Racks are the nodes' racks by node id (--racks), the same on every
	// node: a data group's replicas go to as many racks as they can.
	// Nil: none.
	Racks map[string]string
	// SnapshotThreshold and TrailingLogs tune raft's snapshots
	// (--raft-snapshot-threshold, --raft-trailing-logs); 0: raftnode's
	// defaults.
	SnapshotThreshold, TrailingLogs uint64
	// LogHoldMiB is how far the raft log may grow past twice the Kafka
	// batches it keeps before the oldest are copied out of it
	// (--raft-log-hold-mib); 0: raftnode's default.
	LogHoldMiB int64
	// SnapshotSendMiB paces the raft snapshots the node sends its peers
	// (a replica catching up or added by a move), in MiB a second across
	// its groups (--snapshot-send-mib); 0: as fast as they go.
	SnapshotSendMiB int
	// MinFreeDiskMiB: below this much free space in DataDir the node
	// refuses to start, and stops (--min-free-disk-mib); 0: never.
	MinFreeDiskMiB uint64
	// StorageMinFreeMiB: below this much free space writes that add data
	// are refused (--storage-min-free-mib); 0: never.
	StorageMinFreeMiB uint64
	// KafkaRetention is how long topics created over Kafka without
	// retention.ms keep records (--kafka-retention); 0: for ever.
	KafkaRetention time.Duration
	// ReplicaWatch is how often the leader compares its members' state
	// digests on its own (--replica-watch-interval, DefaultReplicaWatch);
	// 0: never.
	ReplicaWatch time.Duration
	// ReplaceDeadAfter, with a replication factor, is how long a voter's
	// /health may stay unanswered before group 0's leader moves its
	// replicas to the live voters (--replace-dead-after); 0: never.
	ReplaceDeadAfter time.Duration
	// TLS, when set, secures the HTTP, Kafka and raft listeners and the
	// node's calls to its peers (--tls-cert, --tls-key, --tls-ca).
	TLS *tlsconf.Config
	// Auth is the HTTP API's authentication (--auth,
	// --bootstrap-token-file, --jwt-*); Auth.Enabled turns Kafka's SASL
	// on too.
	Auth httpapi.AuthConfig
	// Insecure allows SASL PLAIN without TLS (--insecure). Whether a
	// listener may be reachable from other machines is the caller's
	// check.
	Insecure bool
	// Kafka configures the Kafka listener: start from
	// kafka.DefaultConfig() (--kafka-*). The node sets AdvertisedAddr,
	// Metrics, DataDir, Auth, Groups and Forwarding itself.
	Kafka kafka.Config
	// PprofAddr serves Go's /debug/pprof there (--pprof-addr); empty:
	// off.
	PprofAddr string
	// Version is the binary's version, which /health reports.
	Version string
	// Logger receives the node's log lines, raft's and badger's (raft's
	// at debug when Logger is enabled for debug, else from info); nil:
	// none.
	Logger *slog.Logger
	// VerifyDataDir checks one raft group's directory before anything
	// opens it. An error that is a *DamageError has the directory moved
	// aside and repaired from the peers (a single node refuses to start);
	// any other error stops the start. A new or empty directory passes.
	// Nil: raftnode's check in this process (waggle serve runs it in a
	// child process, which a panic in a library cannot take down).
	VerifyDataDir func(dir string) error
	// WallClock is this node's wall clock; nil: time.Now. Tests shift it
	// to play a node whose clock is wrong (the leader stamps the voters'
	// median, package clock).
	WallClock func() time.Time
}

// Node is a running waggle node. Start one, then Close it (or Wait for
// it to stop by itself).
type Node struct {
	cfg Config
	log *slog.Logger
	id  string

	// ctx ends the cluster loops, wg counts every goroutine the node
	// started (the loops, the listeners' Serve): shutdown waits for them
	// before it closes raft and the stores.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	st    *store.Store
	mux   *raftmux.Mux
	raft  *raftnode.Node
	set   *raftgroups.Set
	pprof *http.Server
	ln    net.Listener // HTTP
	kln   net.Listener // Kafka
	ks    *kafka.Server
	srv   *http.Server

	peerClient *http.Client // this node's requests to the others
	scheme     string       // and their scheme: http, or https with TLS
	// loops are each raft group's goroutines, by group: started by start
	// and by the mover (its goroutine alone touches them after start).
	loops map[uint32]*groupLoops

	failed        chan error    // a listener stopped serving
	diskLow       <-chan error  // the data directory's disk is nearly full, or gone
	oddGroupCount <-chan error  // this node runs another raft group count than most
	closing       chan struct{} // closed by Close (once)
	closeOnce     sync.Once
	done          chan struct{} // closed once shut down; err is then set
	err           error         // why it stopped, with shutdown's errors
}

// Start opens the data directory, starts raft and every raft group, the
// HTTP and Kafka listeners and the cluster loops, and returns once the
// node serves. A failed start leaves nothing open.
func Start(cfg Config) (*Node, error) {
	if cfg.NodeID == 0 {
		return nil, errors.New("node: Config.NodeID must be a positive number")
	}
	n := &Node{cfg: cfg, log: cfg.Logger, id: strconv.FormatUint(uint64(cfg.NodeID), 10),
		failed: make(chan error, 2), closing: make(chan struct{}), done: make(chan struct{})}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	if n.cfg.VerifyDataDir == nil {
		n.cfg.VerifyDataDir = verifyInProcess
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	// A failed write or fsync, or damage read back, ends the process
	// (diskfault.go).
	store.HandleFaults(faultStop(n.log, os.Exit))
	if err := n.start(); err != nil {
		n.release()
		return nil, err
	}
	go n.supervise()
	return n, nil
}

// Run starts a node and serves until ctx ends or the node stops by
// itself, then shuts it down (Close).
func Run(ctx context.Context, cfg Config) error {
	n, err := Start(cfg)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return n.Close()
	case <-n.done:
		return n.err
	}
}

// HTTPAddr is the address the HTTP API listens on.
func (n *Node) HTTPAddr() string { return n.ln.Addr().String() }

// KafkaAddr is the address the Kafka listener listens on.
func (n *Node) KafkaAddr() string { return n.kln.Addr().String() }

// RaftAddr is the address raft listens on.
func (n *Node) RaftAddr() string { return n.raft.RaftAddr() }

// Wait blocks until the node has stopped, by itself (its disk nearly full
// or gone, its raft group count unlike the cluster's, a listener failed)
// or through Close, and returns why: nil after a Close that went well.
func (n *Node) Wait() error {
	<-n.done
	return n.err
}

// Close shuts the node down: it hands its leaderships over, stops the
// listeners, the cluster loops, raft and the stores, in that order, and
// returns Wait's answer. Nothing of the node runs after it returned: the
// data directory may be opened again.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { close(n.closing) })
	return n.Wait()
}

// start wires the node in the order waggle serve always has: check and
// repair the data directory, open the store, start raft and the raft
// groups, the loops, the listeners. What it opened is in n's fields, for
// release.
func (n *Node) start() error {
	cfg, log := n.cfg, n.log
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return err
	}
	if err := checkStorageHeadroom(cfg.StorageMinFreeMiB, cfg.MinFreeDiskMiB); err != nil {
		return err
	}
	minFree := cfg.MinFreeDiskMiB << 20
	if err := checkFreeSpace(cfg.DataDir, minFree); err != nil {
		return err
	}
	placement, err := n.placement()
	if err != nil {
		return err
	}
	had, err := raftgroups.Recorded(cfg.DataDir)
	if err != nil {
		return err
	}
	if err := raftgroups.CheckCount(cfg.DataDir, cfg.DataGroups); err != nil {
		return err
	}
	if err := raftgroups.CheckPlacement(cfg.DataDir, placement, had == 0); err != nil {
		return err
	}
	if err := n.checkGroupDirs(placement); err != nil {
		return err
	}
	opened := time.Now()
	if n.st, err = store.Open(filepath.Join(cfg.DataDir, "state"), newBadgerLogger(log)); err != nil {
		return err
	}
	ids, _ := n.st.DedupIndexStats()
	log.Info("store opened", "took", time.Since(opened).Round(time.Millisecond), "dedupIds", ids)

	raftLevel := hclog.Info // leadership changes, snapshots, peers; repeats are held back (logbridge.go)
	if log.Enabled(context.Background(), slog.LevelDebug) {
		raftLevel = hclog.Debug
	}
	raftLog := newRaftLogger(log, raftLevel)
	// One raft listener carries every raft group of the node.
	if n.mux, err = raftnode.Listen(cfg.RaftAddr, orDefault(cfg.AdvertiseRaft, cfg.RaftAddr), cfg.TLS, raftLog); err != nil {
		return err
	}
	nodeConfig := raftnode.NodeConfig{
		ID:                n.id,
		Mux:               n.mux,
		TLS:               cfg.TLS,
		Dir:               cfg.DataDir,
		Peers:             cfg.Peers,
		Join:              cfg.Join,
		Logger:            raftLog,
		SnapshotThreshold: cfg.SnapshotThreshold,
		TrailingLogs:      cfg.TrailingLogs,
		LogHoldMiB:        cfg.LogHoldMiB,
		SnapshotSend:      snapshotPace(cfg.SnapshotSendMiB),
	}
	if n.raft, err = raftnode.StartNode(nodeConfig, n.st); err != nil {
		return err
	}
	n.startPprof()

	m := metrics.New()
	clk := clock.New(cfg.WallClock)
	newService := func(node *raftnode.Node, st *store.Store) *broker.Service {
		svc := broker.New(n.id, node, st)
		svc.SetClock(clk.Now)
		svc.Metrics = m
		svc.KafkaRetentionMs = cfg.KafkaRetention.Milliseconds()
		return svc
	}
	svc := newService(n.raft, n.st)
	scheme, peerTLS := "http", (*tls.Config)(nil) // how this node reaches the others' HTTP
	if cfg.TLS != nil {
		scheme, peerTLS = "https", cfg.TLS.Client
	}
	n.scheme = scheme
	peerClient := nodeClient(peerTLS, cfg.Auth.BootstrapToken) // this node's requests to the others
	n.peerClient = peerClient
	n.set, err = raftgroups.Start(&raftgroups.Group{Store: n.st, Node: n.raft, Svc: svc}, raftgroups.Config{
		Count: cfg.DataGroups, DataDir: cfg.DataDir, Node: nodeConfig, NewService: newService, Placement: placement,
		OpenStore: func(dir string) (*store.Store, error) { return store.Open(dir, newBadgerLogger(log)) },
		CanLead:   canLead(n.ctx, svc, peerClient, scheme),
		Recorded:  svc.RecordedReplicas,
		CaughtUp:  peerCaughtUp(n.ctx, svc, peerClient, scheme),
		Preference: func(g uint32) string {
			node, _ := svc.LeaderPreference(g) // unreadable: no choice, the default placement
			return node
		},
	}, log)
	if err != nil {
		return err
	}
	set := n.set
	groups, forwarding, remote := joinGroups(set, max(cfg.DataGroups, 1), peerClient, scheme)
	n.wg.Go(func() { askPeersTheTime(n.ctx, svc, clk, peerClient, scheme, time.Second, log) })
	m.Register(clockOffsetGauge(clk))
	observe(n.ctx, &n.wg, m, n.raft, n.st, svc, set)
	n.loops = map[uint32]*groupLoops{}
	for _, g := range set.All() {
		n.startGroupLoops(g)
	}
	n.wg.Go(func() { set.Run(n.ctx) })
	if n.ln, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return fmt.Errorf("http listener: %w", err)
	}
	if n.kln, err = net.Listen("tcp", cfg.KafkaAddr); err != nil {
		return fmt.Errorf("kafka listener: %w", err)
	}
	if cfg.TLS != nil {
		n.ln, n.kln = tls.NewListener(n.ln, cfg.TLS.Server), tls.NewListener(n.kln, cfg.TLS.Server)
	}
	kc := cfg.Kafka
	kc.AdvertisedAddr = orDefault(cfg.AdvertiseKafka, n.kln.Addr().String())
	kc.Metrics = m
	kc.DataDir = cfg.DataDir
	kc.Auth = kafka.AuthConfig{Enabled: cfg.Auth.Enabled, AllowPlain: cfg.TLS != nil || cfg.Insecure}
	kafkaRemote := map[*broker.RemoteGroup]kafka.Broker{} // one per group, its catalog read once
	asKafka := func(rg *broker.RemoteGroup) kafka.Broker {
		if kafkaRemote[rg] == nil {
			kafkaRemote[rg] = kafka.NewRemote(rg, svc)
		}
		return kafkaRemote[rg]
	}
	kc.Groups, kc.Forwarding = asListener(groups, remote, asKafka), asListener(forwarding, remote, asKafka)
	dir := directory(set, remote, peerClient, scheme)
	kc.Directory = dir
	kc.Racks = cfg.Racks
	n.ks = kafka.New(svc, kc, log)
	markFull := storageFull(n.ctx, svc, peerClient, scheme, log)
	n.diskLow = watchFreeSpace(n.ctx, &n.wg, cfg.DataDir, minFree, cfg.StorageMinFreeMiB<<20, diskCheckEvery, func(full bool) {
		for _, g := range set.Data() {
			g.Svc.SetStorageFull(full)
		}
		markFull(full)
	}, log)
	api := httpapi.New(svc, log, httpapi.Options{Metrics: m, PeerTLS: peerTLS, Auth: cfg.Auth, Version: cfg.Version,
		KafkaGroups: n.ks.DescribeGroup, Clock: clk, DiskUsage: func() (uint64, uint64, error) { return diskUsage(cfg.DataDir) },
		RaftGroups: groupHealth(set, cfg.DataGroups), Groups: asListener[httpapi.Broker](groups, nil, nil),
		Forwarding: asListener[httpapi.Broker](forwarding, nil, nil), Remote: remoteGroups(dir)})
	n.srv = &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	if cfg.ReplicaWatch > 0 {
		n.wg.Go(func() { api.WatchReplicas(n.ctx, cfg.ReplicaWatch) })
	}
	n.wg.Go(func() { n.failed <- n.srv.Serve(n.ln) })
	n.wg.Go(func() {
		if err := n.ks.Serve(n.kln); err != nil {
			n.failed <- fmt.Errorf("kafka listener: %w", err)
		}
	})
	log.Info("waggle serving", "node", n.id, "http", n.HTTPAddr(), "kafka", n.KafkaAddr(),
		"raft", n.RaftAddr(), "data", cfg.DataDir, "peers", len(cfg.Peers))

	self := registration{ID: n.id, HTTPAddr: orDefault(cfg.AdvertiseHTTP, n.HTTPAddr()), KafkaAddr: kc.AdvertisedAddr}
	won := wonElection(n.ctx, &n.wg, n.raft, n.id)
	n.wg.Go(func() { registerSelf(n.ctx, scheme+"://"+n.HTTPAddr(), peerClient, self, won, log) })
	n.oddGroupCount = watchGroupCount(n.ctx, &n.wg, svc, peerClient, scheme, n.id, max(cfg.DataGroups, 1), log)
	if dir != nil {
		m := &mover{n: n, api: api, remote: dir, kafka: make([]kafka.Broker, len(dir)), served: map[uint32]bool{}}
		for g := range dir {
			m.served[uint32(g)] = groups[g] != nil
			if g > 0 {
				m.kafka[g] = asKafka(dir[g])
			}
		}
		n.wg.Go(func() { m.follow(n.ctx) })
		if cfg.ReplaceDeadAfter > 0 {
			n.wg.Go(func() { m.replaceDead(n.ctx, cfg.ReplaceDeadAfter) })
		}
	}
	return nil
}

// startGroupLoops runs raft group g's maintenance and, while this node
// leads it, its log format raises, until the node stops or leaves the
// group (stopGroupLoops). The node's shutdown waits for them too.
func (n *Node) startGroupLoops(g *raftgroups.Group) {
	ctx, cancel := context.WithCancel(n.ctx)
	l := &groupLoops{cancel: cancel}
	n.loops[g.ID] = l
	log := groupLog(n.log, n.set, g)
	l.wg.Go(func() { g.Svc.RunMaintenance(ctx, time.Second, log) })
	won := wonElection(ctx, &l.wg, g.Node, n.id)
	l.wg.Go(func() {
		raiseLogFormats(ctx, g.Svc, n.set.All()[0].Svc, n.peerClient, n.scheme, 2*time.Second, won, log)
	})
	n.wg.Go(func() { <-ctx.Done(); l.wg.Wait() })
}

// stopGroupLoops stops group id's loops and waits for them.
func (n *Node) stopGroupLoops(id uint32) {
	if l := n.loops[id]; l != nil {
		l.cancel()
		l.wg.Wait()
		delete(n.loops, id)
	}
}

// checkGroupDirs checks each raft group's directory, and has a damaged
// one repaired from the peers, on its own: damage in one group's files
// costs only that group's copy.
func (n *Node) checkGroupDirs(placement raftgroups.Placement) error {
	ids, err := raftgroups.Runs(n.cfg.DataDir, placement, n.id, max(n.cfg.DataGroups, 1))
	if err != nil {
		return err
	}
	for _, id := range append([]uint32{0}, ids...) {
		dir := raftgroups.Dir(n.cfg.DataDir, id)
		checked := time.Now()
		var err error
		if found, ok := damageFound(dir); ok {
			err = &DamageError{Detail: "found while the node ran: " + found}
		} else {
			err = n.cfg.VerifyDataDir(dir)
		}
		if err == nil {
			n.log.Debug("start-up check passed", "dir", dir, "took", time.Since(checked).Round(time.Millisecond))
			continue
		}
		if !errors.As(err, new(*DamageError)) {
			return err
		}
		if len(n.cfg.Peers) == 0 && !n.cfg.Join {
			return fmt.Errorf("the data directory is damaged and a single node has no peers to repair it from (restore a backup): %w", err)
		}
		if replicas := placement.Replicas(id); replicas != nil && len(replicas) == 1 {
			return fmt.Errorf("raft group %d's directory is damaged and this node is its only replica (--replication-factor 1): no peer can repair it (restore a backup): %w", id, err)
		}
		glog := n.log
		if n.cfg.DataGroups > 1 {
			glog = n.log.With("group", id)
		}
		glog.Error("the data directory is damaged: moving it aside and repairing this node from its peers", "err", err)
		aside, err := raftnode.PrepareRepair(dir)
		if err != nil {
			return err
		}
		glog.Warn("damaged files moved aside", "to", aside)
	}
	return nil
}

// placement is which nodes replicate each data group: every node without
// a replication factor; with one, a share of a static cluster's nodes.
func (n *Node) placement() (raftgroups.Placement, error) {
	cfg := n.cfg
	if cfg.ReplicationFactor == 0 {
		if len(cfg.Racks) > 0 {
			return raftgroups.Placement{}, errors.New("--racks places data groups' replicas: give --replication-factor too")
		}
		return raftgroups.Placement{}, nil
	}
	switch {
	case cfg.Join && len(cfg.Peers) == 0:
		return raftgroups.Placement{}, errors.New("--join with --replication-factor needs --peers: the nodes the cluster was made with, whose placement every node computes alike " +
			"(the new node is not among them: it gets replicas by `waggle cluster rebalance`)")
	case cfg.DataGroups < 2:
		return raftgroups.Placement{}, errors.New("--replication-factor places data groups: give --data-groups 2 or more")
	}
	ids := make([]string, len(cfg.Peers))
	for i, p := range cfg.Peers {
		ids[i] = p.ID
	}
	return raftgroups.NewPlacement(cfg.ReplicationFactor, ids, cfg.Racks)
}

// startPprof serves Go's profiles on PprofAddr, from a mux of its own (no
// handler of the process's default mux is exposed).
func (n *Node) startPprof() {
	if n.cfg.PprofAddr == "" {
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	n.pprof = &http.Server{Addr: n.cfg.PprofAddr, Handler: mux}
	n.wg.Go(func() {
		if err := n.pprof.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("pprof server", "err", err)
		}
	})
}

// supervise waits for a reason to stop, then shuts the node down.
func (n *Node) supervise() {
	defer close(n.done)
	var stopErr error
	select {
	case <-n.closing:
		n.log.Info("shutting down")
	case err := <-n.failed:
		n.srv.Close()
		n.release()
		n.err = fmt.Errorf("http server: %w", err)
		return
	case stopErr = <-n.diskLow:
		n.log.Error("stopping", "err", stopErr)
	case stopErr = <-n.oddGroupCount:
		n.log.Error("stopping", "err", stopErr)
	}
	n.cancel() // the cluster loops
	// Hand leadership over while this node still forwards writes, so
	// clients see a short stall instead of an election timeout.
	for _, g := range n.set.All() {
		if !g.Svc.IsLeader() {
			continue // a follower has nothing to hand off
		}
		start := time.Now()
		if err := g.Svc.HandOff(); err != nil {
			groupLog(n.log, n.set, g).Warn("leadership hand-off failed", "err", err)
		} else if !g.Svc.IsLeader() {
			groupLog(n.log, n.set, g).Info("leadership handed off", "took", time.Since(start))
		}
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := n.srv.Shutdown(shutCtx)
	n.release()
	n.err = errors.Join(stopErr, err)
}

// release closes what start opened, the last opened first (the fields
// still nil were not): the Kafka listener, then, once every goroutine of
// the node has returned, the raft groups, raft and the store. The HTTP
// server is closed by then, or was never started.
func (n *Node) release() {
	n.cancel()
	if n.pprof != nil {
		n.pprof.Close()
	}
	switch {
	case n.ks != nil:
		n.ks.Close() // closes kln
	case n.ln != nil:
		n.ln.Close() // the Kafka listener could not be opened
	}
	n.wg.Wait()
	if n.set != nil {
		if err := n.set.Close(); err != nil {
			n.log.Error("raft groups shutdown", "err", err)
		}
	}
	if n.raft != nil {
		if err := n.raft.Shutdown(); err != nil {
			n.log.Error("raft shutdown", "err", err)
		}
	}
	if n.mux != nil {
		n.mux.Close()
	}
	if n.st != nil {
		n.st.Close()
	}
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// snapshotPace is the pace of snapshots sent at mib MiB a second, nil for
// 0 (none).
func snapshotPace(mib int) *rate.Limiter {
	if mib <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(mib<<20), 256<<10)
}
