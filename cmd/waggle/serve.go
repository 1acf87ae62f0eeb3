package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/broker/httpapi"
	"github.com/waggle-mq/waggle/raftfsm"
	"github.com/waggle-mq/waggle/store"
)

type serveOptions struct {
	dataDir   string
	nodeID    uint32
	httpAddr  string
	kafkaAddr string
	raftAddr  string
	peers     string
	logLevel  string
	pprofAddr string
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
	f.StringVar(&o.kafkaAddr, "kafka-addr", "127.0.0.1:9092", "listen address of the Kafka protocol (not served yet)")
	f.StringVar(&o.raftAddr, "raft-addr", "127.0.0.1:7400", "listen and advertised address of raft")
	f.StringVar(&o.peers, "peers", "", `static cluster, "1=host:port,2=host:port,3=host:port" (raft addresses); empty: a single node`)
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.pprofAddr, "pprof-addr", "", "serve Go's /debug/pprof on this address (empty: off)")
	return cmd
}

// serve wires one node: open the store, start raft, start the listeners,
// wait for a signal, then close in reverse order.
func serve(ctx context.Context, o serveOptions) error {
	if o.nodeID == 0 {
		return errors.New("--node-id must be a positive number")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	peers, err := raftfsm.ParsePeers(o.peers)
	if err != nil {
		return fmt.Errorf("--peers: %w", err)
	}
	id := strconv.FormatUint(uint64(o.nodeID), 10)

	st, err := store.Open(filepath.Join(o.dataDir, "state"))
	if err != nil {
		return err
	}
	defer st.Close()

	node, err := raftfsm.StartNode(raftfsm.NodeConfig{
		ID:       id,
		RaftAddr: o.raftAddr,
		Dir:      o.dataDir,
		Peers:    peers,
		Logger:   hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.LevelFromString(raftLogLevel(level)), Output: os.Stderr}),
	}, st)
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

	svc := broker.New(id, node, st)
	go svc.RunMaintenance(ctx, time.Second, log)
	ln, err := net.Listen("tcp", o.httpAddr)
	if err != nil {
		return fmt.Errorf("http listener: %w", err)
	}
	srv := &http.Server{Handler: httpapi.New(svc, log), ReadHeaderTimeout: 10 * time.Second}
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(ln) }()
	log.Info("waggle serving", "node", id, "http", ln.Addr().String(), "raft", o.raftAddr,
		"data", o.dataDir, "peers", len(peers))

	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-httpDone:
		return fmt.Errorf("http server: %w", err)
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutCtx)
}

func raftLogLevel(l slog.Level) string {
	if l <= slog.LevelDebug {
		return "debug"
	}
	return "warn" // raft's info lines are chatty; keep them for --log-level debug
}
