// Package local plans where the NATS of `maintctl up` runs on this machine, before anything
// starts: one embedded server or a cluster of embedded servers on loopback, its ports, and the
// data directory that keeps the store (and, for a cluster, the node count and ports, so that a
// restart comes back on the same addresses). A port in use or a data directory of another
// setup fails here, at once and with what to do. Security is how that NATS is secured: the
// TLS and the users of up's flags, and up's own throwaway keys for its connections.
package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// Names and layout of the local stack.
const (
	// ServerName is the name of the one server `up` embeds. It must not change between runs
	// on one data directory.
	ServerName = "maintctl-0"
	// ClusterName names the cluster; its servers are maintctl-0, maintctl-1, ... The server
	// names identify the JetStream peers in the stores: they never change on one --data.
	ClusterName = "maintctl"
	// LayoutFile, under --data, records the node count and ports of the cluster.
	LayoutFile = "cluster.json"
	// RoutePortOffset: with --listen port P, node i takes client port P+i and route port
	// P+RoutePortOffset+i.
	RoutePortOffset = 100
)

// Layout is the content of LayoutFile.
type Layout struct {
	Nodes       int    `json:"nodes"`
	Host        string `json:"host"`
	ClientPorts []int  `json:"clientPorts"`
	RoutePorts  []int  `json:"routePorts"`
}

// ReadLayout reads LayoutFile under data; nil when there is none.
func ReadLayout(data string) (*Layout, error) {
	path := filepath.Join(data, LayoutFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var l Layout
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("read %s: %w (remove it to pick ports afresh)", path, err)
	}
	if l.Nodes < 1 || len(l.ClientPorts) != l.Nodes || len(l.RoutePorts) != l.Nodes {
		return nil, fmt.Errorf("read %s: %d nodes with %d client and %d route ports (remove it to pick ports afresh)", path, l.Nodes, len(l.ClientPorts), len(l.RoutePorts))
	}
	return &l, nil
}

// WriteLayout writes LayoutFile under data, atomically.
func WriteLayout(data string, l Layout) error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(data, LayoutFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o640); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// CheckDataMode refuses a data directory that holds the store of another setup: a single
// server keeps its store in DIR/jetstream, a cluster in DIR/node-N with DIR/cluster.json.
// Starting the other way would come up empty, as if every record were lost. It returns the
// recorded layout of a cluster, if any.
func CheckDataMode(data string, nodes int) (*Layout, error) {
	layout, err := ReadLayout(data)
	if err != nil {
		return nil, err
	}
	if nodes == 1 {
		if layout != nil {
			return nil, fmt.Errorf("--data %s holds a %d-node cluster (%s): run `maintctl up --nodes %d`, or use another --data", data, layout.Nodes, LayoutFile, layout.Nodes)
		}
		return nil, nil
	}
	if _, err := os.Stat(filepath.Join(data, "jetstream")); err == nil {
		return nil, fmt.Errorf("--data %s holds the store of a single server: run `maintctl up` without --nodes, or use another --data", data)
	}
	if layout != nil && layout.Nodes != nodes {
		return nil, fmt.Errorf("--data %s holds a %d-node cluster (%s): run `maintctl up --nodes %d`, or use another --data", data, layout.Nodes, LayoutFile, layout.Nodes)
	}
	return layout, nil
}

// PlanCluster chooses the ports of the nodes: from the --listen port P, P+i for clients and
// P+RoutePortOffset+i for routes; with port 0, the ones the layout recorded, or nil (free
// ports) the first time.
func PlanCluster(host string, port, nodes int, saved *Layout) (clients, routes []int, err error) {
	switch {
	case port != 0:
		if last := port + RoutePortOffset + nodes - 1; last > 65535 {
			return nil, nil, fmt.Errorf("--listen port %d: the cluster needs ports up to %d; use a lower port", port, last)
		}
		for i := range nodes {
			clients = append(clients, port+i)
			routes = append(routes, port+RoutePortOffset+i)
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
			if _, err := ListenCheck(net.JoinHostPort(host, strconv.Itoa(p.port))); err != nil {
				return nil, nil, fmt.Errorf("node %d %s port: %w", i, p.what, err)
			}
		}
	}
	return clients, routes, nil
}

