package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/semaphore"

	"github.com/waggle-mq/waggle/auth"
	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/metrics"
	"github.com/waggle-mq/waggle/router"
)

// Config tunes the listener.
type Config struct {
	// MaxFrameBytes caps one request; a larger size prefix closes the
	// connection before anything is allocated (Kafka's
	// socket.request.max.bytes; an unchecked size was CVE-2022-34917).
	MaxFrameBytes int32
	// AutoCreateTopics creates unknown topics named in Metadata (when the
	// client allows it) and Produce requests.
	AutoCreateTopics bool
	// DefaultPartitions is the partition count of auto-created topics and
	// of CreateTopics asking for -1.
	DefaultPartitions int32
	// FrameTimeout bounds how long the rest of a frame may take to arrive
	// once its size was read; IdleTimeout how long a connection may wait
	// between requests (Kafka's connections.max.idle.ms).
	FrameTimeout time.Duration
	IdleTimeout  time.Duration
	// Metrics records requests per API; nil records nothing.
	Metrics *metrics.Metrics
	// Auth makes clients authenticate with SASL before anything else.
	Auth AuthConfig
	// InFlightBytes bounds the request bytes read and not yet answered,
	// over all connections: once it is spent, connections are not read
	// until answers go out, so producers faster than the disk are slowed
	// down instead of queued without limit in memory.
	InFlightBytes int64
	// AdvertisedAddr is the address clients are told for this node. The
	// node lists itself under it even before its registration in the
	// replicated state has landed, so Metadata is never without brokers.
	AdvertisedAddr string
	// ConsumerGroups tunes KIP-848 consumer groups (ConsumerGroupHeartbeat).
	ConsumerGroups ConsumerGroupConfig
	// DataDir is the node's data directory, the one log directory
	// DescribeLogDirs reports.
	DataDir string
	// Groups are the brokers of the node's raft groups by group id
	// (Groups[0] is the one New is given), and Forwarding the same groups'
	// brokers whose writes reach the group's leader from any node
	// (placement.go). Nil: one group.
	Groups, Forwarding []Broker
	// Directory, in a cluster with a replication factor, reaches each
	// data group (by id; nil for group 0) through its replicas, whether
	// or not this node is one: Metadata's replicas and in-sync replicas
	// come from it. The groups this node does not replicate are *Remote
	// in Groups and Forwarding, and group 0 holds no topic. Nil: every
	// node replicates every group.
	Directory []*broker.RemoteGroup
	// Racks are the brokers' racks by node id (--racks), which Metadata
	// reports; nil: none.
	Racks map[string]string
}

// AuthConfig is the listener's SASL settings.
type AuthConfig struct {
	// Enabled requires SASL: before it succeeds only ApiVersions,
	// SaslHandshake and SaslAuthenticate are served, in frames of at most
	// preAuthMaxFrame bytes; anything else closes the connection.
	Enabled bool
	// AllowPlain offers PLAIN (TLS on, or --insecure).
	AllowPlain bool
}

// preAuthMaxFrame caps a frame before authentication: nobody unknown gets
// to make the broker allocate more.
const preAuthMaxFrame = 64 << 10

// DefaultConfig is what `waggle serve` uses unless told otherwise.
func DefaultConfig() Config {
	return Config{
		MaxFrameBytes:     100 << 20,
		InFlightBytes:     64 << 20,
		AutoCreateTopics:  true,
		DefaultPartitions: 1,
		FrameTimeout:      30 * time.Second,
		IdleTimeout:       10 * time.Minute,
		ConsumerGroups:    DefaultConsumerGroupConfig(),
	}
}

