package local

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"maintsignals/test/testenv"
)

func TestPlanCluster_Ports(t *testing.T) {
	// Recorded ports are reused; one in use fails at once, naming it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port
	free := []int{testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)}
	saved := &Layout{Nodes: 3, Host: "127.0.0.1", ClientPorts: free, RoutePorts: []int{free[0], free[1], busy}}
	_, _, err = PlanCluster("127.0.0.1", 0, 3, saved)
	if err == nil || !strings.Contains(err.Error(), "node 2 route port") || !strings.Contains(err.Error(), strconv.Itoa(busy)) {
		t.Errorf("PlanCluster with a busy recorded port: %v", err)
	}
	saved.RoutePorts[2] = free[2]
	clients, routes, err := PlanCluster("127.0.0.1", 0, 3, saved)
	if err != nil || !slices.Equal(clients, free) || !slices.Equal(routes, free) {
		t.Errorf("PlanCluster with recorded ports = %v %v %v", clients, routes, err)
	}
	// Port 0 and nothing recorded: free ports, picked when the cluster starts.
	if clients, routes, err := PlanCluster("127.0.0.1", 0, 3, nil); clients != nil || routes != nil || err != nil {
		t.Errorf("PlanCluster(0, nil) = %v %v %v", clients, routes, err)
	}
}

func TestCheckDataMode_RefusesAStoreOfAnotherSetup(t *testing.T) {
	single := t.TempDir()
	if err := os.MkdirAll(filepath.Join(single, "jetstream"), 0o750); err != nil {
		t.Fatal(err)
	}
	cluster := t.TempDir()
	want := Layout{Nodes: 3, Host: "127.0.0.1", ClientPorts: []int{1, 2, 3}, RoutePorts: []int{4, 5, 6}}
	if err := WriteLayout(cluster, want); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		data  string
		nodes int
		want  string
	}{
		{single, 3, "holds the store of a single server"},
		{cluster, 1, "holds a 3-node cluster"},
		{cluster, 5, "run `maintctl up --nodes 3`"},
	} {
		if _, err := CheckDataMode(tt.data, tt.nodes); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CheckDataMode(%s, %d) = %v, want %q", tt.data, tt.nodes, err, tt.want)
		}
	}
	if got, err := CheckDataMode(cluster, 3); err != nil || got == nil || !slices.Equal(got.RoutePorts, want.RoutePorts) {
		t.Errorf("CheckDataMode of its own cluster = %+v, %v", got, err)
	}
	if got, err := CheckDataMode(t.TempDir(), 1); err != nil || got != nil {
		t.Errorf("CheckDataMode of a new directory = %+v, %v", got, err)
	}
}

func TestNewPlan_ChecksBeforeAnythingStarts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().String()
	for _, tt := range []struct {
		nodes           int
		listen, monitor string
		want            string
	}{
		{2, "127.0.0.1:0", "", "use 1, or 3 or 5"},
		{1, "nohost", "", "want host:port"},
		{1, busy, "", "is another `maintctl up` or NATS server running?"},
		{3, ":0", "", "a cluster needs a host"},
		{1, "127.0.0.1:0", "8222", "--monitor-listen"},
		{3, "127.0.0.1:0", "127.0.0.1:65535", "bad port"},
	} {
		if _, err := NewPlan(tt.nodes, tt.listen, t.TempDir(), tt.monitor); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewPlan(%d, %q, %q) = %v, want %q", tt.nodes, tt.listen, tt.monitor, err, tt.want)
		}
	}
	p, err := NewPlan(3, "127.0.0.1:0", t.TempDir(), "127.0.0.1:8300")
	if err != nil || p.Host != "127.0.0.1" || p.Clients != nil || !slices.Equal(p.MonitorPorts, []int{8300, 8301, 8302}) {
		t.Errorf("NewPlan of a cluster on free ports = %+v, %v", p, err)
	}
	p, err = NewPlan(1, "127.0.0.1:0", t.TempDir(), "")
	if _, port, _ := net.SplitHostPort(p.Listen); err != nil || port == "0" || port == "" {
		t.Errorf("NewPlan of one server on port 0 = %+v, %v: want a free port chosen", p, err)
	}
}

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true, "0.0.0.0": false, "10.0.0.1": false, "": false} {
		if IsLoopback(host) != want {
			t.Errorf("IsLoopback(%q) = %v", host, !want)
		}
	}
}

func TestLock_OneUpPerDataDirectory(t *testing.T) {
	dir := t.TempDir()
	release, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(dir); err == nil || !strings.Contains(err.Error(), "in use by another `maintctl up`") || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Errorf("second Lock = %v, want in use, naming the pid", err)
	}
	release()
	again, err := Lock(dir)
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	again()
}
