package testenv

import (
	"context"
	"testing"
	"time"

	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/shared/embedded"
)

// StartHub starts an embedded hub (domain hub, a leafnode listener on a loopback port) and
// stops it at cleanup. Env.Server.LeafURL() is where regions join; ProvisionHub makes its
// stream.
func StartHub(t testing.TB) *Env {
	t.Helper()
	s := Server(t, embedded.Config{Name: "hub-0", StoreDir: t.TempDir(), Listen: "127.0.0.1:0",
		Domain: domain.HubDomain, LeafListen: "127.0.0.1:0"})
	e := &Env{Server: s, Dir: s.StoreDir(), NC: Connect(t, s)}
	e.JS = JetStream(t, e.NC)
	return e
}

// ProvisionHub makes the hub's stream, sourcing the regions' summaries.
func ProvisionHub(t testing.TB, hub *Env, regions ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := provision.Hub(ctx, hub.JS, provision.HubConfig{Regions: regions}); err != nil {
		t.Fatalf("provision the hub: %v", err)
	}
}

// StartRegion starts an embedded, provisioned region of domain name joined to the hub at
// hubLeafURL (the region-private subjects kept on its side), and stops it at cleanup.
func StartRegion(t testing.TB, name, hubLeafURL string, opts ...Option) *Env {
	t.Helper()
	return start(t, embedded.Config{Name: name + "-0", StoreDir: t.TempDir(), Listen: "127.0.0.1:0",
		Domain: name, LeafRemote: hubLeafURL, LeafDeny: domain.RegionPrivate}, opts...)
}

// WaitLeaf waits until the server has n leaf node connections.
func WaitLeaf(t testing.TB, s *embedded.Server, n int) {
	t.Helper()
	Eventually(t, 10*time.Second, "leaf node connections", func() bool { return s.NumLeafNodes() == n })
}