// Server accepts Kafka connections and serves them from a broker.
type Server struct {
	svc   Broker
	cfg   Config
	log   *slog.Logger
	route router.Table[Broker] // cfg.Groups and cfg.Forwarding (placement.go)

	coords   []*coordinator      // per raft group: the consumer groups it owns (placement.go)
	sessions *fetchSessions      // Fetch sessions (KIP-227)
	regexes  regexResolver       // KIP-848 regex subscriptions (regex.go)
	shares   *shareSessions      // share sessions (KIP-932, share_sessions.go)
	inFlight *semaphore.Weighted // request bytes read and not yet answered (Config.InFlightBytes)
	views    []replicaView       // Config.Directory as partition reassignments read it (reassignments.go)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

// New returns a listener over svc (a *broker.Service, or a fake in tests).
func New(svc Broker, cfg Config, log *slog.Logger) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	if cfg.InFlightBytes <= 0 {
		cfg.InFlightBytes = DefaultConfig().InFlightBytes
	}
	def := DefaultConsumerGroupConfig()
	if cfg.ConsumerGroups.SessionTimeout <= 0 {
		cfg.ConsumerGroups.SessionTimeout = def.SessionTimeout
	}
	if cfg.ConsumerGroups.HeartbeatInterval <= 0 {
		cfg.ConsumerGroups.HeartbeatInterval = def.HeartbeatInterval
	}
	srv := &Server{svc: svc, cfg: cfg, log: log, sessions: newFetchSessions(), shares: newShareSessions(), inFlight: semaphore.NewWeighted(cfg.InFlightBytes),
		ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}, route: router.NewTable(svc, cfg.Groups, cfg.Forwarding)}
	if cfg.Directory != nil {
		remote := make([]bool, len(cfg.Groups))
		for g, b := range cfg.Groups {
			_, remote[g] = b.(*Remote)
		}
		srv.route = srv.route.DataGroupsOnly(remote)
		srv.views = replicaViews(cfg.Directory)
	}
	for g := range srv.route.Groups() {
		co := newCoordinator()
		co.consumerCfg = cfg.ConsumerGroups
		co.records = func() classicRecords { return srv.group(uint32(g)) } // looked up per use: replicas move
		co.hasOffsets = func(group string) bool {
			offsets, err := srv.groupOffsets(group)
			return err != nil || len(offsets) > 0 // unsure: held
		}
		srv.coords = append(srv.coords, co)
	}
	return srv
}

// PlaceGroup puts raft group g's brokers in the tables every request
// reads, from now on: local and forwarding are the services of a member
// this node now runs, or both the *Remote of a group it stopped
// replicating.
func (s *Server) PlaceGroup(g uint32, local, forwarding Broker) {
	_, remote := local.(*Remote)
	s.route.Place(g, local, forwarding, remote)
}

// Serve accepts connections on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	go func() {
		<-s.ctx.Done()
		ln.Close()
	}()
	for _, co := range s.coords {
		go co.run(s.ctx.Done())
	}
	go s.watchLeadership()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return nil
			}
			return err
		}
		s.mu.Lock()
		s.conns[nc] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c := &conn{s: s, nc: nc}
			if err := c.serve(); err != nil && !errors.Is(err, io.EOF) && s.ctx.Err() == nil {
				s.log.Debug("kafka connection closed", "remote", nc.RemoteAddr().String(), "err", err)
			}
			nc.Close()
			s.shares.closeConn(s, c)
			s.mu.Lock()
			delete(s.conns, nc)
			s.mu.Unlock()
		}()
	}
}

// Close stops accepting, ends every connection and waits for them.
func (s *Server) Close() {
	s.cancel()
	s.mu.Lock()
	for nc := range s.conns {
		nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// conn serves one client connection: one request at a time, so responses
// go out in request order, as Kafka does.
type conn struct {
	s        *Server
	nc       net.Conn
	clientID string // from the latest request header

	// SASL state (see 17_sasl_handshake.go, 36_sasl_authenticate.go).
	mechanism string
	scram     *auth.ScramConversation
	principal *auth.Principal // nil until authenticated
	closing   bool            // close once the answers so far are written
}

// authenticated reports whether the connection may make requests beyond
// the SASL ones.
func (c *conn) authenticated() bool { return !c.s.cfg.Auth.Enabled || c.principal != nil }

// coordinator returns the coordinator of the consumer group name (the
// one of the raft group that owns the name) and whether this node
// coordinates it now: it leads that raft group. A node that stopped
// leading forgets its groups' membership.
func (c *conn) coordinator(name string) (*coordinator, bool) {
	g := c.s.placedIn(name)
	return c.s.coords[g], c.s.leading(g)
}

// leading reports whether this node leads raft group g, and tells the
// group's coordinator: a node that stopped leading forgets its groups, one
// that took the lead in a new term starts its failover grace (failover.go).
func (s *Server) leading(g uint32) bool {
	co := s.coords[g]
	if term, ok := s.group(g).LeaderTerm(); ok {
		co.lead(term)
		return true
	}
	co.reset()
	return false
}

// watchLeadership notices a change of leader without waiting for a group
// request, so the failover grace starts when this node takes the lead.
func (s *Server) watchLeadership() {
	t := time.NewTicker(reapEvery)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			for g := range s.coords {
				s.leading(uint32(g))
			}
		}
	}
}

