package embedded_test

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"maintsignals/shared/embedded"
	"maintsignals/shared/natsconn/natstest"
)

// securedCluster starts a 3-node cluster with TLS on the client listeners, one nkey user, and
// routes secured with routeTLS.
func securedCluster(t *testing.T, routeTLS *tls.Config) (*embedded.Cluster, *natstest.CA, natstest.User) {
	t.Helper()
	ca := natstest.NewCA(t, "test")
	cert, key := ca.Server(t, "server")
	tc, err := embedded.ServerTLS(cert, key, "")
	if err != nil {
		t.Fatal(err)
	}
	u := natstest.NewUser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	c, err := embedded.StartCluster(ctx, embedded.ClusterConfig{
		Nodes: 3, StoreDir: t.TempDir(), TLS: tc, Nkeys: []*server.NkeyUser{{Nkey: u.Public}}, RouteTLS: routeTLS,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c, ca, u
}

// dialRoute is natstest.RouteGreeting at the route port of node 0.
func dialRoute(t *testing.T, c *embedded.Cluster, tc *tls.Config) (string, error) {
	t.Helper()
	return natstest.RouteGreeting(t, c.Servers[0].ClusterAddr().String(), tc)
}

func TestStartCluster_SecuredRoutesRefuseAPeerWithoutAValidCertificate(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster election takes seconds")
	}
	routeTLS, err := embedded.NewRouteTLS()
	if err != nil {
		t.Fatal(err)
	}
	c, _, _ := securedCluster(t, routeTLS)
	for i, s := range c.Servers {
		if n := s.NumRoutes(); n < 2 {
			t.Errorf("node %d has %d routes, want its 2 peers", i, n)
		}
	}
	other := natstest.NewCA(t, "other")
	otherCert, otherKey := other.Server(t, "rogue")
	rogue, err := tls.LoadX509KeyPair(otherCert, otherKey)
	if err != nil {
		t.Fatal(err)
	}
	otherRoute, err := embedded.NewRouteTLS() // the same name, another in-memory authority
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		tc   *tls.Config
	}{
		{"a plaintext peer", nil},
		{"a TLS peer without a certificate", natstest.NoCertificate()},
		{"a TLS peer with a certificate of another authority", natstest.Presenting(rogue)},
		{"a peer with the route certificate of another cluster", natstest.Presenting(otherRoute.Certificates[0])},
	} {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			line, err := dialRoute(t, c, tt.tc)
			if err == nil || strings.HasPrefix(line, "INFO") || strings.HasPrefix(line, "PONG") {
				t.Fatalf("the route port answered %q (%v)", line, err)
			}
			t.Logf("refused: %v", err)
		})
	}
	t.Run("a peer with the cluster's route certificate is answered (the check above is not vacuous)", func(t *testing.T) {
		line, err := dialRoute(t, c, routeTLS.Clone())
		if err != nil || !strings.HasPrefix(line, "INFO ") {
			t.Fatalf("got %q, %v; want the route INFO", line, err)
		}
	})
	for i, s := range c.Servers {
		if n := s.NumRoutes(); n < 2 {
			t.Errorf("after the attempts node %d has %d routes", i, n)
		}
	}
}

func TestStartCluster_SecuredNodesServeOnlyTLSClientsWithAKey(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster election takes seconds")
	}
	c, ca, u := securedCluster(t, nil) // route TLS made by StartCluster
	urls := strings.Split(c.URLs(), ",")
	if len(urls) != 3 {
		t.Fatalf("URLs %q", c.URLs())
	}
	key, err := nats.NkeyOptionFromSeed(u.SeedFile)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := nats.NkeyOptionFromSeed(natstest.NewUser(t).SeedFile)
	if err != nil {
		t.Fatal(err)
	}
	for i, url := range urls {
		if !strings.HasPrefix(url, "tls://") {
			t.Errorf("node %d URL %q, want tls://", i, url)
		}
		connect := func(url string, opts ...nats.Option) error {
			nc, err := nats.Connect(url, append(opts, nats.Timeout(2*time.Second), nats.MaxReconnects(0))...)
			if err == nil {
				nc.Close()
			}
			return err
		}
		if err := connect(url, nats.RootCAs(ca.CertFile), key); err != nil {
			t.Errorf("node %d: a TLS client with the key: %v", i, err)
		}
		if err := connect(strings.Replace(url, "tls://", "nats://", 1), key); err == nil {
			t.Errorf("node %d: a plaintext client was let in", i)
		}
		if err := connect(url, nats.RootCAs(ca.CertFile)); err == nil {
			t.Errorf("node %d: a TLS client without a key was let in", i)
		}
		if err := connect(url, nats.RootCAs(ca.CertFile), stranger); err == nil {
			t.Errorf("node %d: a TLS client with an unknown key was let in", i)
		}
	}

	// In-process: no TLS, with the key (TestStart_NkeysAuthenticateInProcessConnectionsToo shows
	// that one without is refused), and the connection moves to a live node.
	nc, err := c.Connect(key, nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	on := -1
	for i, s := range c.Servers {
		if s.NumClients() > 0 {
			on = i
		}
	}
	if on < 0 {
		t.Fatal("the in-process connection is on no node")
	}
	c.Kill(on)
	for {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		_, err := js.Publish(pctx, "r3", []byte("after"))
		pcancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no publish after the loss of node %d: %v", on, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
