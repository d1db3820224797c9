package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"maintsignals/infra/local"
	natsconf "maintsignals/infra/nats"
	"maintsignals/shared/domain"
	"maintsignals/shared/embedded"
	"maintsignals/shared/natsconn"
)

// startNATS starts the server or the cluster of the plan, secured by sec (TLS and users on
// every node; a cluster's routes in mutual TLS then), and connects provisioning and the
// functions to it in-process.
func (a *app) startNATS(ctx context.Context, p local.Plan, data string, syncAlways bool, sec *local.Security, rl regionLink) (*natsRun, error) {
	if p.Nodes == 1 {
		cfg := embedded.Config{Name: local.ServerName, StoreDir: data, Listen: p.Listen, SyncAlways: syncAlways, TLS: sec.TLS, Nkeys: sec.Nkeys, Monitor: p.Monitor}
		if rl.name != "" {
			cfg.Domain, cfg.LeafRemote, cfg.LeafDeny = rl.name, rl.hub, domain.RegionPrivate
		}
		// A port in use is told at once; then the wait is the store's recovery, which takes
		// a minute or more after a crash at a million entities (performance.md).
		if err := portFree(p.Listen); err != nil {
			return nil, fmt.Errorf("start NATS on %s: %w (is another `maintctl up` or NATS server using that port? use another --listen)", p.Listen, err)
		}
		if p.Monitor != "" {
			if err := portFree(p.Monitor); err != nil {
				return nil, fmt.Errorf("start NATS monitoring on %s: %w (use another --monitor-listen)", p.Monitor, err)
			}
		}
		cfg.ReadyTimeout = recoveryTimeout
		srv, err := embedded.Start(cfg)
		if err != nil {
			return nil, fmt.Errorf("start NATS on %s: %w (is another `maintctl up` or NATS server using that port? use another --listen or --monitor-listen)", p.Listen, err)
		}
		a.printf("NATS with JetStream listening on %s\n", srv.ClientURL())
		if rl.name != "" {
			a.printf("region %s: JetStream domain %s, joining the hub at %s\n", rl.name, rl.name, rl.hub)
		}
		if m := srv.MonitorURL(); m != "" {
			a.printf("NATS monitoring on %s (KEDA's query: %s/jsz?acc=$G&config=true&consumers=true)\n", m, m)
		}
		for _, line := range sec.Describe() {
			a.printf("  %s\n", line)
		}
		return a.connectUp(ctx, srv.ClientURL(), srv.InProcessURL(), srv.Server, sec, srv.Stop)
	}

	a.log.Info("starting a local JetStream cluster; electing its meta leader takes a few seconds", "nodes", p.Nodes, "data", data)
	c, err := embedded.StartCluster(ctx, embedded.ClusterConfig{
		Nodes: p.Nodes, StoreDir: data, ClientPorts: p.Clients, RoutePorts: p.Routes,
		Host: p.Host, SyncAlways: syncAlways, Name: local.ClusterName, MonitorPorts: p.MonitorPorts,
		TLS: sec.TLS, Nkeys: sec.Nkeys,
	})
	if err != nil {
		return nil, fmt.Errorf("start a %d-node NATS cluster: %w", p.Nodes, err)
	}
	layout := local.Layout{Nodes: p.Nodes, Host: p.Host}
	a.printf("NATS JetStream cluster %q of %d nodes:\n", local.ClusterName, p.Nodes)
	for i, s := range c.Servers {
		rp := s.ClusterAddr().Port
		layout.ClientPorts = append(layout.ClientPorts, s.Addr().(*net.TCPAddr).Port)
		layout.RoutePorts = append(layout.RoutePorts, rp)
		a.printf("  %s listening on %s (routes on port %d, store %s)\n", s.Name(), s.ClientURL(), rp, filepath.Join(data, "node-"+strconv.Itoa(i)))
		if m := s.MonitorURL(); m != "" {
			a.printf("    monitoring on %s\n", m)
		}
	}
	lines := sec.Describe()
	if sec.Enabled() {
		lines = append(lines, "routes: mutual TLS with a certificate authority made in memory at this start: only these nodes can join")
	}
	for _, line := range lines {
		a.printf("  %s\n", line)
	}
	if err := local.WriteLayout(data, layout); err != nil {
		c.Stop()
		return nil, err
	}
	// In-process, the connections move to another node when theirs goes, as they would over
	// the URL list.
	return a.connectUp(ctx, c.URLs(), c.InProcessURL(), c, sec, c.Stop)
}

// connectUp opens up's own in-process connections to a server or a cluster (provider) and
// makes the natsRun that closes them and then calls stopServers.
func (a *app) connectUp(ctx context.Context, urls, inProcessURL string, provider nats.InProcessConnProvider, sec *local.Security, stopServers func()) (*natsRun, error) {
	nr := &natsRun{urls: urls, byRole: map[string]jetstream.JetStream{}}
	var conns []*natsconn.Conn
	connect := func(name string, kp nkeys.KeyPair, role natsconf.Role) (jetstream.JetStream, error) {
		conn, err := a.connectInProcess(ctx, inProcessURL, provider, name, kp, role)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			stopServers()
			return nil, err
		}
		conns = append(conns, conn)
		return conn.JS, nil
	}
	var err error
	if nr.provision, err = connect("maintctl-up", sec.Operator, natsconf.RoleOperator); err != nil {
		return nil, err
	}
	// Without users, one connection serves everything, as the server has no permissions; with
	// them, the functions of each role run on a connection of that role.
	nr.functions = nr.provision
	for _, r := range local.FunctionRoles() {
		if kp := sec.Roles[r]; kp != nil {
			if nr.byRole[string(r)], err = connect("maintctl-up-"+string(r), kp, r); err != nil {
				return nil, err
			}
		}
	}
	if js := nr.byRole[string(natsconf.RoleFunction)]; js != nil {
		nr.functions = js
	}
	nr.stop = sync.OnceFunc(func() {
		for _, c := range conns {
			c.Close()
		}
		stopServers()
	})
	return nr, nil
}

// natsRun is the NATS side of `up`: one embedded server or a local cluster.
type natsRun struct {
	urls string // for NATS_URL: one URL, or the comma-separated list of a cluster
	// provision and functions are the connections of provisioning and of the functions: one
	// connection, or, on a server with users, one of the operator and one of the function role.
	provision, functions jetstream.JetStream
	// byRole are the connections of the functions of each role, on a server with users.
	byRole map[string]jetstream.JetStream
	stop   func() // closes the connections and shuts the servers down (once)
}

// recoveryTimeout bounds the wait for the embedded server to recover its store and listen.
const recoveryTimeout = 10 * time.Minute

// portFree reports an error when addr cannot be listened on now.
func portFree(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return l.Close()
}
