package partition

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/test/testenv"
)

// Node is one nats-server process on a host of its own.
type Node struct {
	Host *Host
	Name string
	URL  string
	Proc *testenv.Proc
}

// Cluster is a JetStream cluster of nats-server processes, configured as in production
// (infra/nats/cluster.conf: sync before acknowledging, full mesh of routes) without TLS or
// users, which a partition does not concern.
type Cluster struct {
	Nodes []*Node
}

// StartCluster starts size nodes of the nats-server binary bin, each on a new host of the
// network, and waits until JetStream has a meta leader.
func StartCluster(t testing.TB, n *Net, bin string, size int) *Cluster {
	t.Helper()
	c := &Cluster{}
	for i := 0; i < size; i++ {
		h := n.AddHost(fmt.Sprintf("nats-%d", i))
		c.Nodes = append(c.Nodes, &Node{Host: h, Name: fmt.Sprintf("nats-%d", i), URL: "nats://" + h.IP + ":4222"})
	}
	dir := t.TempDir()
	for _, nd := range c.Nodes {
		var routes []string
		for _, o := range c.Nodes {
			if o != nd {
				routes = append(routes, fmt.Sprintf("    %q", "nats-route://"+o.Host.IP+":6222"))
			}
		}
		conf := fmt.Sprintf(`server_name: %q
listen: "%s:4222"
max_payload: 1048576
jetstream {
  store_dir: %q
  # Sync every write before acknowledging it, as in production.
  sync_interval: "always"
}
cluster {
  name: "maint"
  listen: "%s:6222"
  routes: [
%s
  ]
}
`, nd.Name, nd.Host.IP, filepath.Join(dir, nd.Name), nd.Host.IP, strings.Join(routes, "\n"))
		path := filepath.Join(dir, nd.Name+".conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		nd.Proc = testenv.StartProc(t, nd.Name, nd.Host.Command(bin, "-c", path))
	}
	for _, nd := range c.Nodes {
		waitDial(t, nd.Host.IP+":4222", 20*time.Second)
	}
	nc := c.Connect(t)
	js := testenv.JetStream(t, nc)
	// Ready when a stream can be placed on every node: a meta leader that answers may not know
	// all its peers yet, and provisioning would then fail with "no suitable peers".
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "READY_PROBE", Subjects: []string{"ready.probe"}, Storage: jetstream.MemoryStorage, Replicas: size})
		if err == nil {
			err = js.DeleteStream(ctx, "READY_PROBE")
		}
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("JetStream cluster not ready within a minute: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return c
}

// URLs is the comma-separated client URL list of the nodes (NATS_URL, --server).
func (c *Cluster) URLs() string {
	var us []string
	for _, nd := range c.Nodes {
		us = append(us, nd.URL)
	}
	return strings.Join(us, ",")
}

// Node returns the node named name (nil if none).
func (c *Cluster) Node(name string) *Node {
	for _, nd := range c.Nodes {
		if nd.Name == name {
			return nd
		}
	}
	return nil
}

// Connect opens a connection of the test process to the cluster, closed at cleanup. It
// pings every second so that it leaves a node cut off from it within seconds, and reconnects
// for ever.
func (c *Cluster) Connect(t testing.TB, urls ...string) *nats.Conn {
	t.Helper()
	if len(urls) == 0 {
		urls = []string{c.URLs()}
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond),
		nats.PingInterval(time.Second), nats.MaxPingsOutstanding(2), nats.Timeout(2*time.Second), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// StreamLeader is the server name of a stream's leader ("" when it has none now).
func StreamLeader(ctx context.Context, js jetstream.JetStream, stream string) string {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return ""
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil {
		return ""
	}
	return info.Cluster.Leader
}

// MoveLeader makes the named server lead the stream (a stepdown with that server preferred)
// and waits until it does.
func MoveLeader(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, stream, server string) error {
	deadline := time.Now().Add(20 * time.Second)
	for StreamLeader(ctx, js, stream) != server {
		req, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": server}})
		resp, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, req)
		if err == nil && strings.Contains(string(resp.Data), `"error"`) {
			err = fmt.Errorf("%s", resp.Data)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("leader of %s did not move to %s (last: %v)", stream, server, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return nil
}

func waitDial(t testing.TB, addr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not accept connections: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
