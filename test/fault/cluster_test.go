// Package fault shows that under faults no command is lost or applied twice and bad input is
// contained. Every test runs real nats-servers (a 3-node cluster on loopback where it says so).
package fault

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"maintsignals/functions/command"
	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/shared/embedded"
	"maintsignals/test/testenv"
)

// TestCluster_LeaderNodeKilledMidLoad kills the node that leads the commands stream and the
// bucket while 5,000 commands over 50 entities are in flight with two command replicas, then
// restarts it. Every command must end with exactly one outcome and the records must equal the
// sequential model.
func TestCluster_LeaderNodeKilledMidLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster fault test")
	}
	const n, entities = 5000, 50
	ctx := context.Background()
	c, err := embedded.StartCluster(ctx, embedded.ClusterConfig{Nodes: 3, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	connect := func() *nats.Conn {
		nc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	admin := connect()
	js := testenv.JetStream(t, admin)
	pctx, pcancel := context.WithTimeout(ctx, 60*time.Second)
	defer pcancel()
	if _, err := provision.Run(pctx, js, provision.Config{Replicas: 3, AckWait: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	// Replicated, the buckets still answer direct gets (a tenant's reads; the command
	// function reads from the leader, store.Store.Get).
	for _, cell := range domain.AllCells() {
		if kv, err := js.Stream(ctx, cell.RecordsStream()); err != nil || !kv.CachedInfo().Config.AllowDirect {
			t.Fatalf("replicated bucket %s refuses direct gets (%v)", cell.RecordsBucket(), err)
		}
	}
	// One node leads the commands stream and every bucket: killing it hits all of them.
	victim := c.Leader(domain.CommandsStream)
	for _, cell := range domain.AllCells() {
		if err := c.MoveLeader(ctx, admin, cell.RecordsStream(), victim); err != nil {
			t.Fatal(err)
		}
	}

	fctx, fcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		rjs := testenv.JetStream(t, connect())
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := command.Run(fctx, rjs, command.Config{}); err != nil {
				t.Error(err)
			}
		}()
	}
	t.Cleanup(func() { fcancel(); wg.Wait() })

	cmds := testenv.RandomCommands(rand.New(rand.NewPCG(1, 2)), n, testenv.ResourceIDs("fault-a", entities))
	var killed atomic.Bool
	var killedAt time.Time
	testenv.PublishAll(t, testenv.JetStream(t, connect()), cmds, func(acked int) {
		if acked == n/3 && killed.CompareAndSwap(false, true) {
			killedAt = time.Now()
			c.Kill(victim)
			t.Logf("killed node %d (leader of %s and the bucket) after %d commands", victim, domain.CommandsStream, acked)
		}
		if acked == 2*n/3 {
			if err := c.Restart(victim); err != nil {
				t.Error(err)
			}
			t.Logf("node %d restarted %s after the kill, after %d commands", victim, time.Since(killedAt).Round(time.Millisecond), acked)
		}
	})
	if !killed.Load() {
		t.Fatal("the node was never killed")
	}
	counts := testenv.Verify(t, js, cmds, 3*time.Minute)
	t.Logf("scenario a (leader node killed): %v", counts)
}
