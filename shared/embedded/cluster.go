package embedded

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// ClusterConfig configures a JetStream cluster of embedded servers on loopback, for local
// trials and fault tests.
type ClusterConfig struct {
	// Nodes is the number of servers (3 or 5 for a quorum that survives a node loss).
	Nodes int
	// StoreDir holds one sub-directory per node.
	StoreDir string
	// ClientPorts are the client ports of the nodes; nil picks free ones. Use fixed ports to
	// restart a cluster with the same addresses.
	ClientPorts []int
	// RoutePorts are the cluster ports; nil picks free ones.
	RoutePorts []int
	Host       string // default 127.0.0.1
	// Hosts, when set, gives each node its own address (127.0.0.1, 127.0.0.2, ...: every node
	// on the same ports, as pods of a StatefulSet are); it overrides Host.
	Hosts []string
	// MonitorPorts, when set, serve each node's HTTP monitoring endpoint (0: a free port).
	MonitorPorts []int
	SyncAlways   bool
	Name         string // cluster name, default "maint"

	// TLS and Nkeys secure the client listener of every node, as Config's do for one server.
	// Connect (in-process) skips TLS but authenticates.
	TLS   *tls.Config
	Nkeys []*server.NkeyUser
	// RouteTLS is the mutual TLS of the routes between the nodes. Nil: NewRouteTLS's (an
	// authority in memory) when TLS or Nkeys are set, so that a secured cluster never takes a
	// route without a certificate (a route is not subject to Nkeys: a rogue node would see and
	// send everything); plain routes otherwise.
	RouteTLS *tls.Config
}

// Cluster is a running cluster of embedded servers. Servers[i] is nil while node i is killed.
type Cluster struct {
	Servers []*Server
	cfg     ClusterConfig
	mu      sync.Mutex // guards Servers against Kill/Restart during InProcessConn, and next
	next    int        // the node InProcessConn tries first
}

// StartCluster starts the nodes, routes them together and waits until JetStream has a meta
// leader (about 5 s on loopback).
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if cfg.Nodes < 1 {
		return nil, errors.New("embedded: cluster needs at least one node")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Hosts != nil && len(cfg.Hosts) != cfg.Nodes {
		return nil, errors.New("embedded: one host per node")
	}
	if cfg.MonitorPorts != nil && len(cfg.MonitorPorts) != cfg.Nodes {
		return nil, errors.New("embedded: one monitor port per node")
	}
	if cfg.Name == "" {
		cfg.Name = "maint"
	}
	var err error
	if cfg.ClientPorts == nil && cfg.Hosts == nil {
		if cfg.ClientPorts, err = freePorts(cfg.Host, cfg.Nodes); err != nil {
			return nil, err
		}
	}
	if cfg.RoutePorts == nil && cfg.Hosts == nil {
		if cfg.RoutePorts, err = freePorts(cfg.Host, cfg.Nodes); err != nil {
			return nil, err
		}
	}
	if len(cfg.ClientPorts) != cfg.Nodes || len(cfg.RoutePorts) != cfg.Nodes {
		return nil, errors.New("embedded: one client and one route port per node")
	}
	if err := validateSecurity(cfg.TLS, cfg.Nkeys); err != nil {
		return nil, err
	}
	if err := validateRouteTLS(cfg.RouteTLS); err != nil {
		return nil, err
	}
	if cfg.RouteTLS == nil && (cfg.TLS != nil || cfg.Nkeys != nil) {
		if cfg.RouteTLS, err = NewRouteTLS(); err != nil {
			return nil, err
		}
	}
	c := &Cluster{cfg: cfg}
	for i := 0; i < cfg.Nodes; i++ {
		s, err := c.startNode(i)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	if err := c.WaitReady(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) nodeOptions(i int) (*server.Options, error) {
	var routes []*url.URL
	for j, p := range c.cfg.RoutePorts {
		if j == i {
			continue
		}
		u, err := url.Parse(fmt.Sprintf("nats-route://%s", net.JoinHostPort(c.host(j), strconv.Itoa(p))))
		if err != nil {
			return nil, err
		}
		routes = append(routes, u)
	}
	opts := &server.Options{
		ServerName:   fmt.Sprintf("%s-%d", c.cfg.Name, i),
		Host:         c.host(i),
		Port:         c.cfg.ClientPorts[i],
		JetStream:    true,
		StoreDir:     filepath.Join(c.cfg.StoreDir, fmt.Sprintf("node-%d", i)),
		NoSigs:       true,
		NoLog:        true,
		SyncAlways:   c.cfg.SyncAlways,
		MaxPayload:   1 << 20,
		PingInterval: PingInterval,
		MaxPingsOut:  PingMax,
		Cluster: server.ClusterOpts{
			Name: c.cfg.Name,
			Host: c.host(i),
			Port: c.cfg.RoutePorts[i],
		},
		Routes: routes,
		Nkeys:  c.cfg.Nkeys,
	}
	clientTLS(opts, c.cfg.TLS)
	if c.cfg.RouteTLS != nil {
		opts.Cluster.TLSConfig = c.cfg.RouteTLS.Clone()
		opts.Cluster.TLSTimeout = tlsTimeout
	}
	if c.cfg.MonitorPorts != nil {
		opts.HTTPHost, opts.HTTPPort = c.host(i), c.cfg.MonitorPorts[i]
		if opts.HTTPPort == 0 {
			opts.HTTPPort = -1 // any free port
		}
	}
	return opts, nil
}

// host is node i's address.
func (c *Cluster) host(i int) string {
	if c.cfg.Hosts != nil {
		return c.cfg.Hosts[i]
	}
	return c.cfg.Host
}

func (c *Cluster) startNode(i int) (*Server, error) {
	opts, err := c.nodeOptions(i)
	if err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded: node %d: %w", i, err)
	}
	go s.Start()
	// Generous: a busy machine (the race detector, other tests) can take long to start a node.
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("%w: node %d", ErrNotReady, i)
	}
	return &Server{Server: s, listens: true}, nil
}

