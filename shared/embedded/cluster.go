package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
}

// Cluster is a running cluster of embedded servers.
type Cluster struct {
	Servers []*Server
	cfg     ClusterConfig
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
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("%w: node %d", ErrNotReady, i)
	}
	return &Server{Server: s, listens: true}, nil
}

// URLs is the comma-separated client URL list of the running nodes (for --server / NATS_URL).
func (c *Cluster) URLs() string {
	urls := make([]string, 0, len(c.cfg.ClientPorts))
	for i, p := range c.cfg.ClientPorts {
		urls = append(urls, "nats://"+net.JoinHostPort(c.host(i), strconv.Itoa(p)))
	}
	return strings.Join(urls, ",")
}

// Kill shuts node i down abruptly (its store stays); Restart brings it back on the same store.
func (c *Cluster) Kill(i int) {
	if s := c.Servers[i]; s != nil {
		s.Stop()
		c.Servers[i] = nil
	}
}

// Restart starts node i again on its store and ports.
func (c *Cluster) Restart(i int) error {
	s, err := c.startNode(i)
	if err != nil {
		return err
	}
	c.Servers[i] = s
	return nil
}

// WaitReady polls until JetStream answers account info (a meta leader exists).
func (c *Cluster) WaitReady(ctx context.Context) error {
	nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("embedded: connect to cluster: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.AccountInfo(actx)
		acancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: no JetStream meta leader: %v", ErrNotReady, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
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