// header is a request header (v1, or v2 with tagged fields).
type header struct {
	key, version int16
	correlation  int32
	clientID     string
}

var errBadFrame = errors.New("malformed request frame")

// maxInFlight bounds the requests one connection may have read but not yet
// answered.
const maxInFlight = 16

// pendingReply is a request read and handed off, waiting for its answer to
// be written in order.
type pendingReply struct {
	h      header
	wait   reply
	start  time.Time
	weight int64 // bytes of the in-flight budget it holds
}

// serve reads requests and hands each to its handler in order; a writer
// sends the answers back in the same order. Produce answers wait for raft,
// so up to maxInFlight produce requests of one connection are in the raft
// pipeline together, in request order, instead of one commit at a time.
func (c *conn) serve() error {
	pending := make(chan pendingReply, maxInFlight)
	writeErr := make(chan error, 1)
	go func() {
		var err error
		for p := range pending {
			if err != nil {
				c.s.inFlight.Release(p.weight)
				continue // drain after a failure
			}
			var resp kmsg.Response
			if resp, err = p.wait(); err == nil && resp != nil {
				err = c.write(p.h, resp)
			}
			c.s.inFlight.Release(p.weight)
			c.s.cfg.Metrics.KafkaRequest(kmsg.NameForKey(p.h.key), time.Since(p.start).Seconds())
			if err != nil {
				c.nc.Close() // stops the reader too
			}
		}
		writeErr <- err
	}()
	err := c.read(pending)
	close(pending)
	if werr := <-writeErr; werr != nil {
		return werr
	}
	return err
}

func (c *conn) read(pending chan<- pendingReply) error {
	var sizeBuf [4]byte
	for {
		c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		if _, err := io.ReadFull(c.nc, sizeBuf[:]); err != nil {
			return err
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		limit := c.s.cfg.MaxFrameBytes
		if !c.authenticated() {
			limit = min(limit, preAuthMaxFrame)
		}
		if size < 8 || size > limit {
			return fmt.Errorf("%w: frame size %d outside [8, %d]", errBadFrame, size, limit)
		}
		// Wait for room before reading the rest: a client that outruns
		// the disk finds its connection not read for a while (TCP pushes
		// back), rather than the broker buffering its requests. The wait
		// is not also reported as throttle_time_ms: KIP-219 clients would
		// then hold back as long again after the answer.
		weight := min(int64(size), c.s.cfg.InFlightBytes)
		if !c.s.inFlight.TryAcquire(weight) {
			waitStart := time.Now()
			if err := c.s.inFlight.Acquire(c.s.ctx, weight); err != nil {
				return err
			}
			c.s.cfg.Metrics.KafkaThrottled(time.Since(waitStart).Seconds())
		}
		c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.FrameTimeout))
		body := make([]byte, size)
		if _, err := io.ReadFull(c.nc, body); err != nil {
			c.s.inFlight.Release(weight)
			return err
		}
		p, err := c.handle(body)
		if err != nil {
			c.s.inFlight.Release(weight)
			return err
		}
		p.weight = weight
		pending <- p
		if c.closing {
			return errClosing
		}
	}
}

func (c *conn) handle(body []byte) (pendingReply, error) {
	start := time.Now()
	h, req, err := decodeRequest(body)
	if errors.Is(err, errUnsupportedAPIVersions) {
		// Answer v0 with UNSUPPORTED_VERSION so the client retries lower.
		wait, _ := ready(apiVersionsResponse(0, unsupportedVersion), nil)
		return pendingReply{h: h, wait: wait, start: start}, nil
	}
	if err != nil {
		return pendingReply{}, err
	}
	c.clientID = h.clientID
	if !c.authenticated() && !preAuthAPIs[h.key] {
		return pendingReply{}, fmt.Errorf("%s before SASL authentication", kmsg.NameForKey(h.key))
	}
	if denial := c.groupDenial(req); denial != nil {
		wait, _ := ready(denial, nil)
		return pendingReply{h: h, wait: wait, start: start}, nil
	}
	req, addDenied := c.withoutDeniedTopics(req)
	wait, err := apis[h.key].handle(c, req)
	if addDenied != nil && err == nil {
		inner := wait
		wait = func() (kmsg.Response, error) {
			resp, err := inner()
			if err == nil && resp != nil {
				addDenied(resp)
			}
			return resp, err
		}
	}
	return pendingReply{h: h, wait: wait, start: start}, err
}