// URLs is the comma-separated client URL list of the nodes (for --server / NATS_URL): tls://
// when the cluster has TLS.
func (c *Cluster) URLs() string {
	scheme := "nats"
	if c.cfg.TLS != nil {
		scheme = "tls"
	}
	urls := make([]string, 0, len(c.cfg.ClientPorts))
	for i, p := range c.cfg.ClientPorts {
		urls = append(urls, scheme+"://"+net.JoinHostPort(c.host(i), strconv.Itoa(p)))
	}
	return strings.Join(urls, ",")
}

// InProcessConn makes Cluster a nats.InProcessConnProvider: each (re)connection goes, without
// TCP or TLS, to the next running node in turn, so that a connection outlives the loss of its
// node as one over the URL list would.
func (c *Cluster) InProcessConn() (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.Servers)
	for k := range n {
		i := (c.next + k) % n
		s := c.Servers[i]
		if s == nil || !s.Running() {
			continue
		}
		if conn, err := s.Server.InProcessConn(); err == nil {
			c.next = (i + 1) % n
			return conn, nil
		}
	}
	return nil, fmt.Errorf("%w: no node of the cluster is running", ErrNotReady)
}

// Connect opens an in-process client connection to the cluster (see InProcessConn); on a
// cluster with Nkeys, pass the user's credentials.
func (c *Cluster) Connect(opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.InProcessServer(c), nats.MaxReconnects(-1)}, opts...)
	nc, err := nats.Connect(c.InProcessURL(), opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded: connect to the cluster: %w", err)
	}
	return nc, nil
}

// InProcessURL is the URL to pass to nats.Connect with nats.InProcessServer(c): nats://, as
// for one server (only the scheme matters).
func (c *Cluster) InProcessURL() string {
	return fmt.Sprintf("nats://%s:%d", c.cfg.Host, c.cfg.ClientPorts[0])
}

// Kill shuts node i down abruptly (its store stays); Restart brings it back on the same store.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	s := c.Servers[i]
	c.Servers[i] = nil
	c.mu.Unlock()
	if s != nil {
		s.Stop()
	}
}

// Restart starts node i again on its store and ports.
func (c *Cluster) Restart(i int) error {
	s, err := c.startNode(i)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.Servers[i] = s
	c.mu.Unlock()
	return nil
}

// WaitReady polls until JetStream has a meta leader and every running node is current with
// it, so that streams of as many replicas as nodes can be created. It asks the servers, not a
// client: it needs no credentials on a secured cluster.
func (c *Cluster) WaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if c.metaReady() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: no JetStream meta leader that every node follows", ErrNotReady)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) metaReady() bool {
	c.mu.Lock()
	servers := append([]*Server(nil), c.Servers...)
	c.mu.Unlock()
	leader := false
	for _, s := range servers {
		if s == nil {
			continue
		}
		if !s.JetStreamIsCurrent() {
			return false
		}
		leader = leader || s.JetStreamIsLeader()
	}
	return leader
}

// Stop shuts every node down.
func (c *Cluster) Stop() {
	for i := range c.Servers {
		c.Kill(i)
	}
}

// Leader returns the index of the node that leads the named stream, or -1.
func (c *Cluster) Leader(stream string) int {
	for i, s := range c.Servers {
		if s == nil {
			continue
		}
		if s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

func freePorts(host string, n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("embedded: free port: %w", err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// MoveLeader asks the leader of a stream to step down in favour of node i, so that a test can
// put the leaders of several streams on one node.
func (c *Cluster) MoveLeader(ctx context.Context, nc *nats.Conn, stream string, i int) error {
	if c.Leader(stream) == i {
		return nil
	}
	req := fmt.Sprintf(`{"placement":{"preferred":%q}}`, fmt.Sprintf("%s-%d", c.cfg.Name, i))
	resp, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, []byte(req))
	if err != nil {
		return fmt.Errorf("embedded: step down %s: %w", stream, err)
	}
	if strings.Contains(string(resp.Data), `"error"`) {
		return fmt.Errorf("embedded: step down %s: %s", stream, resp.Data)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.Leader(stream) != i {
		if time.Now().After(deadline) {
			return fmt.Errorf("embedded: %s leader did not move to node %d", stream, i)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}