// Plan is where the NATS side of `up` runs, checked before anything starts.
type Plan struct {
	Nodes int
	// One server: Listen is its checked host:port (port 0 resolved to a free one).
	Listen string
	// A cluster: Host and the ports of each node (nil: free ones).
	Host            string
	Clients, Routes []int
	// Monitor is the monitoring host:port ("" for none); MonitorPorts the port of each node
	// of a cluster (0: a free one).
	Monitor      string
	MonitorPorts []int
}

// NewPlan checks the node count, the listen address (host:port) and the data directory against
// each other, and that the ports are free.
func NewPlan(nodes int, listen, data, monitor string) (Plan, error) {
	p := Plan{Nodes: nodes}
	if err := CheckNodes(nodes); err != nil {
		return p, err
	}
	host, port, err := ParseListen(listen)
	if err != nil {
		return p, err
	}
	saved, err := CheckDataMode(data, nodes)
	if err != nil {
		return p, err
	}
	if nodes == 1 {
		if p.Listen, err = ListenCheck(listen); err != nil {
			return p, fmt.Errorf("--listen %s: %w", listen, err)
		}
	} else {
		if host == "" {
			return p, fmt.Errorf("--listen %q: a cluster needs a host, e.g. 127.0.0.1:4222", listen)
		}
		p.Host = host
		if p.Clients, p.Routes, err = PlanCluster(host, port, nodes, saved); err != nil {
			return p, err
		}
	}
	if monitor != "" {
		p.Monitor = monitor
		if p.MonitorPorts, err = monitorPorts(monitor, nodes); err != nil {
			return p, err
		}
	}
	return p, nil
}

// CheckNodes accepts 1 server, or 3 or 5 for a cluster with a quorum.
func CheckNodes(nodes int) error {
	switch nodes {
	case 1, 3, 5:
		return nil
	}
	return fmt.Errorf("--nodes %d: use 1, or 3 or 5 for a local JetStream cluster", nodes)
}

// monitorPorts reads the monitoring address: node i of a cluster serves on its port plus i
// (every node on a free port with port 0).
func monitorPorts(monitor string, nodes int) ([]int, error) {
	_, mp, err := net.SplitHostPort(monitor)
	if err != nil {
		return nil, fmt.Errorf("--monitor-listen %q: want host:port, e.g. 127.0.0.1:8222", monitor)
	}
	if nodes == 1 {
		return nil, nil
	}
	port, err := strconv.Atoi(mp)
	if err != nil || port < 0 || port+nodes > 65536 {
		return nil, fmt.Errorf("--monitor-listen %q: bad port", monitor)
	}
	out := make([]int, nodes)
	for i := range out {
		if port != 0 {
			out[i] = port + i
		}
	}
	return out, nil
}

// ParseListen reads --listen as host:port.
func ParseListen(listen string) (host string, port int, err error) {
	host, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("--listen %q: want host:port, e.g. 127.0.0.1:4222", listen)
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("--listen %q: bad port", listen)
	}
	return host, port, nil
}

// ListenCheck listens on addr once, so that a port in use fails at once with a clear message
// (nats-server would only time out), and returns the address it bound: port 0 becomes a free
// port (nats-server itself reads 0 as its default, 4222).
func ListenCheck(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return "", fmt.Errorf("%w (is another `maintctl up` or NATS server running? use another --listen)", err)
	}
	if err != nil {
		return "", fmt.Errorf("%w (use another --listen)", err)
	}
	bound := ln.Addr().String()
	_ = ln.Close()
	if _, port, _ := net.SplitHostPort(addr); port != "0" {
		return addr, nil
	}
	return bound, nil
}

// IsLoopback reports whether host is this machine only.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
