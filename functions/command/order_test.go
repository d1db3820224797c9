package command_test

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"maintsignals/functions/command"
	"maintsignals/infra/provision"
	"maintsignals/shared/domain"
	"maintsignals/test/testenv"
)

// TestHandle_FourReplicasKeepPerEntityOrder publishes 2,000 random commands over 20 entities as
// fast as it can, with four replicas consuming, and checks every entity's final record and
// outcomes against a sequential application through the pure state machine, in the order the
// stream stored the commands; and that each entity's events come in that same order.
func TestHandle_FourReplicasKeepPerEntityOrder(t *testing.T) {
	checkOrder(t, false)
}

// The same while the partitions keep moving between the replicas (each released every few
// milliseconds, as a stopping or stalled replica would release it): a replica given a
// partition must not overtake commands another replica still holds.
func TestHandle_PerEntityOrderHoldsWhilePartitionsMove(t *testing.T) {
	checkOrder(t, true)
}

func checkOrder(t *testing.T, move bool) {
	const n, entities = 2000, 20
	env := testenv.Start(t)
	startReplicas(t, env, 4, command.Config{})
	ids := testenv.ResourceIDs("order", entities)
	cmds := testenv.RandomCommands(rand.New(rand.NewPCG(7, 11)), n, ids)
	pjs := testenv.JetStream(t, testenv.Connect(t, env.Server))
	if move {
		moved := unpinContinuously(t, env)
		defer func() { t.Logf("partitions released %d times", moved()) }()
	}
	testenv.PublishAll(t, pjs, cmds, nil)

	counts := testenv.Verify(t, env.JS, cmds, 60*time.Second)
	t.Log(counts)
	if counts.Applied == 0 || counts.Rejected == 0 {
		t.Fatalf("the random mix must exercise both paths: %v", counts)
	}
	// Events of one entity are published in the order its commands were stored.
	for _, id := range ids {
		last := uint64(0)
		for _, ev := range readEvents(t, env.JS, domain.EventSubject(domain.MustKey(id))) {
			if ev.CommandSeq <= last {
				t.Fatalf("%s: event for command seq %d after seq %d", id, ev.CommandSeq, last)
			}
			last = ev.CommandSeq
		}
	}
}

// unpinContinuously releases a random command partition every few milliseconds until the test
// ends, and returns how many releases it made so far.
func unpinContinuously(t *testing.T, env *testenv.Env) func() int {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		st, err := env.JS.Stream(ctx, domain.CommandsStream)
		if err != nil {
			return
		}
		for r := rand.New(rand.NewPCG(3, 5)); ctx.Err() == nil; {
			if st.UnpinConsumer(ctx, domain.CommandConsumer(r.IntN(provision.DefaultConfig().Partitions)), domain.CommandPriorityGroup) == nil {
				n.Add(1)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() int { return int(n.Load()) }
}
