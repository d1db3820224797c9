package provision_test

import (
	"testing"
	"time"

	"maintsignals/infra/provision"
	"maintsignals/shared/embedded"
	"maintsignals/test/testenv"
)

// TestRunRetrying_RidesOutALeaderElection: two nodes of a 3-node cluster are down when
// provisioning starts (as when the provisioning Job starts beside a NATS that is rolling), and
// one comes back only after several request timeouts: the run waits out the election and
// completes.
func TestRunRetrying_RidesOutALeaderElection(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-node cluster and an election")
	}
	ctx := testenv.Context(t, 2*time.Minute)
	c, err := embedded.StartCluster(ctx, embedded.ClusterConfig{Nodes: 3, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	nc, err := c.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js := testenv.JetStream(t, nc)
	cfg := provision.Config{Replicas: 3, Tick: time.Minute}
	if _, err := provision.RunRetrying(ctx, js, cfg, testenv.Quiet()); err != nil {
		t.Fatalf("first provisioning: %v", err)
	}
	c.Kill(1)
	c.Kill(2)
	back := make(chan error, 1)
	time.AfterFunc(7*time.Second, func() { back <- c.Restart(1) })
	cfg.Tick = 2 * time.Minute // something to change: the schedule
	rep, err := provision.RunRetrying(ctx, js, cfg, testenv.Quiet())
	if err := <-back; err != nil {
		t.Fatalf("restart node 1: %v", err)
	}
	if err != nil {
		t.Fatalf("provisioning across the election: %v\n%v", err, rep)
	}
	if !rep.Changed() {
		t.Errorf("the new tick was not provisioned:\n%v", rep)
	}
}
