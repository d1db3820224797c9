package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	natsconf "maintsignals/infra/nats"
	"maintsignals/shared/embedded"
	"maintsignals/shared/natsconn"
)

// Layout of a local cluster (`maintctl up --nodes N`).
const (
	// clusterName names the cluster; its servers are maintctl-0, maintctl-1, ... The server
	// names identify the JetStream peers in the stores: they never change on one --data.
	clusterName = "maintctl"
	// clusterFile, under --data, records the node count and ports of the cluster, so that a
	// restart comes back on the same addresses (and NATS_URL keeps working).
	clusterFile = "cluster.json"
	// routePortOffset: with --listen port P, node i takes client port P+i and route port
	// P+routePortOffset+i.
	routePortOffset = 100
)

// clusterLayout is the content of cluster.json.
type clusterLayout struct {
	Nodes       int    `json:"nodes"`
	Host        string `json:"host"`
	ClientPorts []int  `json:"clientPorts"`
	RoutePorts  []int  `json:"routePorts"`
}

// readClusterLayout reads cluster.json under data; nil when there is none.
func readClusterLayout(data string) (*clusterLayout, error) {
	path := filepath.Join(data, clusterFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var l clusterLayout
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("read %s: %w (remove it to pick ports afresh)", path, err)
	}
	if l.Nodes < 1 || len(l.ClientPorts) != l.Nodes || len(l.RoutePorts) != l.Nodes {
		return nil, fmt.Errorf("read %s: %d nodes with %d client and %d route ports (remove it to pick ports afresh)", path, l.Nodes, len(l.ClientPorts), len(l.RoutePorts))
	}
	return &l, nil
}

// writeClusterLayout writes cluster.json under data, atomically.
func writeClusterLayout(data string, l clusterLayout) error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(data, clusterFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o640); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// checkDataMode refuses a --data directory that holds the store of another setup: a single
// server keeps its store in DIR/jetstream, a cluster in DIR/node-N with DIR/cluster.json.
// Starting the other way would come up empty, as if every record were lost.
func checkDataMode(data string, nodes int) (*clusterLayout, error) {
	layout, err := readClusterLayout(data)
	if err != nil {
		return nil, err
	}
	if nodes == 1 {
		if layout != nil {
			return nil, fmt.Errorf("--data %s holds a %d-node cluster (%s): run `maintctl up --nodes %d`, or use another --data", data, layout.Nodes, clusterFile, layout.Nodes)
		}
		return nil, nil
	}
	if _, err := os.Stat(filepath.Join(data, "jetstream")); err == nil {
		return nil, fmt.Errorf("--data %s holds the store of a single server: run `maintctl up` without --nodes, or use another --data", data)
	}
	if layout != nil && layout.Nodes != nodes {
		return nil, fmt.Errorf("--data %s holds a %d-node cluster (%s): run `maintctl up --nodes %d`, or use another --data", data, layout.Nodes, clusterFile, layout.Nodes)
	}
	return layout, nil
}

// planCluster chooses the ports of the nodes: from the --listen port P, P+i for clients and
// P+100+i for routes; with port 0, the ones cluster.json recorded, or nil (free ports) the
// first time.
func planCluster(host string, port, nodes int, saved *clusterLayout) (clients, routes []int, err error) {
	switch {
	case port != 0:
		if last := port + routePortOffset + nodes - 1; last > 65535 {
			return nil, nil, fmt.Errorf("--listen port %d: the cluster needs ports up to %d; use a lower port", port, last)
		}
		for i := range nodes {
			clients = append(clients, port+i)
			routes = append(routes, port+routePortOffset+i)
		}
	case saved != nil:
		clients, routes = saved.ClientPorts, saved.RoutePorts
	default:
		return nil, nil, nil
	}
	// Listen once on each: a port in use fails at once with a clear message (nats-server
	// would only time out).
	for i := range nodes {
		for _, p := range []struct {
			what string
			port int
		}{{"client", clients[i]}, {"route", routes[i]}} {
			if _, err := listenCheck(net.JoinHostPort(host, strconv.Itoa(p.port))); err != nil {
				return nil, nil, fmt.Errorf("node %d %s port: %w", i, p.what, err)
			}
		}
	}
	return clients, routes, nil
}

// natsPlan is where the NATS side of `up` runs, checked before anything starts.
type natsPlan struct {
	nodes int
	// one server: listen is its checked host:port (port 0 resolved to a free one).
	listen string
	// a cluster: host and the ports of each node (nil: free ones).
	host            string
	clients, routes []int
	// monitor is --monitor-listen ("" for none).
	monitor string
}

// planNATS checks --nodes, --listen (read as host and port) and --data against each other, and
// that the ports are free.
func planNATS(f upFlags, host string, port int, data string) (natsPlan, error) {
	p := natsPlan{nodes: f.nodes}
	saved, err := checkDataMode(data, f.nodes)
	if err != nil {
		return p, err
	}
	if f.nodes == 1 {
		p.listen, err = listenCheck(f.listen)
		if err != nil {
			return p, fmt.Errorf("--listen %s: %w", f.listen, err)
		}
		return p, nil
	}
	if host == "" {
		return p, fmt.Errorf("--listen %q: a cluster needs a host, e.g. 127.0.0.1:4222", f.listen)
	}
	p.host = host
	p.clients, p.routes, err = planCluster(host, port, f.nodes, saved)
	return p, err
}