var errUnsupportedAPIVersions = errors.New("ApiVersions at an unsupported version")

// errClosing ends a connection after a failed authentication, once its
// answer is written.
var errClosing = errors.New("closing after a failed authentication")

// preAuthAPIs are served before authentication.
var preAuthAPIs = map[int16]bool{
	kmsg.ApiVersions.Int16():      true,
	kmsg.SASLHandshake.Int16():    true,
	kmsg.SASLAuthenticate.Int16(): true,
}

// decodeRequest parses a frame body: header, then the request of a
// registered API at a registered version. It allocates nothing sized by a
// field it has not checked against the bytes left (kmsg checks array
// counts the same way).
func decodeRequest(body []byte) (header, kmsg.Request, error) {
	h, rest, err := parseHeader(body)
	if err != nil {
		return h, nil, err
	}
	a, known := apis[h.key]
	if !known {
		return h, nil, fmt.Errorf("unsupported API key %d", h.key)
	}
	if h.version < a.min || h.version > a.max {
		if h.key == kmsg.ApiVersions.Int16() {
			return h, nil, errUnsupportedAPIVersions
		}
		return h, nil, fmt.Errorf("API key %d version %d outside %d–%d", h.key, h.version, a.min, a.max)
	}
	req := kmsg.RequestForKey(h.key)
	req.SetVersion(h.version)
	if req.IsFlexible() {
		if rest, err = skipTags(rest); err != nil {
			return h, nil, err
		}
	}
	if err := req.ReadFrom(rest); err != nil {
		return h, nil, fmt.Errorf("decode API key %d v%d: %w", h.key, h.version, err)
	}
	return h, req, nil
}

// unsupportedVersion is UNSUPPORTED_VERSION.
const unsupportedVersion = 35

// parseHeader reads key, version, correlation id and the nullable client
// id, returning the bytes after them.
func parseHeader(b []byte) (header, []byte, error) {
	if len(b) < 10 {
		return header{}, nil, errBadFrame
	}
	h := header{
		key:         int16(binary.BigEndian.Uint16(b)),
		version:     int16(binary.BigEndian.Uint16(b[2:])),
		correlation: int32(binary.BigEndian.Uint32(b[4:])),
	}
	idLen := int16(binary.BigEndian.Uint16(b[8:]))
	rest := b[10:]
	if idLen > 0 {
		if int(idLen) > len(rest) {
			return header{}, nil, errBadFrame
		}
		h.clientID = string(rest[:idLen])
		rest = rest[idLen:]
	}
	return h, rest, nil
}

// skipTags skips a tagged-fields section (the request header v2's).
func skipTags(b []byte) ([]byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, errBadFrame
	}
	b = b[w:]
	for ; n > 0; n-- {
		if _, w = binary.Uvarint(b); w <= 0 {
			return nil, errBadFrame
		}
		b = b[w:]
		size, w := binary.Uvarint(b)
		if w <= 0 || size > uint64(len(b)-w) {
			return nil, errBadFrame
		}
		b = b[w+int(size):]
	}
	return b, nil
}

// write sends a response frame. Flexible responses carry an empty tagged
// field section in their header, except ApiVersions, whose header never
// does (clients must parse it before they know what the broker speaks).
func (c *conn) write(h header, resp kmsg.Response) error {
	buf := make([]byte, 8, 256)
	binary.BigEndian.PutUint32(buf[4:], uint32(h.correlation))
	if resp.IsFlexible() && h.key != kmsg.ApiVersions.Int16() {
		buf = append(buf, 0)
	}
	buf = resp.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.FrameTimeout))
	_, err := c.nc.Write(buf)
	return err
}