// startNATS starts the server or the cluster of the plan, secured by sec (TLS and users on
// every node; a cluster's routes in mutual TLS then), and connects provisioning and the
// functions to it in-process.
func (a *app) startNATS(ctx context.Context, p natsPlan, data string, syncAlways bool, sec *upSecurity) (*natsRun, error) {
	if p.nodes == 1 {
		srv, err := embedded.Start(embedded.Config{Name: serverName, StoreDir: data, Listen: p.listen, SyncAlways: syncAlways, TLS: sec.tls, Nkeys: sec.nkeys, Monitor: p.monitor})
		if err != nil {
			return nil, fmt.Errorf("start NATS on %s: %w (is another `maintctl up` or NATS server using that port? use another --listen or --monitor-listen)", p.listen, err)
		}
		a.printf("NATS with JetStream listening on %s\n", srv.ClientURL())
		if m := srv.MonitorURL(); m != "" {
			a.printf("NATS monitoring on %s (KEDA's query: %s/jsz?acc=$G&config=true&consumers=true)\n", m, m)
		}
		for _, line := range sec.describe() {
			a.printf("  %s\n", line)
		}
		return a.connectUp(ctx, srv.ClientURL(), srv.InProcessURL(), srv.Server, sec, srv.Stop)
	}

	a.log.Info("starting a local JetStream cluster; electing its meta leader takes a few seconds", "nodes", p.nodes, "data", data)
	var monitorPorts []int
	if p.monitor != "" {
		_, mp, err := net.SplitHostPort(p.monitor)
		port, perr := strconv.Atoi(mp)
		if err != nil || perr != nil || port < 0 || port+p.nodes > 65536 {
			return nil, fmt.Errorf("--monitor-listen %q: bad port", p.monitor)
		}
		for i := 0; i < p.nodes; i++ {
			if port == 0 {
				monitorPorts = append(monitorPorts, 0)
			} else {
				monitorPorts = append(monitorPorts, port+i)
			}
		}
	}
	c, err := embedded.StartCluster(ctx, embedded.ClusterConfig{
		Nodes: p.nodes, StoreDir: data, ClientPorts: p.clients, RoutePorts: p.routes,
		Host: p.host, SyncAlways: syncAlways, Name: clusterName, MonitorPorts: monitorPorts,
		TLS: sec.tls, Nkeys: sec.nkeys,
	})
	if err != nil {
		return nil, fmt.Errorf("start a %d-node NATS cluster: %w", p.nodes, err)
	}
	layout := clusterLayout{Nodes: p.nodes, Host: p.host}
	a.printf("NATS JetStream cluster %q of %d nodes:\n", clusterName, p.nodes)
	for i, s := range c.Servers {
		rp := s.ClusterAddr().Port
		layout.ClientPorts = append(layout.ClientPorts, s.Addr().(*net.TCPAddr).Port)
		layout.RoutePorts = append(layout.RoutePorts, rp)
		a.printf("  %s listening on %s (routes on port %d, store %s)\n", s.Name(), s.ClientURL(), rp, filepath.Join(data, "node-"+strconv.Itoa(i)))
		if m := s.MonitorURL(); m != "" {
			a.printf("    monitoring on %s\n", m)
		}
	}
	lines := sec.describe()
	if sec.enabled() {
		lines = append(lines, "routes: mutual TLS with a certificate authority made in memory at this start: only these nodes can join")
	}
	for _, line := range lines {
		a.printf("  %s\n", line)
	}
	if err := writeClusterLayout(data, layout); err != nil {
		c.Stop()
		return nil, err
	}
	// In-process, the connections move to another node when theirs goes, as they would over
	// the URL list.
	return a.connectUp(ctx, c.URLs(), c.InProcessURL(), c, sec, c.Stop)
}

// connectUp opens up's own in-process connections to a server or a cluster (provider) and
// makes the natsRun that closes them and then calls stopServers.
func (a *app) connectUp(ctx context.Context, urls, inProcessURL string, provider nats.InProcessConnProvider, sec *upSecurity, stopServers func()) (*natsRun, error) {
	var conns []*natsconn.Conn
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	// Without users, one connection serves both, as the server has no permissions.
	for _, c := range []struct {
		name string
		kp   nkeys.KeyPair
		role natsconf.Role
	}{{"maintctl-up", sec.operator, natsconf.RoleOperator}, {"maintctl-up-functions", sec.function, natsconf.RoleFunction}} {
		if c.kp == nil && len(conns) == 1 {
			break
		}
		conn, err := a.connectInProcess(ctx, inProcessURL, provider, c.name, c.kp, c.role)
		if err != nil {
			closeAll()
			stopServers()
			return nil, err
		}
		conns = append(conns, conn)
	}
	return &natsRun{
		urls:      urls,
		provision: conns[0].JS,
		functions: conns[len(conns)-1].JS,
		stop:      sync.OnceFunc(func() { closeAll(); stopServers() }),
	}, nil
}

// natsRun is the NATS side of `up`: one embedded server or a local cluster.
type natsRun struct {
	urls string // for NATS_URL: one URL, or the comma-separated list of a cluster
	// provision and functions are the connections of provisioning and of the functions: one
	// connection, or, on a server with users, one of the operator and one of the function role.
	provision, functions jetstream.JetStream
	stop                 func() // closes the connections and shuts the servers down (once)
}
